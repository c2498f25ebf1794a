"""The engines' HTTP/1.1 exchanges (rypsok.core.engines.wire), over real loopback sockets.

Each server here is scripted byte by byte, so that keep-alive, a provider closing a kept
connection, chunked and unbounded bodies, broken answers and the proxy's tunnel are each
exercised the way a provider or a proxy would produce them.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import gzip
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from fetch_helpers import Authority
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rypsok.core.engines import wire as wire_module
from rypsok.core.engines.base import EngineFailure
from rypsok.core.engines.http import EngineHttp, EngineOrigin
from rypsok.core.engines.wire import OriginKey, Wire, host_header
from rypsok.core.model import Reason

if TYPE_CHECKING:
    import ssl
    from collections.abc import AsyncIterator

MIB = 1024 * 1024
Script = Callable[[trio.SocketStream, "Scripted"], Awaitable[None]]


class Scripted:
    """A loopback server whose every connection runs `script`; it records what it read."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.connections = 0
        self.heads: list[bytes] = []

    async def read_head(self, stream: trio.abc.ReceiveStream, buffer: bytearray) -> bytes | None:
        while b"\r\n\r\n" not in buffer:
            data = await stream.receive_some(65536)
            if not data:
                return None
            buffer += data
        head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
        buffer[:] = rest
        self.heads.append(head)
        return head


@asynccontextmanager
async def scripted(script: Script) -> AsyncIterator[Scripted]:
    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        server = Scripted(listeners[0].socket.getsockname()[1])

        async def handler(stream: trio.SocketStream) -> None:
            server.connections += 1
            try:
                await script(stream, server)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            finally:
                await stream.aclose()

        nursery.start_soon(trio.serve_listeners, handler, listeners)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()


