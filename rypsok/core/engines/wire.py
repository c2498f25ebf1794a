"""The engines' HTTP/1.1 exchanges over Trio streams, answers read by llhttp (httptools).

An engine request is one GET to one origin with a small answer, made about once per search
per engine: what it costs is the client's own Python. httpx's client, httpcore's pool and
their per-read cancel scopes cost about four times the bytes' own trip, and h11's pure-Python
state machine most of what was left (measured in `book/maintainers/measurements.md`); this
module keeps only what an engine needs. The answers are parsed by httptools (Node's llhttp,
in C, strict: no parsing is written here); the request, one GET line and the headers the
caller chose, is written here, each field checked before a byte is sent. Trio's streams carry
them, with TLS from the one system trust context; connections are kept alive per origin.

What it never does: follow a redirect, send a cookie, read a proxy from the environment or
decompress (the caller does that, under its bound). The caller's Trio scope bounds every
exchange (LIM-S5); the connect timeout is the only clock of this module.
"""

from __future__ import annotations

import base64
import re
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote, urlsplit

import attrs
import httptools
import trio

from rypsok.core.turns import receive_some_now, send_all_now

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Sequence

__all__ = ["ConnectFailed", "ConnectTimedOut", "Exchange", "OriginKey", "Wire", "WireFailure"]

# Answer headers above this are a provider's fault, not an answer (httpcore's own bound):
# an answer whose head is still incomplete past it is refused.
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
    __slots__ = ("idle_since", "raw", "reused", "stream")

    def __init__(self, stream: trio.abc.Stream, raw: trio.socket.SocketType) -> None:
        self.stream = stream
        self.raw = raw
        self.idle_since = 0.0
        self.reused = False


# RFC 9110's token (a field name) and field value (no CR, LF or NUL; no space at either end),
# and a request target of visible ASCII (origin, absolute or authority form): what may be
# written into a request. The callers build every field, but an API key read from a file is
# one of them, and a line break in it must not become a header of its own.
_TOKEN: Final = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FIELD_VALUE: Final = re.compile(
    rb"(?:[\x21-\x7e\x80-\xff](?:[\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?)?"
)
_TARGET: Final = re.compile(rb"[\x21-\x7e]+")


def request_head(method: bytes, target: bytes, headers: Sequence[tuple[bytes, bytes]]) -> bytes:
    """The request's head as written; WireFailure (nothing written) for a field HTTP/1.1
    cannot carry."""
    if not _TARGET.fullmatch(target):
        raise WireFailure("the request cannot be written")
    lines = [method, b" ", target, b" HTTP/1.1\r\n"]
    for name, value in headers:
        if not _TOKEN.fullmatch(name) or not _FIELD_VALUE.fullmatch(value):
            raise WireFailure("the request cannot be written")
        lines += (name, b": ", value, b"\r\n")
    lines.append(b"\r\n")
    return b"".join(lines)


class _Answer:
    """What the parser has read of one answer: httptools calls these as bytes are fed.

    Interim answers (1xx) are passed over; `heard` says one head, interim or final, was
    read whole. Body pieces wait in `body` until the caller takes them after each feed, so
    nothing the caller does runs inside the parser.
    """

    __slots__ = (
        "body",
        "done",
        "extra",
        "framed",
        "head_done",
        "headers",
        "heard",
        "interim",
        "keep",
        "parser",
        "status",
        "unsupported",
    )

    # Set when the final head has been read (`head_done`), and read only after it.
    status: int
    keep: bool  # llhttp's view: the provider keeps the connection after this answer
    framed: bool  # a length or chunks end the body, not the close

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.heard = False
        self.interim = False
        self.head_done = False
        self.done = False
        self.extra = False  # a next message began after the answer: the connection is not kept
        self.unsupported = False

    def on_message_begin(self) -> None:
        if self.done:
            self.extra = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.head_done:  # a chunked body's trailer fields are not the answer's
            self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self.done:
            return  # a second answer nobody asked for: only closes the connection
        self.heard = True
        status = self.parser.get_status_code()
        if status < 200:
            self.interim = True
            self.headers = []
            return
        self.status = status
        self.head_done = True
        self.keep = self.parser.should_keep_alive()
        codings = [v.strip().lower() for n, v in self.headers if n.lower() == b"transfer-encoding"]
        # Only chunked is a transfer coding HTTP/1.1 clients must read; anything else
        # would leave the body's end to guesswork.
        self.unsupported = bool(codings) and codings != [b"chunked"]
        # (An answer that has no body, 204 or 304, has ended with its head: `done`.)
        self.framed = bool(codings) or any(n.lower() == b"content-length" for n, _ in self.headers)

    def on_body(self, body: bytes) -> None:
        if not self.done:
            self.body.append(body)

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim = False
        else:
            self.done = True

    def feed(self, data: bytes) -> None:
        """`data` to the parser; WireFailure if it is not HTTP/1.1 an engine answers with.
        Bytes the provider sent after the answer only keep the connection from being reused."""
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):
            # An upgrade (101) is no answer to a GET or a CONNECT either. After the answer's
            # end, llhttp errs only on a next message it has begun (`extra`) or on bytes
            # after `Connection: close`: either way the connection is not kept.
            if not self.done:
                raise WireFailure("the answer is not HTTP/1.1") from None
        if self.unsupported:
            raise WireFailure("the answer is not HTTP/1.1")

    async def read_head(self, stream: trio.abc.Stream) -> None:
        """Feed what `stream` brings until the final head is read whole: _Broken if the
        stream ends or breaks first, WireFailure past the head bound."""
        received = 0
        while not self.head_done:
            data = await _receive(stream)
            if not data:
                raise _Broken  # closed before an answer's head
            received += len(data)
            self.feed(data)
            if not self.head_done and received > _MAX_HEAD_BYTES:
                raise WireFailure("the answer is not HTTP/1.1")


