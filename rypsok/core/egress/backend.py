"""The network backend of agent-directed requests: it resolves, judges and connects
(REQ-SEC-007, THR-06).

httpcore asks a network backend for a TCP stream to (host, port). This backend resolves
the name itself, judges every address it got with `EgressPolicy.judge_address` (the
function the URL was judged with), and connects only to an address it judged, in the
resolver's order. There is no second lookup between the judgment and the connection, so an
answer that changes between two resolutions (DNS rebinding) cannot slip an address past
the policy: the address judged is the address connected to. TLS is started by httpcore on
the stream returned here with the name as server name, so SNI, the certificate check and
the Host header all stay the name.

When every address is refused the backend raises `EgressRefused`, never a connect error:
the fetch pipeline answers it exactly as a name that does not resolve (unavailable,
network) and logs the refusal class, but nothing retries it as a transient failure.
"""

from __future__ import annotations

import ipaddress
import itertools
import socket
from typing import TYPE_CHECKING, Any, Final, Protocol

import httpcore
import trio

from rypsok.core.egress.names import parse_host
from rypsok.core.egress.vocabulary import Refusal

if TYPE_CHECKING:
    import ssl
    from collections.abc import Iterable, Sequence

    from rypsok.core.egress.policy import EgressPolicy
    from rypsok.core.egress.ranges import Address

__all__ = [
    "EgressBackend",
    "EgressRefused",
    "NetworkBackend",
    "Resolver",
    "SystemResolver",
    "TcpBackend",
]

# More addresses than any real answer holds; a hostile resolver cannot make the backend
# judge and try an unbounded list.
_MAX_ADDRESSES: Final = 32


class EgressRefused(Exception):
    """Every address of the destination was refused by the egress policy.

    Deliberately not httpcore's `ConnectError`, which is retried and remapped as a transient
    failure; the clients name it beside the connect errors (`CONNECT_ERRORS`). `refusal` is
    for the operator's log; the message is fixed and never names the host or an address.
    """

    def __init__(self, refusal: Refusal) -> None:
        super().__init__("the destination was refused by the egress policy")
        self.refusal: Final = refusal


class Resolver(Protocol):
    """Turns a name into addresses. Tests inject one that maps names to loopback."""

    async def resolve(self, name: str, port: int) -> Sequence[Address]:
        """The addresses of `name`, in the order to try; raise OSError when it has none."""
        ...


class NetworkBackend(Protocol):
    """Opens a TCP stream to one address that was judged. Tests inject a recording one."""

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        """A connected stream; raise OSError when the connection fails."""
        ...


class SystemResolver:
    """The system's resolver through Trio (a worker thread per lookup, abandoned on
    cancellation, so the connect timeout bounds a resolver that never answers)."""

    async def resolve(self, name: str, port: int) -> Sequence[Address]:
        infos = await trio.socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        out: list[Address] = []
        for family, _type, _proto, _canonname, sockaddr in infos:
            if family not in (socket.AF_INET, socket.AF_INET6):
                continue
            text = str(sockaddr[0]).split("%", 1)[0]
            try:
                address = ipaddress.ip_address(text)
            except ValueError:
                continue
            if address not in out:
                out.append(address)
        return out


class TcpBackend:
    """A plain TCP connection to a numeric address: no lookup can happen here."""

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        return await trio.open_tcp_stream(str(address), port)


