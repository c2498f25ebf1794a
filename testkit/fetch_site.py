"""The fixture web site behind the book's web_fetch examples, on loopback, over TLS.

`https://example.org/rust-ownership` is the page of `fixtures/rust-ownership.html`;
`/robots.txt` lets every agent read everything. The certificate names example.org and is
signed by an authority made for this run only; the launched rypsok trusts that authority
alone (`--fetch-ca`), reaches the site through an allow rule added in code and a resolver
that maps example.org to 127.0.0.1 (`--fetch-site`), and never touches the network.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from rypsok.core.egress.testing import MapResolver, RecordingBackend
from rypsok.core.services import FetchNetwork
from testkit.authority import Authority

if TYPE_CHECKING:
    from rypsok.core.egress.ranges import Address

__all__ = ["HOST", "FixtureSite", "LoopbackPort", "loopback_network"]

HOST = "example.org"
FIXTURES = Path(__file__).parent / "fixtures"
_HEAD_LIMIT = 65536


def _pages() -> dict[str, tuple[int, tuple[tuple[str, str], ...], bytes]]:
    page = (FIXTURES / "rust-ownership.html").read_bytes()
    return {
        "/rust-ownership": (200, (("Content-Type", "text/html; charset=utf-8"),), page),
        "/robots.txt": (200, (("Content-Type", "text/plain"),), b"User-agent: *\nAllow: /\n"),
    }


class FixtureSite:
    """Serves the pages over TLS; `ca_file` is the authority's certificate (PEM).

    `hosts` are the names the certificate covers (example.org by default) and `pages` the
    paths served (the book's page and robots.txt by default).
    """

    def __init__(
        self,
        directory: str,
        *,
        hosts: tuple[str, ...] = (HOST,),
        pages: dict[str, tuple[int, tuple[tuple[str, str], ...], bytes]] | None = None,
    ) -> None:
        authority = Authority("rypsok conformance authority")
        self._tls = authority.server_context(*hosts)
        self.ca_file = Path(directory) / "ca.pem"
        self.ca_file.write_bytes(authority.pem)
        self._pages = pages if pages is not None else _pages()

    async def _answer(self, raw: trio.SocketStream) -> None:
        stream = trio.SSLStream(raw, self._tls, server_side=True)
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < _HEAD_LIMIT:
                data = await stream.receive_some(4096)
                if not data:
                    return
                head += data
            target = head.split(b" ", 2)[1].decode("latin-1")
            status, headers, body = self._pages.get(
                target, (404, (("Content-Type", "text/plain"),), b"not found")
            )
            lines = [f"HTTP/1.1 {status} X", *(f"{k}: {v}" for k, v in headers)]
            lines += [f"Content-Length: {len(body)}", "Connection: close"]
            await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        except (trio.BrokenResourceError, trio.ClosedResourceError, IndexError):
            pass
        finally:
            await raw.aclose()

    async def serve(
        self,
        address: str = "127.0.0.1",
        *,
        task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        listeners = await trio.open_tcp_listeners(0, host=address)
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(self._answer, listeners)


def temporary_folder() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="rypsok-conformance-")


class LoopbackPort:
    """A network backend that carries every connection, whatever port the policy judged
    (80 or 443), to `port` of the loopback address the name resolved to; an address off
    loopback is refused (the recording backend's guard), so nothing leaves the machine."""

    def __init__(self, port: int) -> None:
        self._port = port
        self.recording = RecordingBackend()

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        return await self.recording.connect(address, self._port)


def loopback_network(host: str, port: int) -> FetchNetwork:
    """The fetch network of a rypsok that reads `host` from a server on 127.0.0.1:`port`:
    the production policy with one allow rule added in code (REQ-TEST-005), a resolver that
    knows that name only, and the backend above."""
    return FetchNetwork(
        extra_allow=(host,),
        resolver=MapResolver({host: ["127.0.0.1"]}),
        network_backend=LoopbackPort(port),
    )
