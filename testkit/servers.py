"""Local HTTP/1.1 servers for the tests, the harness and the tools, on 127.0.0.1 and an
ephemeral port.

Use it from a Trio test (real clock: the server does real socket I/O):
`from testkit.servers import Reply, serve_http`:

    async with serve_http({"/w/api.php": Reply.json({"query": {"search": []}})}) as server:
        ...  # server.url is "http://127.0.0.1:<port>"
        assert server.requests[0].param("srsearch") == "rust"

- A route maps an exact path to a `Reply`, or to a function `(RecordedRequest) -> Reply`
  for answers that depend on the request (or that change from one request to the next).
  `server.route(path, reply)` adds or replaces one while the server runs. A path without a
  route gets `default` (404 unless given).
- Every request is recorded, in arrival order, in `server.requests`: method, the request
  target as sent (origin-form, or absolute-form when the client took the server for a
  proxy), path, query pairs, headers (names lower-cased) and body.
- `Reply.delay_s` waits before the status line (a slow provider); `Reply.chunks` sends the
  body in several writes, `Reply.chunk_delay_s` apart (a trickling body);
  `Reply.content_length=False` leaves the header out and ends the body by closing the
  connection. Every answer closes its connection.
- `server.active` and `server.max_active` count connections being answered, now and at
  most, for tests of concurrency caps.

With `tls=` (a server context from `provider_network.tls_for(host)`) the server speaks TLS
alone: `provider_network.ProviderNetwork` then carries a provider's host to it through the
engines' production stack.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import attrs
import trio

if TYPE_CHECKING:
    import ssl

__all__ = [
    "LocalHttpServer",
    "RecordedRequest",
    "Reply",
    "over_tls",
    "read_request",
    "serve_http",
    "serve_loopback",
    "write_reply",
]

_MAX_HEAD = 65536


@attrs.frozen(kw_only=True)
class Reply:
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    delay_s: float = 0.0
    chunks: int = 1
    chunk_delay_s: float = 0.0
    content_length: bool = True

    @classmethod
    def json(
        cls, payload: Any, *, status: int = 200, headers: tuple[tuple[str, str], ...] = ()
    ) -> Reply:
        return cls(
            status=status,
            headers=(("Content-Type", "application/json"), *headers),
            body=json.dumps(payload).encode(),
        )


@attrs.frozen(kw_only=True)
class RecordedRequest:
    method: str
    target: str
    path: str
    query: tuple[tuple[str, str], ...]
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)

    def param(self, name: str) -> str | None:
        return next((v for k, v in self.query if k == name), None)


Handler = Reply | Callable[[RecordedRequest], Reply]


class LocalHttpServer:
    def __init__(self, port: int, routes: Mapping[str, Handler], default: Handler) -> None:
        self.host = "127.0.0.1"
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.requests: list[RecordedRequest] = []
        self.active = 0  # connections being answered now
        self.max_active = 0  # the most answered at once since the start
        self._routes: dict[str, Handler] = dict(routes)
        self._default = default

    def route(self, path: str, reply: Handler) -> None:
        self._routes[path] = reply

    def reply_for(self, request: RecordedRequest) -> Reply:
        handler = self._routes.get(request.path, self._default)
        return handler(request) if callable(handler) else handler


async def read_request(stream: trio.abc.Stream) -> RecordedRequest | None:
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buffer += data
        if len(buffer) > _MAX_HEAD:
            return None
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.append((name.strip().lower(), value.strip()))
    length = int(next((v for k, v in headers if k == "content-length"), "0"))
    body = rest
    while len(body) < length:
        data = await stream.receive_some(65536)
        if not data:
            break
        body += data
    split = urlsplit(target)
    return RecordedRequest(
        method=method,
        target=target,
        path=split.path or "/",
        query=tuple(parse_qsl(split.query, keep_blank_values=True)),
        headers=tuple(headers),
        body=body[:length],
    )


async def _answer(server: LocalHttpServer, stream: trio.abc.Stream) -> None:
    server.active += 1
    server.max_active = max(server.max_active, server.active)
    try:
        request = await read_request(stream)
        if request is None:
            return
        server.requests.append(request)
        await write_reply(stream, server.reply_for(request))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the client went away first: normal when it stops reading at a bound
    finally:
        server.active -= 1
        await stream.aclose()


async def write_reply(stream: trio.abc.Stream, reply: Reply) -> None:
    """`reply` on `stream` as this module's servers write it (then the caller closes)."""
    if reply.delay_s:
        await trio.sleep(reply.delay_s)
    try:
        phrase = HTTPStatus(reply.status).phrase
    except ValueError:
        phrase = "Status"
    head = [f"HTTP/1.1 {reply.status} {phrase}"]
    head += [f"{k}: {v}" for k, v in reply.headers]
    if reply.content_length and not any(k.lower() == "content-length" for k, _ in reply.headers):
        head.append(f"Content-Length: {len(reply.body)}")
    head.append("Connection: close")
    await stream.send_all(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
    if reply.body:
        size = max(1, -(-len(reply.body) // max(1, reply.chunks)))
        for start in range(0, len(reply.body), size):
            if start and reply.chunk_delay_s:
                await trio.sleep(reply.chunk_delay_s)
            await stream.send_all(reply.body[start : start + size])


def over_tls(
    answer: Callable[[trio.abc.Stream], Awaitable[None]],
    tls: ssl.SSLContext | None,
    *,
    https_compatible: bool = False,
) -> Callable[[trio.SocketStream], Awaitable[None]]:
    """A connection handler: `answer` on the connection, or with `tls` on the TLS stream
    over it once its handshake is done (a failed handshake closes it unanswered)."""

    async def handler(stream: trio.SocketStream) -> None:
        if tls is None:
            await answer(stream)
            return
        secured = trio.SSLStream(stream, tls, server_side=True, https_compatible=https_compatible)
        try:
            await secured.do_handshake()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            await stream.aclose()
            return
        await answer(secured)

    return handler


async def serve_loopback(
    handler: Callable[[trio.SocketStream], Awaitable[object]],
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """`handler` for every connection to a fresh port of 127.0.0.1, for servers of their
    own making (keep-alive, a hang): start it with `port = await nursery.start(...)`."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handler, listeners)
        task_status.started(listeners[0].socket.getsockname()[1])


@asynccontextmanager
async def serve_http(
    routes: Mapping[str, Handler] | None = None,
    *,
    default: Handler | None = None,
    tls: ssl.SSLContext | None = None,
) -> AsyncIterator[LocalHttpServer]:
    """Run a server for the length of the `async with` block; over TLS with `tls` (a server
    context, such as `provider_network.AUTHORITY.server_context(name)`)."""
    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        server = LocalHttpServer(port, routes or {}, default or Reply(status=404))
        if tls is not None:
            server.url = f"https://127.0.0.1:{port}"

        handler = over_tls(functools.partial(_answer, server), tls, https_compatible=True)
        nursery.start_soon(trio.serve_listeners, handler, listeners)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