class _TrioStream(httpcore.AsyncNetworkStream):
    """httpcore's view of a Trio stream, with Trio's errors mapped to httpcore's (httpcore's
    own Trio backend calls its adapter `TrioStream` too)."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream
        # Found once: httpcore asks for it before every request on a kept-alive connection
        # (`is_readable`), and a stream never changes what it wraps.
        self._socket = _socket_stream(stream)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        bound = _bound(timeout)
        try:
            if bound is None:
                return bytes(await self._stream.receive_some(max_bytes))
            with bound:
                return bytes(await self._stream.receive_some(max_bytes))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise httpcore.ReadError("the connection failed while reading") from exc
        # Only the timeout's own cancellation, caught by its scope, comes out here.
        raise httpcore.ReadTimeout("the read timed out")

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not buffer:
            return
        bound = _bound(timeout)
        try:
            if bound is None:
                await self._stream.send_all(buffer)
                return
            with bound:
                await self._stream.send_all(buffer)
                return
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise httpcore.WriteError("the connection failed while writing") from exc
        # Only the timeout's own cancellation, caught by its scope, comes out here.
        raise httpcore.WriteTimeout("the write timed out")

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
    ) -> httpcore.AsyncNetworkStream:
        tls = trio.SSLStream(
            self._stream, ssl_context, server_hostname=server_hostname, https_compatible=True
        )
        try:
            with trio.fail_after(_seconds(timeout)):
                await tls.do_handshake()
        except trio.TooSlowError:
            await trio.aclose_forcefully(self._stream)
            raise httpcore.ConnectTimeout("the TLS handshake timed out") from None
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            await trio.aclose_forcefully(self._stream)
            raise httpcore.ConnectError("the TLS handshake failed") from exc
        return _TrioStream(tls)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            if isinstance(self._stream, trio.SSLStream):
                return self._stream._ssl_object
            return None
        sock = self._socket
        if sock is None:
            return None
        if info == "socket":
            return sock.socket
        if info == "client_addr":
            return sock.socket.getsockname()
        if info == "server_addr":
            return sock.socket.getpeername()
        if info == "is_readable":
            return sock.socket.is_readable()
        return None


def _socket_stream(stream: trio.abc.Stream) -> trio.SocketStream | None:
    """The TCP socket stream under `stream` (through its TLS layers), or None (a test's
    memory stream)."""
    while isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    return stream if isinstance(stream, trio.SocketStream) else None


def _seconds(timeout: float | None) -> float:
    # httpcore passes the request's own timeout; a budget already spent is zero, never an error.
    return float("inf") if timeout is None else max(timeout, 0.0)


def _bound(timeout: float | None) -> trio.CancelScope | None:
    """The cancel scope of one read's or write's timeout, or None when it could never be the
    one that ends the operation: no timeout, or one that falls at or after the deadline of
    the scopes around the call (an engine's read timeout is the time left of its total, so it
    always does). Trio delivers a cancellation to the outermost cancelled scope, so such an
    inner scope would never catch anything; rypsok only ever moves a deadline earlier."""
    if timeout is None:
        return None
    deadline = trio.current_time() + max(timeout, 0.0)
    if deadline >= trio.current_effective_deadline():
        return None
    return trio.CancelScope(deadline=deadline)


class EgressBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that connects only to addresses the policy admits.

    `attempts` (for statistics and tests) counts the connections tried; the connect
    timeout is the smaller of httpcore's and the policy's LIM-F6, and covers the lookup and
    every attempt together.
    """

    def __init__(
        self,
        policy: EgressPolicy,
        *,
        resolver: Resolver | None = None,
        network_backend: NetworkBackend | None = None,
    ) -> None:
        self._policy = policy
        self._resolver: Resolver = resolver if resolver is not None else SystemResolver()
        self._network_backend: NetworkBackend = (
            network_backend if network_backend is not None else TcpBackend()
        )

    async def admitted_addresses(self, host: str, port: int) -> list[Address]:
        """Resolve `host` (or read it when it is an address) and return the addresses the
        policy admits, in order; raise EgressRefused when it admits none."""
        parsed = parse_host(f"[{host}]" if ":" in host else host)
        if isinstance(parsed, Refusal):
            raise EgressRefused(parsed)
        if parsed.address is not None:
            candidates: Sequence[Address] = [parsed.address]
            name = None
        else:
            assert parsed.name is not None
            name = parsed.name
            refusal = self._policy.judge_name(name)
            if refusal is not None:
                raise EgressRefused(refusal)
            try:
                answer = await self._resolver.resolve(name, port)
                # Read only up to the bound, however long (or endless) the answer is.
                candidates = list(itertools.islice(answer, _MAX_ADDRESSES))
            except Exception:
                # No such name, no answer, a name the system's encoder refuses, or a resolver
                # that failed in its own way: all are a name that cannot be reached, never
                # a crash of the call (cancellation is a BaseException and passes).
                raise httpcore.ConnectError("the name could not be resolved") from None
        admitted: list[Address] = []
        first_refusal: Refusal | None = None
        for address in candidates:
            if not isinstance(address, ipaddress.IPv4Address | ipaddress.IPv6Address):
                continue  # not an address: nothing that could be judged or dialled
            refusal = self._policy.judge_address(address, host=name)
            if refusal is None:
                if address not in admitted:
                    admitted.append(address)
            elif first_refusal is None:
                first_refusal = refusal
        if not admitted:
            if first_refusal is None:
                raise httpcore.ConnectError("the name has no address")
            raise EgressRefused(first_refusal)
        return admitted

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        limit = min(self._policy.connect_timeout_s, _seconds(timeout))
        if limit <= 0:
            raise httpcore.ConnectTimeout("the connection timed out")
        try:
            with trio.fail_after(limit):
                for address in await self.admitted_addresses(host, port):
                    try:
                        stream = await self._network_backend.connect(address, port)
                    except OSError:
                        continue  # the next admitted address, as a browser would
                    return _TrioStream(stream)
        except trio.TooSlowError:
            raise httpcore.ConnectTimeout("the connection timed out") from None
        raise httpcore.ConnectError("no address of the destination accepted a connection")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        # Agent-directed requests go to Internet hosts only; a local socket is no such host.
        raise EgressRefused(Refusal.MALFORMED_HOST)

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)