def _answer(body: bytes, *extra: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode() + b"\r\n"
    return head + b"".join(e + b"\r\n" for e in extra) + b"\r\n" + body


async def _keep_alive(stream: trio.SocketStream, server: Scripted) -> None:
    buffer = bytearray()
    while await server.read_head(stream, buffer) is not None:
        await stream.send_all(_answer(b'{"n":%d}' % len(server.heads)))


def _tls_answering(server_tls: ssl.SSLContext, answer: bytes) -> Script:
    """A script answering one request over TLS with `answer`; the handler then closes the
    TCP connection alone, without TLS's close_notify."""

    async def script(stream: trio.SocketStream, server: Scripted) -> None:
        secured = trio.SSLStream(stream, server_tls, server_side=True)
        with contextlib.suppress(trio.BrokenResourceError):
            if await server.read_head(secured, bytearray()) is not None:
                await secured.send_all(answer)

    return script


def _origin(server: Scripted) -> EngineOrigin:
    return EngineOrigin.parse(server.url)


async def _get(http: EngineHttp, server: Scripted, path: str = "/x") -> bytes:
    response = await http.get(_origin(server), path, params=[], headers={}, max_bytes=MIB)
    return response.body


async def test_req_perf_004_engine_requests_share_one_kept_alive_connection() -> None:
    async with scripted(_keep_alive) as server, EngineHttp() as http:
        bodies = [await _get(http, server) for _ in range(3)]
    assert bodies == [b'{"n":1}', b'{"n":2}', b'{"n":3}']
    assert server.connections == 1


async def test_req_perf_004_a_kept_connection_the_provider_closed_is_replaced() -> None:
    async def one_answer_then_close(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        if await server.read_head(stream, buffer) is not None:
            await stream.send_all(_answer(b"{}"))
        # Closes without saying so in the answer: the client kept the connection.

    async with scripted(one_answer_then_close) as server, EngineHttp() as http:
        await _get(http, server)
        await trio.sleep(0.05)  # the close reaches the client's socket
        assert await _get(http, server) == b"{}"
    assert server.connections == 2


async def test_req_perf_004_a_stale_connection_found_at_send_is_retried_once() -> None:
    # The provider closes the kept connection at the moment the next request is written:
    # found broken before any answer, the GET goes again on a new connection.
    async def close_second_request(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        if await server.read_head(stream, buffer) is not None and server.connections == 1:
            await stream.send_all(_answer(b"{}"))
            await server.read_head(stream, buffer)  # the next one: closed unanswered
            return
        await stream.send_all(_answer(b"fresh"))

    wire = Wire(connect_s=1.0, tls=_no_tls)
    async with scripted(close_second_request) as server:
        origin = OriginKey("http", "127.0.0.1", server.port)
        first = await _wire_body(wire, origin)
        # Skip the readability test so that the stale connection is really used.
        for conn in wire._idle[origin]:
            conn.raw.is_readable = lambda: False  # type: ignore[method-assign]
        second = await _wire_body(wire, origin)
        await wire.aclose()
    assert (first, second) == (b"{}", b"fresh")
    assert server.connections == 2


def _no_tls() -> ssl.SSLContext:
    raise AssertionError("no TLS for a plain-http origin")


async def _wire_body(wire: Wire, origin: OriginKey) -> bytes:
    parts: list[bytes] = []
    await wire.get(origin, b"/x", [(b"Host", host_header(origin))], lambda _: parts.append)
    return b"".join(parts)


async def test_req_sec_010_a_chunked_answer_is_read_and_bounded() -> None:
    async def chunked(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        while await server.read_head(stream, buffer) is not None:
            await stream.send_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            await stream.send_all(b'4\r\n{"a"\r\n')
            await stream.send_all(b"3\r\n:1}\r\n0\r\n\r\n")

    async with scripted(chunked) as server, EngineHttp() as http:
        assert await _get(http, server) == b'{"a":1}'
        with pytest.raises(EngineFailure) as caught:
            await http.get(_origin(server), "/x", params=[], headers={}, max_bytes=5)
    assert caught.value.failure_class is Reason.PARSE_FAILURE


async def test_req_sec_010_an_answer_read_until_close_is_bounded() -> None:
    async def until_close(stream: trio.SocketStream, server: Scripted) -> None:
        if await server.read_head(stream, bytearray()) is not None:
            await stream.send_all(b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 3000)

    async with scripted(until_close) as server, EngineHttp() as http:
        assert await _get(http, server) == b"x" * 3000
        with pytest.raises(EngineFailure) as caught:
            await http.get(_origin(server), "/x", params=[], headers={}, max_bytes=2999)
    assert caught.value.failure_class is Reason.PARSE_FAILURE
    assert server.connections == 2  # a body read until close is never kept


async def test_req_sec_013_a_gzip_answer_on_a_kept_connection_is_decompressed() -> None:
    packed = gzip.compress(b'{"ok":true}')

    async def gzipped(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        while await server.read_head(stream, buffer) is not None:
            await stream.send_all(_answer(packed, b"Content-Encoding: gzip"))

    async with scripted(gzipped) as server, EngineHttp() as http:
        assert await _get(http, server) == b'{"ok":true}'
        assert await _get(http, server) == b'{"ok":true}'
    assert server.connections == 1


async def test_req_eng_006_an_error_status_is_returned_and_its_connection_not_kept() -> None:
    async def refuse(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        while await server.read_head(stream, buffer) is not None:
            await stream.send_all(
                b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 30\r\n"
                b"Content-Length: 4\r\n\r\nslow"
            )

    async with scripted(refuse) as server, EngineHttp() as http:
        for _ in range(2):
            response = await http.get(_origin(server), "/x", params=[], headers={}, max_bytes=MIB)
            assert (response.status, response.body) == (429, b"")
            assert response.headers.get("retry-after") == "30"
    assert server.connections == 2


@pytest.mark.parametrize(
    "answer",
    [
        b"SSH-2.0-OpenSSH_9.6\r\n",  # not HTTP at all
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",  # ends early
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",  # two lengths
        # A head still incomplete is bounded (100 KiB), one read of 64 KiB past it at most.
        b"HTTP/1.1 200 OK\r\nX: " + b"a" * (200 * 1024) + b"\r\n\r\n",
        b"",  # closed unanswered on a new connection
        # Framed ambiguously: llhttp refuses each, or rypsok does (a coding not chunked).
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"2\r\n{}\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\nContent-Length: 2\n\n{}",
        b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\n{}",
    ],
    ids=["not-http", "short-body", "two-lengths", "huge-head", "closed", "gzip-coding",
         "two-codings", "coding-and-length", "upgrade", "folded", "bare-lf", "status"],
)  # fmt: skip
async def test_req_eng_006_an_answer_http_cannot_read_is_a_request_failure(answer: bytes) -> None:
    async def broken(stream: trio.SocketStream, server: Scripted) -> None:
        if await server.read_head(stream, bytearray()) is not None:
            await stream.send_all(answer)
            await trio.sleep(0.3)  # the failure is the answer's, not the close's

    async with scripted(broken) as server, EngineHttp() as http:
        with pytest.raises(EngineFailure) as caught:
            await _get(http, server)
    assert caught.value.failure_class is Reason.REQUEST_FAILURE


async def test_req_sec_011_a_cancelled_exchange_never_leaves_its_connection_kept() -> None:
    async def slow_body(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        while await server.read_head(stream, buffer) is not None:
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n{}")
            await trio.sleep(0.3)
            await stream.send_all(b"  ")

    async with scripted(slow_body) as server, EngineHttp() as http:
        with trio.move_on_after(0.1) as scope:
            await _get(http, server)
        assert scope.cancelled_caught
        assert await _get(http, server) == b"{}  "
    assert server.connections == 2


def test_req_sec_011_the_connect_timeout_is_a_timeout_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def never_connects(host: str, port: int) -> trio.SocketStream:
        await trio.sleep_forever()
        raise AssertionError

    monkeypatch.setattr(trio, "open_tcp_stream", never_connects)
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def attempt() -> tuple[Reason, float]:
        async with EngineHttp(connect_timeout_ms=300) as http:
            start = trio.current_time()
            with pytest.raises(EngineFailure) as caught:
                await http.get(
                    EngineOrigin.parse("http://127.0.0.1:9"),
                    "/",
                    params=[],
                    headers={},
                    max_bytes=MIB,
                )
            return caught.value.failure_class, trio.current_time() - start

    failure, elapsed = trio.run(attempt, clock=clock)
    assert failure is Reason.TIMEOUT
    assert elapsed == pytest.approx(0.3)


async def test_req_ops_001_an_https_origin_is_verified_against_the_trust_store() -> None:
    authority = Authority()
    server_tls = authority.server_context("localhost")

    async def tls_answer(stream: trio.SocketStream, server: Scripted) -> None:
        secured = trio.SSLStream(stream, server_tls, server_side=True)
        buffer = bytearray()
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = await secured.receive_some(65536)
                    if not data:
                        return
                    buffer += data
                _, _, rest = bytes(buffer).partition(b"\r\n\r\n")
                buffer[:] = rest
                await secured.send_all(_answer(b"{}"))
        except trio.BrokenResourceError:
            return

    async with scripted(tls_answer) as server:
        origin = OriginKey("https", "localhost", server.port)
        trusting = Wire(connect_s=2.0, tls=authority.client_context)
        assert await _wire_body(trusting, origin) == b"{}"
        assert await _wire_body(trusting, origin) == b"{}"
        await trusting.aclose()
        assert server.connections == 1
        stranger = Wire(connect_s=2.0, tls=Authority().client_context)
        with pytest.raises(wire_module.ConnectFailed):
            await _wire_body(stranger, origin)
        await stranger.aclose()


async def test_req_res_008_an_https_origin_goes_through_the_proxy_in_a_tunnel() -> None:
    seen: list[bytes] = []

    async def refusing_proxy(stream: trio.SocketStream, server: Scripted) -> None:
        head = await server.read_head(stream, bytearray())
        if head is not None:
            seen.append(head)
            await stream.send_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")

    async with scripted(refusing_proxy) as proxy:
        url = f"http://user%40corp:s%3Acret@127.0.0.1:{proxy.port}"
        async with EngineHttp(proxy=url) as http:
            with pytest.raises(EngineFailure) as caught:
                await http.get(
                    EngineOrigin(scheme="https", host="api.example.test"),
                    "/res/v1/web/search",
                    params=[("q", "secret query")],
                    headers={"X-Subscription-Token": "key"},
                    max_bytes=MIB,
                )
    assert caught.value.failure_class is Reason.REQUEST_FAILURE
    lines = seen[0].decode().split("\r\n")
    assert lines[0] == "CONNECT api.example.test:443 HTTP/1.1"
    credentials = base64.b64encode(b"user@corp:s:cret").decode()
    assert f"Proxy-Authorization: Basic {credentials}" in lines
    # Nothing of the engine request crossed to the proxy in clear.
    assert b"secret" not in seen[0]
    assert b"X-Subscription-Token" not in seen[0]


async def test_req_perf_004_idle_connections_are_bounded_per_origin() -> None:
    async with scripted(_keep_alive) as server, EngineHttp(outbound_in_flight=32) as http:
        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(_get, http, server)
        assert http._wire is not None
        # Twenty answered on twenty connections at once: eight kept, the others closed.
        assert http._wire.idle_connections == 8
    assert server.connections == 20


@pytest.mark.parametrize(
    ("origin", "host"),
    [
        (OriginKey("https", "en.wikipedia.org", 443), b"en.wikipedia.org"),
        (OriginKey("https", "en.wikipedia.org", 8443), b"en.wikipedia.org:8443"),
        (OriginKey("http", "127.0.0.1", 80), b"127.0.0.1"),
        (OriginKey("http", "::1", 8080), b"[::1]:8080"),
    ],
)
def test_req_sec_017_the_host_header_names_the_origin(origin: OriginKey, host: bytes) -> None:
    assert host_header(origin) == host


_TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=30)


@settings(max_examples=300, deadline=None)
@given(
    # A driver names each parameter once (httpx would group a repeated name together).
    st.lists(st.tuples(_TEXT, _TEXT), max_size=6, unique_by=lambda pair: pair[0]),
    st.sampled_from(["/w/api.php", "/x y/ä"]),
)
def test_req_sec_017_the_request_target_is_the_one_httpx_wrote(
    params: list[tuple[str, str]], path: str
) -> None:
    # The engines' requests moved off httpx's client; the bytes on the wire did not change.
    origin = EngineOrigin(scheme="https", host="api.example.test")
    expected = origin.url(path).copy_merge_params(tuple(params)).raw_path
    sent: list[bytes] = []

    class Recording(Wire):
        async def get(self, origin: OriginKey, target: bytes, *_: object) -> wire_module.Exchange:
            sent.append(target)
            return wire_module.Exchange(status=500, headers=[])

    async def one_get() -> None:
        http = EngineHttp()
        http._wire = Recording(connect_s=1.0, tls=_no_tls)
        await http.get(origin, path, params=params, headers={}, max_bytes=MIB)

    trio.run(one_get)
    assert sent == [expected]


def test_req_cmp_004_driver_headers_keep_their_own_and_lose_the_reserved() -> None:
    from rypsok.core.engines.http import _driver_headers

    sent = _driver_headers(
        {"Accept": "application/json", "User-Agent": "x", "Host": "evil", "X-Key": "k"}
    )
    assert sent == [(b"Accept", b"application/json"), (b"X-Key", b"k")]
    assert _driver_headers({}) == [(b"Accept", b"*/*")]
    with pytest.raises(UnicodeEncodeError):
        _driver_headers({"X-Key": "ключ"})


async def test_req_sec_017_an_answer_set_cookie_never_returns_on_a_kept_connection() -> None:
    async def set_cookie(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        while await server.read_head(stream, buffer) is not None:
            await stream.send_all(_answer(b"{}", b"Set-Cookie: session=abc; Path=/"))

    async with scripted(set_cookie) as server, EngineHttp() as http:
        await _get(http, server)
        await _get(http, server)
    assert server.connections == 1
    assert all(b"cookie" not in head.lower() for head in server.heads)


def test_req_res_008_a_proxy_url_is_read_without_repeating_it() -> None:
    with pytest.raises(ValueError, match="not a proxy URL") as caught:
        wire_module.parse_proxy("socks5://user:secret@proxy:1080")
    assert "secret" not in str(caught.value)
    proxy = wire_module.parse_proxy("https://proxy.example")
    assert proxy.key == OriginKey("https", "proxy.example", 443)
    assert proxy.authorization is None
    assert wire_module.parse_proxy("http://proxy.example").key.port == 80
    assert wire_module.parse_proxy("http://proxy.example:3128").key.port == 3128


@pytest.mark.parametrize(
    ("url", "pair"),
    [
        ("http://ops@proxy.example:3128", b"ops:"),
        ("http://ops:@proxy.example:3128", b"ops:"),
        ("http://op%40s:p%3Aw@proxy.example", b"op@s:p:w"),
    ],
)
def test_req_res_008_proxy_credentials_are_sent_as_basic(url: str, pair: bytes) -> None:
    authorization = wire_module.parse_proxy(url).authorization
    assert authorization == b"Basic " + base64.b64encode(pair)


@pytest.mark.parametrize("char", list("AZaz09_.~-") + list("@[`{/:+ %&=?#\x7f") + ["é", "\x00"])
def test_req_sec_017_each_character_of_a_parameter_is_encoded_as_urlencode_does(
    char: str,
) -> None:
    # Each end of the ranges left unencoded, and their neighbours, which are encoded.
    from urllib.parse import urlencode

    from rypsok.core.engines.http import _form

    text = f"a{char}b"
    assert f"{_form(text)}={_form(char)}" == urlencode([(text, char)])


@pytest.mark.parametrize(
    ("established", "opens"),
    [
        (b"HTTP/1.1 200 Connection established", True),
        (b"HTTP/1.1 299 Tunnel open", True),
        (b"HTTP/1.1 300 Multiple Choices", False),
        (b"HTTP/1.1 407 Proxy Authentication Required", False),
    ],
)
async def test_req_res_008_the_tunnel_carries_the_origins_own_tls(
    established: bytes, opens: bool
) -> None:
    # The proxy sees CONNECT and then only TLS records: the engine request, its key and the
    # answer cross it encrypted, verified against the origin's name. Any 2xx to CONNECT
    # opens the tunnel (RFC 9110, 9.3.6), the last of the class too; any other answer is a
    # refusal, even from a proxy that would relay the bytes all the same.
    authority = Authority()
    server_tls = authority.server_context("localhost")

    tls_answer = _tls_answering(server_tls, _answer(b'{"tls":true}'))

    relayed: list[bytes] = []

    async with scripted(tls_answer) as origin_server:

        async def tunnelling_proxy(stream: trio.SocketStream, server: Scripted) -> None:
            head = await server.read_head(stream, bytearray())
            if head is None or not head.startswith(b"CONNECT localhost:"):
                return
            upstream = await trio.open_tcp_stream("127.0.0.1", origin_server.port)
            await stream.send_all(established + b"\r\n\r\n")

            async def pipe(source: trio.abc.Stream, sink: trio.abc.Stream) -> None:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    while data := await source.receive_some(65536):
                        relayed.append(bytes(data))
                        await sink.send_all(data)

            async with upstream, trio.open_nursery() as nursery:
                nursery.start_soon(pipe, stream, upstream)
                await pipe(upstream, stream)
                nursery.cancel_scope.cancel()

        async with scripted(tunnelling_proxy) as proxy:
            wire = Wire(
                connect_s=2.0, tls=authority.client_context, proxy=f"http://127.0.0.1:{proxy.port}"
            )
            origin = OriginKey("https", "localhost", origin_server.port)
            parts: list[bytes] = []
            request = wire.get(
                origin,
                b"/search?q=secret",
                [(b"Host", host_header(origin)), (b"X-Key", b"k3y")],
                lambda _: parts.append,
            )
            if not opens:
                with pytest.raises(wire_module.ConnectFailed):
                    await request
                await wire.aclose()
                assert origin_server.heads == []
                return
            await request
            await wire.aclose()
    assert b"".join(parts) == b'{"tls":true}'
    assert origin_server.heads[0].startswith(b"GET /search?q=secret HTTP/1.1")
    crossed = b"".join(relayed)
    assert crossed
    assert b"secret" not in crossed
    assert b"k3y" not in crossed
    assert b"tls" not in crossed


def _silent(closed: trio.Event) -> Script:
    """A server that reads and never answers; `closed` is set when the client closes."""

    async def silent(stream: trio.SocketStream, server: Scripted) -> None:
        while await stream.receive_some(65536):
            pass
        closed.set()

    return silent


@pytest.mark.parametrize("cancelled_by_caller", [False, True])
async def test_req_sec_011_a_tls_handshake_cut_by_the_timeout_leaves_no_socket_open(
    cancelled_by_caller: bool,
) -> None:
    # The server accepts and never answers the ClientHello: the attempt ends at the connect
    # timeout (or the caller's deadline), and the server sees the connection closed at once.
    closed = trio.Event()

    async with scripted(_silent(closed)) as server:
        wire = Wire(connect_s=10.0 if cancelled_by_caller else 0.2, tls=Authority().client_context)
        origin = OriginKey("https", "localhost", server.port)
        if cancelled_by_caller:
            with trio.move_on_after(0.2) as scope:
                await _wire_body(wire, origin)
            assert scope.cancelled_caught
        else:
            with pytest.raises(wire_module.ConnectTimedOut):
                await _wire_body(wire, origin)
        with trio.fail_after(2):
            await closed.wait()
        await wire.aclose()


async def test_req_sec_011_a_tunnel_cut_by_the_timeout_leaves_no_socket_open() -> None:
    # The proxy accepts and never answers CONNECT: the socket to it is closed at the timeout.
    closed = trio.Event()

    async with scripted(_silent(closed)) as proxy:
        wire = Wire(
            connect_s=0.2, tls=Authority().client_context, proxy=f"http://127.0.0.1:{proxy.port}"
        )
        with pytest.raises(wire_module.ConnectTimedOut):
            await _wire_body(wire, OriginKey("https", "localhost", 443))
        with trio.fail_after(2):
            await closed.wait()
        await wire.aclose()


@pytest.mark.parametrize(
    "interim", [b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 199 Misc\r\nX-Interim: 1\r\n\r\n"]
)
async def test_req_eng_006_an_interim_answer_before_the_answer_is_passed_over(
    interim: bytes,
) -> None:
    async def continue_first(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        while await server.read_head(stream, buffer) is not None:
            await stream.send_all(interim)
            await stream.send_all(_answer(b'{"final":1}'))

    async with scripted(continue_first) as server, EngineHttp() as http:
        response = await http.get(_origin(server), "/x", params=[], headers={}, max_bytes=MIB)
    assert (response.status, response.body) == (200, b'{"final":1}')
    assert "x-interim" not in response.headers


@pytest.mark.parametrize(
    ("origin", "text"),
    [
        (OriginKey("http", "127.0.0.1", 80), "http://127.0.0.1"),
        (OriginKey("http", "127.0.0.1", 443), "http://127.0.0.1:443"),
        (OriginKey("https", "localhost", 443), "https://localhost"),
        (OriginKey("http", "::1", 8080), "http://[::1]:8080"),
    ],
)
async def test_req_res_008_a_plain_http_origin_is_named_whole_to_the_proxy(
    origin: OriginKey, text: str
) -> None:
    seen: list[bytes] = []

    async def proxy_answer(stream: trio.SocketStream, server: Scripted) -> None:
        head = await server.read_head(stream, bytearray())
        if head is not None:
            seen.append(head)
            await stream.send_all(_answer(b"{}"))

    async with scripted(proxy_answer) as proxy:
        wire = Wire(connect_s=2.0, tls=_no_tls, proxy=f"http://ops:pw@127.0.0.1:{proxy.port}")
        # For the https origin the proxy's answer (with a body) is no tunnel: refused.
        with contextlib.suppress(wire_module.ConnectFailed):
            await wire.get(
                origin, b"/w/api.php?a=1", [(b"Host", host_header(origin))], lambda _: None
            )
        await wire.aclose()
    lines = seen[0].decode().split("\r\n")
    if origin.scheme == "http":
        assert lines[0] == f"GET {text}/w/api.php?a=1 HTTP/1.1"
        assert f"Proxy-Authorization: Basic {base64.b64encode(b'ops:pw').decode()}" in lines
    else:
        assert lines[0] == "CONNECT localhost:443 HTTP/1.1"


async def test_req_perf_004_a_kept_connection_reset_before_the_next_request_is_replaced() -> None:
    # The provider resets the kept connection (RST): writing the next request fails, and the
    # GET goes once more on a new connection.
    import socket as stdlib_socket

    async def answer_then_reset(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        if await server.read_head(stream, buffer) is None:
            return
        await stream.send_all(_answer(b"first" if server.connections == 1 else b"second"))
        if server.connections == 1:
            stream.socket.setsockopt(
                stdlib_socket.SOL_SOCKET, stdlib_socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0"
            )

    wire = Wire(connect_s=1.0, tls=_no_tls)
    async with scripted(answer_then_reset) as server:
        origin = OriginKey("http", "127.0.0.1", server.port)
        assert await _wire_body(wire, origin) == b"first"
        await trio.sleep(0.05)  # the reset arrives
        for conn in wire._idle[origin]:
            conn.raw.is_readable = lambda: False  # type: ignore[method-assign]
        assert await _wire_body(wire, origin) == b"second"
        await wire.aclose()
    assert server.connections == 2


async def test_req_eng_006_a_connection_lost_after_an_interim_answer_is_not_asked_again() -> None:
    # Once any answer was heard the request reached the provider: no second GET.
    async def interim_then_close(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        if await server.read_head(stream, buffer) is None:
            return
        await stream.send_all(_answer(b"{}"))
        if await server.read_head(stream, buffer) is not None:
            await stream.send_all(b"HTTP/1.1 100 Continue\r\n\r\n")

    wire = Wire(connect_s=1.0, tls=_no_tls)
    async with scripted(interim_then_close) as server:
        origin = OriginKey("http", "127.0.0.1", server.port)
        await _wire_body(wire, origin)
        for conn in wire._idle[origin]:
            conn.raw.is_readable = lambda: False  # type: ignore[method-assign]
        with pytest.raises(wire_module.WireFailure, match="connection failed"):
            await _wire_body(wire, origin)
        await wire.aclose()
    assert server.connections == 1


async def test_req_perf_004_an_exchange_ending_after_close_keeps_nothing_open() -> None:
    async def slow(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        while await server.read_head(stream, buffer) is not None:
            await trio.sleep(0.2)
            await stream.send_all(_answer(b"{}"))

    wire = Wire(connect_s=1.0, tls=_no_tls)
    async with scripted(slow) as server:
        origin = OriginKey("http", "127.0.0.1", server.port)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_wire_body, wire, origin)
            await trio.sleep(0.05)
            await wire.aclose()  # while the exchange waits for its answer
    assert wire.idle_connections == 0


@pytest.mark.parametrize(("size", "refused"), [(100 * 1024 + 1, True), (100 * 1024, False)])
async def test_req_eng_006_an_answer_head_still_incomplete_is_bounded(
    size: int, refused: bool
) -> None:
    # The bound on a head not yet complete (100 KiB, httpcore's): one byte over is refused as
    # soon as it is read; at the bound the client waits for the rest (here: the close).
    async def long_head(stream: trio.SocketStream, server: Scripted) -> None:
        if await server.read_head(stream, bytearray()) is not None:
            head = b"HTTP/1.1 200 OK\r\nX: "
            await stream.send_all(head + b"a" * (size - len(head)))
            await trio.sleep(0.3)

    wire = Wire(connect_s=1.0, tls=_no_tls)
    async with scripted(long_head) as server:
        origin = OriginKey("http", "127.0.0.1", server.port)
        message = "not HTTP/1.1" if refused else "connection failed"
        with pytest.raises(wire_module.WireFailure, match=message):
            await _wire_body(wire, origin)
        await wire.aclose()


# An internationalised name whose IDNA 2008 form (httpx's, and DNS's) is not the standard
# library's IDNA 2003 one ("fass.example"): only the ASCII form httpx wrote reaches the wire.
_IDN = "faß.example"
_IDN_ASCII = "xn--fa-hia.example"


async def test_req_sec_017_an_idn_origin_is_named_in_its_ascii_form_on_the_wire(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    authority = Authority()
    server_tls = authority.server_context(_IDN_ASCII)
    server_names: list[str | None] = []
    server_tls.sni_callback = lambda _conn, name, _ctx: server_names.append(name)

    tls_answer = _tls_answering(server_tls, _answer(b"{}"))

    resolved: list[str] = []
    real_open = trio.open_tcp_stream

    async def to_loopback(host: str, port: int) -> trio.SocketStream:
        resolved.append(host)
        return await real_open("127.0.0.1", port)

    monkeypatch.setattr(trio, "open_tcp_stream", to_loopback)
    async with scripted(tls_answer) as server, EngineHttp() as http:
        http._wire = Wire(connect_s=2.0, tls=authority.client_context)
        origin = EngineOrigin.parse(f"https://{_IDN}:{server.port}")
        response = await http.get(origin, "/x", params=[], headers={}, max_bytes=MIB)
        assert http._wire is not None
        await http._wire.aclose()
    assert response.body == b"{}"
    assert resolved == [_IDN_ASCII]
    assert server_names == [_IDN_ASCII]
    lines = server.heads[0].split(b"\r\n")
    assert f"Host: {_IDN_ASCII}:{server.port}".encode() in lines
    assert all(byte < 0x80 for byte in server.heads[0])


async def test_req_res_008_an_idn_origin_is_named_in_its_ascii_form_to_the_proxy() -> None:
    async def refusing_proxy(stream: trio.SocketStream, server: Scripted) -> None:
        if await server.read_head(stream, bytearray()) is not None:
            await stream.send_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")

    async with scripted(refusing_proxy) as proxy, EngineHttp(proxy=proxy.url) as http:
        with pytest.raises(EngineFailure):
            await http.get(
                EngineOrigin.parse(f"https://{_IDN}"), "/x", params=[], headers={}, max_bytes=1
            )
    lines = proxy.heads[0].split(b"\r\n")
    assert lines[0] == f"CONNECT {_IDN_ASCII}:443 HTTP/1.1".encode()
    assert f"Host: {_IDN_ASCII}:443".encode() in lines


async def test_req_cmp_004_on_the_wire_a_driver_cannot_set_the_headers_rypsok_writes() -> None:
    # The production path (no injected transport): each reserved header of the driver is
    # dropped, whatever its case, and rypsok's own are sent once.
    async with scripted(_keep_alive) as server, EngineHttp() as http:
        await http.get(
            _origin(server),
            "/x",
            params=[],
            headers={
                "accept-encoding": "br",
                "Connection": "close",
                "Content-Length": "5",
                "Transfer-Encoding": "chunked",
                "HOST": "evil.example",
                "User-Agent": "Mozilla/5.0",
                "X-Key": "k",
            },
            max_bytes=MIB,
        )
    lines = server.heads[0].decode().split("\r\n")
    assert lines == [
        "GET /x HTTP/1.1",
        f"Host: 127.0.0.1:{server.port}",
        "Accept: */*",
        "X-Key: k",
        "Accept-Encoding: gzip, deflate",
        "Connection: keep-alive",
        f"User-Agent: {http.user_agent}",
    ]


def test_req_perf_004_a_connection_idle_exactly_the_reuse_window_is_reused() -> None:
    # The clock stands still but for the jumps: idle exactly _IDLE_S is still within the
    # window (the connection is reused), a millisecond more is past it (a new connection).
    clock = trio.testing.MockClock()

    async def three_gets() -> int:
        wire = Wire(connect_s=1.0, tls=_no_tls)
        async with scripted(_keep_alive) as server:
            origin = OriginKey("http", "127.0.0.1", server.port)
            await _wire_body(wire, origin)
            clock.jump(wire_module._IDLE_S)
            await _wire_body(wire, origin)
            reused = server.connections
            clock.jump(wire_module._IDLE_S + 0.001)
            await _wire_body(wire, origin)
            await wire.aclose()
        assert reused == 1
        return server.connections

    assert trio.run(three_gets, clock=clock) == 2


# --- the request as written, and the answers llhttp reads ------------------------------------

_TOKEN_CHARS = b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def test_req_sec_017_a_request_is_written_as_its_line_and_fields() -> None:
    head = wire_module.request_head(
        b"GET", b"/w/api.php?a=1", [(b"Host", b"127.0.0.1:8080"), (b"Accept", b"*/*")]
    )
    assert head == b"GET /w/api.php?a=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: */*\r\n\r\n"


@pytest.mark.parametrize("name", [bytes([c]) for c in _TOKEN_CHARS])
def test_req_sec_017_every_token_character_may_name_a_field(name: bytes) -> None:
    head = wire_module.request_head(b"GET", b"/", [(name, b"v")])
    assert head.endswith(name + b": v\r\n\r\n")


@pytest.mark.parametrize(
    "name",
    [b""] + [bytes([c]) for c in range(256) if c not in _TOKEN_CHARS] + [b"X-A b", b"X\r\nY"],
)
def test_req_sec_017_a_field_name_outside_the_token_set_is_never_written(name: bytes) -> None:
    with pytest.raises(wire_module.WireFailure, match="cannot be written"):
        wire_module.request_head(b"GET", b"/", [(name, b"v")])


@pytest.mark.parametrize(
    "value",
    [b"", b"!", b"~", b"\x80", b"\xff", b"a b", b"a\tb", b"a  \t b", b"\x21\x7e\x80\xff"],
    ids=["empty", "0x21", "0x7e", "0x80", "0xff", "space", "tab", "runs", "ends"],
)
def test_req_sec_017_a_field_value_of_visible_text_is_written(value: bytes) -> None:
    head = wire_module.request_head(b"GET", b"/", [(b"X", value)])
    assert head == b"GET / HTTP/1.1\r\nX: " + value + b"\r\n\r\n"


@pytest.mark.parametrize(
    "value",
    [
        b"a\r\nX-Injected: 1",
        b"a\nb",
        b"a\rb",
        b"a\x00b",
        b"a\x1fb",
        b"a\x7fb",
        b"\x7f",
        b" a",
        b"a ",
        b"\ta",
        b"a\t",
        b" ",
    ],
    ids=["crlf", "lf", "cr", "nul", "0x1f", "del", "del-alone", "lead-sp", "trail-sp", "lead-tab",
         "trail-tab", "space-alone"],
)  # fmt: skip
def test_req_sec_017_a_field_value_with_a_control_or_outer_space_is_never_written(
    value: bytes,
) -> None:
    with pytest.raises(wire_module.WireFailure, match="cannot be written"):
        wire_module.request_head(b"GET", b"/", [(b"X", value)])


@pytest.mark.parametrize("target", [b"/", b"/\x21", b"/~", b"http://h/p?q=1", b"h:443"])
def test_req_sec_017_a_target_of_visible_ascii_is_written(target: bytes) -> None:
    assert wire_module.request_head(b"GET", target, []).startswith(b"GET " + target + b" ")


@pytest.mark.parametrize("target", [b"", b"/a b", b"/a\x7f", b"/\x80", b"/a\tb", b"/\r\nX: y"])
def test_req_sec_017_a_target_that_is_not_visible_ascii_is_never_written(target: bytes) -> None:
    with pytest.raises(wire_module.WireFailure, match="cannot be written"):
        wire_module.request_head(b"GET", target, [])


async def test_req_sec_017_a_driver_header_with_a_line_break_sends_nothing() -> None:
    # An API key read from a file with a line break in it: refused before a byte is written.
    received = bytearray()

    async def record(stream: trio.SocketStream, server: Scripted) -> None:
        with trio.move_on_after(0.3):
            while data := await stream.receive_some(65536):
                received.extend(data)

    async with scripted(record) as server, EngineHttp() as http:
        with pytest.raises(EngineFailure) as caught:
            await http.get(
                _origin(server),
                "/x",
                params=[],
                headers={"X-Subscription-Token": "key\r\nX-Injected: 1"},
                max_bytes=MIB,
            )
    assert caught.value.failure_class is Reason.REQUEST_FAILURE
    assert bytes(received) == b""


def _into(parts: list[bytes], _exchange: wire_module.Exchange) -> Callable[[bytes], None]:
    return parts.append


async def _answered_twice(answer: bytes) -> tuple[list[tuple[int, bytes]], Scripted]:
    """Two GETs through one Wire to a server answering each request with `answer`: the
    status and body each GET read."""

    async def reply(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        while await server.read_head(stream, buffer) is not None:
            await stream.send_all(answer)

    wire = Wire(connect_s=1.0, tls=_no_tls)
    read: list[tuple[int, bytes]] = []
    async with scripted(reply) as server:
        origin = OriginKey("http", "127.0.0.1", server.port)
        for _ in range(2):
            parts: list[bytes] = []
            exchange = await wire.get(
                origin, b"/x", [(b"Host", host_header(origin))], functools.partial(_into, parts)
            )
            read.append((exchange.status, b"".join(parts)))
        await wire.aclose()
    return read, server


@pytest.mark.parametrize(
    ("answer", "body", "connections"),
    [
        (_answer(b"{}"), b"{}", 1),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b"", 1),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked \r\n\r\n2\r\n{}\r\n0\r\n\r\n", b"{}", 1),
        (_answer(b"{}", b"Connection: close"), b"{}", 2),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}", b"{}", 2),
        (_answer(b"{}") + b"HTTP/1.1 200 OK\r\n", b"{}", 2),
        (_answer(b"{}") + b"garbage", b"{}", 2),
        (_answer(b"{}") + b"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\n[1]", b"{}", 2),
    ],
    ids=[
        "kept",
        "no-content",
        "chunked",
        "close",
        "http-1.0",
        "one-more-head",
        "extra-bytes",
        "second-answer",
    ],
)
async def test_req_perf_004_only_an_answer_that_ended_cleanly_keeps_its_connection(
    answer: bytes, body: bytes, connections: int
) -> None:
    read, server = await _answered_twice(answer)
    status = 204 if answer.startswith(b"HTTP/1.1 204") else 200
    assert read == [(status, body), (status, body)]
    assert server.connections == connections


async def test_req_eng_006_only_the_final_heads_fields_are_the_answers_headers() -> None:
    # An interim answer's fields and a chunked body's trailer are not the answer's headers.
    async def reply(stream: trio.SocketStream, server: Scripted) -> None:
        if await server.read_head(stream, bytearray()) is not None:
            await stream.send_all(
                b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Final: 1\r\n\r\n"
                b"2\r\n{}\r\n0\r\nX-Trailer: 2\r\n\r\n"
            )

    wire = Wire(connect_s=1.0, tls=_no_tls)
    seen: list[wire_module.Exchange] = []
    parts: list[bytes] = []

    def consume(exchange: wire_module.Exchange) -> Callable[[bytes], None]:
        seen.append(exchange)
        return parts.append

    async with scripted(reply) as server:
        origin = OriginKey("http", "127.0.0.1", server.port)
        await wire.get(origin, b"/x", [(b"Host", host_header(origin))], consume)
        await wire.aclose()
    assert seen == [
        wire_module.Exchange(
            status=200, headers=[(b"Transfer-Encoding", b"chunked"), (b"X-Final", b"1")]
        )
    ]
    assert b"".join(parts) == b"{}"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"HTTP/1.1 200 OK\r\n\r\nHTTP/1.1 200 OK\r\n\r\nforged", "spoke before"),
        (b"HTTP/1.1 200 Connection established\r\nContent-Length: 0\r\n\r\nforged", "spoke before"),
        (b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n", "refused"),
        (b"SOCKS\r\n\r\n", "did not open"),
        (b"HTTP/1.1 200 OK\r\n", "did not open"),
    ],
    ids=["bytes-after-head", "length-then-bytes", "refused", "not-http", "closed-mid-head"],
)
async def test_req_res_008_a_proxy_that_does_not_open_a_clean_tunnel_is_refused(
    answer: bytes, message: str
) -> None:
    async def proxy_answer(stream: trio.SocketStream, server: Scripted) -> None:
        if await server.read_head(stream, bytearray()) is not None:
            await stream.send_all(answer)
            await trio.sleep(0.3)  # the refusal is the answer's, not the close's

    async with scripted(proxy_answer) as proxy:
        wire = Wire(connect_s=2.0, tls=_no_tls, proxy=f"http://127.0.0.1:{proxy.port}")
        with pytest.raises(wire_module.ConnectFailed, match=message):
            await _wire_body(wire, OriginKey("https", "localhost", 443))
        await wire.aclose()


async def test_req_eng_006_bytes_that_are_not_http_fail_at_once_on_an_open_connection() -> None:
    # The provider keeps the connection open: the failure is the parser's, not a close's.
    async def banner(stream: trio.SocketStream, server: Scripted) -> None:
        if await server.read_head(stream, bytearray()) is not None:
            await stream.send_all(b"SSH-2.0-OpenSSH_9.6\r\n")
            await trio.sleep(5)

    wire = Wire(connect_s=1.0, tls=_no_tls)
    async with scripted(banner) as server:
        origin = OriginKey("http", "127.0.0.1", server.port)
        with trio.fail_after(2), pytest.raises(wire_module.WireFailure, match=r"not HTTP/1\.1"):
            await _wire_body(wire, origin)
        await wire.aclose()


async def test_req_eng_006_a_connection_reset_before_the_answer_is_a_connection_failure() -> None:
    import socket as stdlib_socket

    async def reset(stream: trio.SocketStream, server: Scripted) -> None:
        if await server.read_head(stream, bytearray()) is not None:
            stream.socket.setsockopt(
                stdlib_socket.SOL_SOCKET, stdlib_socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0"
            )

    wire = Wire(connect_s=1.0, tls=_no_tls)
    async with scripted(reset) as server:
        origin = OriginKey("http", "127.0.0.1", server.port)
        with pytest.raises(wire_module.WireFailure, match="connection failed"):
            await _wire_body(wire, origin)
        await wire.aclose()
    assert server.connections == 1  # a new connection: not asked again


_FIELDS = st.sampled_from(
    [
        b"Content-Length: 2",
        b"Content-Length: 0",
        b"Content-Length: 99999999999999999999999",
        b"Content-Length: -1",
        b"Transfer-Encoding: chunked",
        b"Transfer-Encoding: gzip",
        b"Connection: close",
        b"Connection: keep-alive",
        b"Upgrade: h2c\r\nConnection: upgrade",
        b"Content-Encoding: gzip",
        b"X: \x00\xff",
        b"X:",
        b": v",
    ]
)
_HEADS = st.builds(
    lambda version, status, fields: version + b" " + status + b" R\r\n" + b"".join(
        f + b"\r\n" for f in fields
    ) + b"\r\n",
    st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2", b"HTTP/1.1x"]),
    st.sampled_from([b"100", b"101", b"199", b"200", b"204", b"304", b"404", b"999", b"20"]),
    st.lists(_FIELDS, max_size=4),
)  # fmt: skip
_ANSWERS = st.one_of(
    st.binary(max_size=200),
    st.builds(
        lambda heads, body: b"".join(heads) + body,
        st.lists(_HEADS, min_size=1, max_size=3),
        st.sampled_from([b"", b"{}", b"2\r\n{}\r\n0\r\n\r\n", b"zz\r\n", b"\r\n\r\n"]),
    ),
)


@settings(max_examples=200, deadline=None)
@given(_ANSWERS, st.integers(min_value=1, max_value=40))
@example(b"HTTP/1.1 101 R\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n", 40)
@example(b"HTTP/1.1 100 R\r\n\r\nHTTP/1.1 200 R\r\nContent-Length: 2\r\n\r\n{}", 1)
@example(b"HTTP/1.1 200 R\r\nContent-Length: 0\r\n\r\nHTTP/1.1 404 R\r\n\r\nzz", 7)
async def test_req_sec_023_any_answer_bytes_end_in_an_exchange_or_a_wire_failure(
    answer: bytes, piece: int
) -> None:
    # Whatever a provider sends, in whatever pieces, then closes: an exchange read within
    # what was sent, or WireFailure; never another exception, never a hang.
    async def reply(stream: trio.SocketStream, server: Scripted) -> None:
        if await server.read_head(stream, bytearray()) is not None:
            for start in range(0, len(answer), piece):
                await stream.send_all(answer[start : start + piece])

    wire = Wire(connect_s=1.0, tls=_no_tls)
    async with scripted(reply) as server:
        origin = OriginKey("http", "127.0.0.1", server.port)
        parts: list[bytes] = []
        with trio.fail_after(5):
            try:
                exchange = await wire.get(
                    origin, b"/x", [(b"Host", host_header(origin))], functools.partial(_into, parts)
                )
            except wire_module.WireFailure:
                pass
            else:
                assert 200 <= exchange.status <= 999
                assert len(b"".join(parts)) <= len(answer)
        await wire.aclose()


async def test_req_sec_010_an_https_answer_read_until_a_close_without_tls_goodbye_is_read() -> None:
    # Many servers end a body read until the close without TLS's close_notify: the abrupt
    # end is the body's end (https_compatible), not a broken connection.
    authority = Authority()
    server_tls = authority.server_context("localhost")

    until_close = _tls_answering(server_tls, b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 3000)
    async with scripted(until_close) as server:
        wire = Wire(connect_s=2.0, tls=authority.client_context)
        origin = OriginKey("https", "localhost", server.port)
        assert await _wire_body(wire, origin) == b"x" * 3000
        await wire.aclose()