async def _receive(stream: trio.abc.Stream) -> bytes:
    try:
        return await receive_some_now(stream, _READ_BYTES)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        raise _Broken from None


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
        answer = _Answer()
        try:
            if self._proxy is not None and origin.scheme == "http":
                # A plain-http origin through the proxy: the absolute form, to the proxy.
                target = _origin_text(origin).encode() + target
                if self._proxy.authorization is not None:
                    headers = [*headers, (b"Proxy-Authorization", self._proxy.authorization)]
            data = request_head(b"GET", target, headers)
            try:
                try:
                    await send_all_now(conn.stream, data)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    raise _Broken from None
                await answer.read_head(conn.stream)
            except _Broken:
                if conn.reused and not answer.heard:
                    raise _Stale from None
                raise WireFailure("the connection failed") from None
            exchange = Exchange(status=answer.status, headers=answer.headers)
            sink = consume(exchange)
            if sink is None:
                return exchange
            try:
                while True:
                    pieces, answer.body = answer.body, []
                    for piece in pieces:
                        sink(piece)
                    if answer.done:
                        break
                    data = await _receive(conn.stream)
                    if not data:
                        # Read until the close, the close ends the body (and the
                        # connection: llhttp never saw the answer end).
                        if answer.framed:
                            raise WireFailure("the answer ended early")
                        break
                    answer.feed(data)
            except _Broken:
                raise WireFailure("the connection failed") from None
            keep = answer.done and answer.keep and not answer.extra
            return exchange
        finally:
            if keep and not self._closed:
                self._keep(origin, conn)
            else:
                await _close(conn)

    def _keep(self, origin: OriginKey, conn: _Conn) -> None:
        # A connection not kept is closed now (no TLS goodbye; nothing waits on the network).
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
        answer = _Answer()
        try:
            await stream.send_all(request_head(b"CONNECT", authority, headers))
            await answer.read_head(stream)
        except (_Broken, WireFailure):
            raise ConnectFailed("the proxy did not open a tunnel") from None
        if not 200 <= answer.status < 300:
            raise ConnectFailed("the proxy refused the tunnel")
        # A 2xx to CONNECT has no body: whatever followed its head came before the tunnel
        # was used.
        if answer.body or answer.extra:
            raise ConnectFailed("the proxy spoke before the tunnel was used")
        return stream


class _Broken(Exception):
    """The connection ended or broke under an exchange (internal)."""


class _Stale(Exception):
    """A kept connection turned out closed before any answer (internal: retried once)."""


def _host_text(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _origin_text(origin: OriginKey) -> str:
    return f"{origin.scheme}://{host_header(origin).decode()}"


def host_header(origin: OriginKey) -> bytes:
    """The Host header of a request to `origin`: the port only when not the scheme's own."""
    default = 443 if origin.scheme == "https" else 80
    port = "" if origin.port == default else f":{origin.port}"
    return f"{_host_text(origin.host)}{port}".encode()
