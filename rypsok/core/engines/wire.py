"""The engines' HTTP/1.1 exchanges, driven on h11 over Trio streams.

An engine request is one GET to one origin with a small answer, made about once per search
per engine: what it costs is the client's own Python. httpx's client, httpcore's pool and
their per-read cancel scopes cost about four times the bytes' own trip (measured in
`book/maintainers/measurements.md`); this module keeps only what an engine needs. h11 reads
and writes the messages (so no HTTP parsing is written here); Trio's streams carry them,
with TLS from the one system trust context; connections are kept alive per origin.

What it never does: follow a redirect, send a cookie, read a proxy from the environment or
decompress (the caller does that, under its bound). The caller's Trio scope bounds every
exchange (LIM-S5); the connect timeout is the only clock of this module.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote, urlsplit

import attrs
import h11
import trio

from rypsok.core.turns import receive_some_now, send_all_now

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Sequence

__all__ = ["ConnectFailed", "ConnectTimedOut", "Exchange", "OriginKey", "Wire", "WireFailure"]

# Answer headers above this are a provider's fault, not an answer (httpcore's own bound).
_MAX_HEAD_BYTES: Final = 100 * 1024
_READ_BYTES: Final = 65536
# Idle connections kept per origin, and how long one stays usable: a provider closes an
# idle connection after a few seconds; one older than this is not worth the readability test.
_IDLE_PER_ORIGIN: Final = 8
_IDLE_S: Final = 5.0


class WireFailure(Exception):
    """The exchange failed: refused, reset, TLS, or an answer HTTP/1.1 cannot read."""


class ConnectFailed(WireFailure):
    """No connection to the origin (or its proxy) could be made."""


class ConnectTimedOut(WireFailure):
    """The connection was not made within the connect timeout."""


@attrs.frozen
class OriginKey:
    scheme: str
    host: str
    port: int


@attrs.frozen(kw_only=True)
class Exchange:
    """An answer's status and its header pairs as the provider sent them."""

    status: int
    headers: list[tuple[bytes, bytes]]


@attrs.define
class _Proxy:
    key: OriginKey
    authorization: bytes | None


