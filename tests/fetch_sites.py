"""Hostile and ordinary web sites for the web_fetch tests, on 127.0.0.1 and ephemeral ports.

A route maps a path to a `Page`: a status, headers and a body given as bytes or as an async
generator (a slow drip, a page that never ends). The server writes what the page says and
nothing more (no Content-Length unless the page gives one, the connection closed at the
end), so a test controls the wire exactly. Every request is recorded.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import aclosing, asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from testkit.servers import over_tls, read_request

if TYPE_CHECKING:
    import ssl

__all__ = ["Page", "Site", "endless", "gzip_bomb", "serve_site"]

Body = bytes | Callable[[], AsyncIterator[bytes]]


@attrs.frozen(kw_only=True)
class Page:
    status: int = 200
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "text/html; charset=utf-8"),)
    body: Body = b""
    delay_s: float = 0.0
    content_length: bool = True

    @classmethod
    def html(cls, text: str, **kwargs: Any) -> Page:
        return cls(body=text.encode("utf-8"), **kwargs)

    @classmethod
    def redirect(cls, location: str, status: int = 301) -> Page:
        return cls(status=status, headers=(("Location", location),))

    @classmethod
    def text(cls, text: str, media_type: str = "text/plain; charset=utf-8") -> Page:
        return cls(headers=(("Content-Type", media_type),), body=text.encode("utf-8"))


@attrs.define
class Seen:
    path: str
    headers: dict[str, str]


class Site:
    def __init__(self, port: int, routes: Mapping[str, Page]) -> None:
        self.port = port
        self.routes: dict[str, Page] = dict(routes)
        self.seen: list[Seen] = []
        self.active = 0
        self.max_active = 0
        self.address = "127.0.0.1"

    def paths(self) -> list[str]:
        return [s.path for s in self.seen]


async def _answer(site: Site, stream: trio.abc.Stream) -> None:
    site.active += 1
    site.max_active = max(site.max_active, site.active)
    try:
        request = await read_request(stream)
        if request is None:
            return
        site.seen.append(Seen(path=request.target, headers=dict(request.headers)))
        page = site.routes.get(request.target, Page(status=404, body=b"no such page"))
        if page.delay_s:
            await trio.sleep(page.delay_s)
        lines = [f"HTTP/1.1 {page.status} X"] + [f"{k}: {v}" for k, v in page.headers]
        if isinstance(page.body, bytes) and page.content_length:
            lines.append(f"Content-Length: {len(page.body)}")
        lines.append("Connection: close")
        await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if isinstance(page.body, bytes):
            await stream.send_all(page.body)
        else:
            async with aclosing(page.body()) as chunks:
                async for chunk in chunks:
                    await stream.send_all(chunk)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the client stopped reading (a bound, a deadline): expected
    finally:
        site.active -= 1
        await stream.aclose()


@asynccontextmanager
async def serve_site(
    routes: Mapping[str, Page],
    *,
    address: str = "127.0.0.1",
    tls: ssl.SSLContext | None = None,
) -> AsyncIterator[Site]:
    """A site on `address` (any of 127.0.0.0/8) and an ephemeral port; over TLS with `tls`."""
    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host=address)
        site = Site(listeners[0].socket.getsockname()[1], routes)
        site.address = address

        handler = over_tls(functools.partial(_answer, site), tls)
        nursery.start_soon(trio.serve_listeners, handler, listeners)
        try:
            yield site
        finally:
            nursery.cancel_scope.cancel()


def endless(
    chunk: bytes = b"<p>more</p>" * 100, pause_s: float = 0.0
) -> Callable[[], AsyncIterator[bytes]]:
    async def body() -> AsyncIterator[bytes]:
        while True:
            yield chunk
            await trio.sleep(pause_s)

    return body


def gzip_bomb(decompressed_bytes: int) -> bytes:
    """A gzip stream of zeros that expands to `decompressed_bytes`, made without holding it."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\0" * (1 << 20)
    parts = []
    left = decompressed_bytes
    while left > 0:
        piece = block if left >= len(block) else block[:left]
        parts.append(compressor.compress(piece))
        left -= len(piece)
    parts.append(compressor.flush())
    return b"".join(parts)