def parse_proxy(url: str) -> _Proxy:
    """The proxy's origin and credentials; ValueError (never repeating the URL) if unusable."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not a proxy URL")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    authorization = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = b"Basic " + base64.b64encode(pair.encode())
    return _Proxy(OriginKey(parts.scheme, parts.hostname, port), authorization)


class _Conn:
    __slots__ = ("h11", "idle_since", "raw", "reused", "stream")

    def __init__(self, stream: trio.abc.Stream, raw: trio.socket.SocketType) -> None:
        self.stream = stream
        self.raw = raw
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD_BYTES)
        self.idle_since = 0.0
        self.reused = False


def _raw_socket(stream: trio.abc.Stream) -> trio.socket.SocketType:
    while isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    assert isinstance(stream, trio.SocketStream)
    return stream.socket


async def _close(conn: _Conn) -> None:
    await trio.aclose_forcefully(conn.stream)


class Wire:
    """Keep-alive HTTP/1.1 connections per origin, and one exchange at a time on each.

    `tls` gives the client TLS context; it is called at each TLS handshake (an https origin's
    or an https proxy's), never for plain http. `EngineHttp` hands it the system trust context
    it loaded at construction, on purpose: a store that cannot be read stops the start.
    An `OriginKey`'s host is its ASCII form (IDNA for a name): it is written as it is into the
    Host header, the proxy's request line and the TLS server name.
    """

    def __init__(
        self,
        *,
        connect_s: float,
        tls: Callable[[], ssl.SSLContext],
        proxy: str = "",
    ) -> None:
        self._connect_s = connect_s
        self._tls = tls
        self._proxy = parse_proxy(proxy) if proxy else None
        self._idle: dict[OriginKey, list[_Conn]] = {}
        self._closed = False

    @property
    def idle_connections(self) -> int:
        return sum(len(conns) for conns in self._idle.values())

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                await _close(conn)

    async def get(
        self,
        origin: OriginKey,
        target: bytes,
        headers: Sequence[tuple[bytes, bytes]],
        consume: Callable[[Exchange], Callable[[bytes], None] | None],
    ) -> Exchange:
        """One GET of `target` (origin-form) to `origin`.

        `consume` sees the status and headers first and returns the function each body
        chunk goes to, or None to leave the body unread (the connection is then closed).
        Raises WireFailure; the caller's cancellation passes through (the connection used
        is closed, never kept half-read).
        """
        conn = await self._take(origin)
        try:
            return await self._exchange(conn, origin, target, headers, consume)
        except _Stale:
            # A kept connection the provider had already closed, found before any byte of
            # an answer: the same GET on a new connection (it is idempotent).
            conn = await self._open(origin)
            return await self._exchange(conn, origin, target, headers, consume)

    async def _exchange(
        self,
        conn: _Conn,
        origin: OriginKey,
        target: bytes,
        headers: Sequence[tuple[bytes, bytes]],
        consume: Callable[[Exchange], Callable[[bytes], None] | None],
    ) -> Exchange:
        keep = False
        heard = False
        try:
            if self._proxy is not None and origin.scheme == "http":
                # A plain-http origin through the proxy: the absolute form, to the proxy.
                target = _origin_text(origin).encode() + target
                if self._proxy.authorization is not None:
                    headers = [*headers, (b"Proxy-Authorization", self._proxy.authorization)]
            try:
                request = h11.Request(method=b"GET", target=target, headers=list(headers))
                data = conn.h11.send(request)
                end = conn.h11.send(h11.EndOfMessage())
            except h11.LocalProtocolError:
                raise WireFailure("the request cannot be written") from None
            try:
                try:
                    await send_all_now(conn.stream, data + end)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    raise _Broken from None
                event = await _next(conn)
                heard = True
                while type(event) is h11.InformationalResponse:
                    event = await _next(conn)
            except _Broken:
                if conn.reused and not heard:
                    raise _Stale from None
                raise WireFailure("the connection failed") from None
            if type(event) is not h11.Response:
                raise WireFailure("no answer")
            exchange = Exchange(status=event.status_code, headers=event.headers.raw_items())
            sink = consume(exchange)
            if sink is None:
                return exchange
            try:
                while True:
                    event = await _next(conn)
                    if type(event) is h11.Data:
                        sink(event.data)
                    elif type(event) is h11.EndOfMessage:
                        break
                    else:
                        raise WireFailure("the answer ended early")
            except _Broken:
                raise WireFailure("the connection failed") from None
            keep = conn.h11.our_state is h11.DONE and conn.h11.their_state is h11.DONE
            return exchange
        finally:
            if keep and not self._closed:
                self._keep(origin, conn)
            else:
                await _close(conn)

    def _keep(self, origin: OriginKey, conn: _Conn) -> None:
        # A connection not kept is closed now (no TLS goodbye; nothing waits on the network).
        try:
            conn.h11.start_next_cycle()
        except h11.LocalProtocolError:
            conn.raw.close()  # h11 does not see it reusable after all
            return
        idle = self._idle.setdefault(origin, [])
        if len(idle) >= _IDLE_PER_ORIGIN:
            conn.raw.close()
            return
        conn.idle_since = trio.current_time()
        conn.reused = True
        idle.append(conn)

    async def _take(self, origin: OriginKey) -> _Conn:
        idle = self._idle.get(origin)
        now = trio.current_time()
        while idle:
            conn = idle.pop()
            # Readable while idle means closed by the provider (or sent what nobody asked).
            if now - conn.idle_since <= _IDLE_S and not conn.raw.is_readable():
                return conn
            await _close(conn)
        return await self._open(origin)

    async def _open(self, origin: OriginKey) -> _Conn:
        hop = self._proxy.key if self._proxy is not None else origin
        # The outermost stream made so far: closed (with what it wraps) unless it is handed
        # over, whatever ends the attempt (a refusal, the timeout, the caller's cancellation).
        stream: trio.abc.Stream | None = None
        try:
            with trio.move_on_after(self._connect_s) as connecting:
                stream = await trio.open_tcp_stream(hop.host, hop.port)
                if hop.scheme == "https":
                    stream = await self._wrap(stream, hop.host)
                if self._proxy is not None and origin.scheme == "https":
                    stream = await self._tunnel(stream, origin)
                    stream = await self._wrap(stream, origin.host)
            if connecting.cancelled_caught or stream is None:
                raise ConnectTimedOut("connect timeout")
            conn = _Conn(stream, _raw_socket(stream))
            stream = None
            return conn
        except (OSError, trio.BrokenResourceError) as exc:
            raise ConnectFailed("no connection") from exc
        finally:
            if stream is not None:
                await trio.aclose_forcefully(stream)

    async def _wrap(self, stream: trio.abc.Stream, host: str) -> trio.SSLStream[trio.abc.Stream]:
        # A failed handshake leaves `stream` to `_open`, which closes it.
        tls = trio.SSLStream(stream, self._tls(), server_hostname=host, https_compatible=True)
        await tls.do_handshake()
        return tls

    async def _tunnel(self, stream: trio.abc.Stream, origin: OriginKey) -> trio.abc.Stream:
        """CONNECT through the proxy to an https origin; the stream then carries its TLS.
        On failure `stream` is left to `_open`, which closes it."""
        assert self._proxy is not None
        authority = f"{_host_text(origin.host)}:{origin.port}".encode()
        headers = [(b"Host", authority)]
        if self._proxy.authorization is not None:
            headers.append((b"Proxy-Authorization", self._proxy.authorization))
        conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD_BYTES)
        try:
            await stream.send_all(
                conn.send(h11.Request(method=b"CONNECT", target=authority, headers=headers))
                + conn.send(h11.EndOfMessage())
            )
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(bytes(await stream.receive_some(_READ_BYTES)))
                    continue
                break
        except h11.ProtocolError:
            raise ConnectFailed("the proxy did not open a tunnel") from None
        if type(event) is not h11.Response or not 200 <= event.status_code < 300:
            raise ConnectFailed("the proxy refused the tunnel")
        leftover, _ = conn.trailing_data
        if leftover:
            raise ConnectFailed("the proxy spoke before the tunnel was used")
        return stream


class _Broken(Exception):
    """The connection ended or broke under an exchange (internal)."""


class _Stale(Exception):
    """A kept connection turned out closed before any answer (internal: retried once)."""


async def _next(conn: _Conn) -> h11.Event | type[h11.PAUSED] | type[h11.NEED_DATA]:
    machine = conn.h11
    while True:
        try:
            event = machine.next_event()
        except h11.RemoteProtocolError:
            raise WireFailure("the answer is not HTTP/1.1") from None
        if event is h11.NEED_DATA:
            try:
                data = await receive_some_now(conn.stream, _READ_BYTES)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                raise _Broken from None
            if not data and machine.their_state is h11.SEND_RESPONSE:
                raise _Broken  # closed before a byte of an answer
            try:
                machine.receive_data(data)
            except h11.RemoteProtocolError:
                raise WireFailure("the answer is not HTTP/1.1") from None
            continue
        if type(event) is h11.ConnectionClosed:
            raise _Broken
        return event


def _host_text(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _origin_text(origin: OriginKey) -> str:
    return f"{origin.scheme}://{host_header(origin).decode()}"


def host_header(origin: OriginKey) -> bytes:
    """The Host header of a request to `origin`: the port only when not the scheme's own."""
    default = 443 if origin.scheme == "https" else 80
    port = "" if origin.port == default else f":{origin.port}"
    return f"{_host_text(origin.host)}{port}".encode()
