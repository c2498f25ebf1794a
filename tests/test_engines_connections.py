"""The engines' HTTP/1.1 exchanges through EngineClient's egress stack, over real loopback sockets.

Each server here is scripted byte by byte, so that keep-alive, a provider closing a kept
connection, chunked and unbounded bodies, broken answers and the proxy's tunnel are each
exercised the way a provider or a proxy would produce them.
"""

from __future__ import annotations

import base64
import contextlib
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

from rypsok.core.engines.base import EngineFailure
from rypsok.core.engines.client import EngineClient, EngineOrigin
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


async def _get(http: EngineClient, server: Scripted, path: str = "/x") -> bytes:
    response = await http.get(_origin(server), path, params=[], headers={}, max_bytes=MIB)
    return response.body


_IDN = "faß.provider-of-search.net"
_IDN_ASCII = "xn--fa-hia.provider-of-search.net"


async def _answered_twice(answer: bytes) -> tuple[list[tuple[int, bytes]], Scripted]:
    """Two GETs through one EngineClient to a server answering each request with `answer`:
    the status and body each GET read."""

    async def reply(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        while await server.read_head(stream, buffer) is not None:
            await stream.send_all(answer)

    read: list[tuple[int, bytes]] = []
    async with scripted(reply) as server, EngineClient() as http:
        for _ in range(2):
            response = await http.get(_origin(server), "/x", params=[], headers={}, max_bytes=MIB)
            read.append((response.status, response.body))
    return read, server


async def test_req_perf_004_engine_requests_share_one_kept_alive_connection() -> None:
    async with scripted(_keep_alive) as server, EngineClient() as http:
        bodies = [await _get(http, server) for _ in range(3)]
    assert bodies == [b'{"n":1}', b'{"n":2}', b'{"n":3}']
    assert server.connections == 1


async def test_req_perf_004_a_kept_connection_the_provider_closed_is_replaced() -> None:
    async def one_answer_then_close(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        if await server.read_head(stream, buffer) is not None:
            await stream.send_all(_answer(b"{}"))
        # Closes without saying so in the answer: the client kept the connection.

    async with scripted(one_answer_then_close) as server, EngineClient() as http:
        await _get(http, server)
        await trio.sleep(0.05)  # the close reaches the client's socket
        assert await _get(http, server) == b"{}"
    assert server.connections == 2


def _no_tls() -> ssl.SSLContext:
    raise AssertionError("no TLS for a plain-http origin")


async def test_req_sec_010_a_chunked_answer_is_read_and_bounded() -> None:
    async def chunked(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        while await server.read_head(stream, buffer) is not None:
            await stream.send_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            await stream.send_all(b'4\r\n{"a"\r\n')
            await stream.send_all(b"3\r\n:1}\r\n0\r\n\r\n")

    async with scripted(chunked) as server, EngineClient() as http:
        assert await _get(http, server) == b'{"a":1}'
        with pytest.raises(EngineFailure) as caught:
            await http.get(_origin(server), "/x", params=[], headers={}, max_bytes=5)
    assert caught.value.failure_class is Reason.PARSE_FAILURE


async def test_req_sec_010_an_answer_read_until_close_is_bounded() -> None:
    async def until_close(stream: trio.SocketStream, server: Scripted) -> None:
        if await server.read_head(stream, bytearray()) is not None:
            await stream.send_all(b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 3000)

    async with scripted(until_close) as server, EngineClient() as http:
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

    async with scripted(gzipped) as server, EngineClient() as http:
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

    async with scripted(refuse) as server, EngineClient() as http:
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
        # Framed ambiguously: h11 refuses each (httpcore's HTTP/1.1).
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"2\r\n{}\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\n{}",
    ],
    ids=["not-http", "short-body", "two-lengths", "huge-head", "closed", "gzip-coding",
         "two-codings", "coding-and-length", "upgrade", "status"],
)  # fmt: skip
async def test_req_eng_006_an_answer_http_cannot_read_is_a_request_failure(answer: bytes) -> None:
    async def broken(stream: trio.SocketStream, server: Scripted) -> None:
        if await server.read_head(stream, bytearray()) is not None:
            await stream.send_all(answer)
            await trio.sleep(0.3)  # the failure is the answer's, not the close's

    async with scripted(broken) as server, EngineClient() as http:
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

    async with scripted(slow_body) as server, EngineClient() as http:
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
        async with EngineClient(connect_timeout_ms=300) as http:
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


async def test_req_res_008_an_https_origin_goes_through_the_proxy_in_a_tunnel() -> None:
    seen: list[bytes] = []

    async def refusing_proxy(stream: trio.SocketStream, server: Scripted) -> None:
        head = await server.read_head(stream, bytearray())
        if head is not None:
            seen.append(head)
            await stream.send_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")

    async with scripted(refusing_proxy) as proxy:
        url = f"http://user%40corp:s%3Acret@127.0.0.1:{proxy.port}"
        async with EngineClient(proxy=url) as http:
            with pytest.raises(EngineFailure) as caught:
                await http.get(
                    EngineOrigin(scheme="https", host="api.provider-of-search.net"),
                    "/res/v1/web/search",
                    params=[("q", "secret query")],
                    headers={"X-Subscription-Token": "key"},
                    max_bytes=MIB,
                )
    assert caught.value.failure_class is Reason.REQUEST_FAILURE
    lines = seen[0].decode().split("\r\n")
    assert lines[0] == "CONNECT api.provider-of-search.net:443 HTTP/1.1"
    credentials = base64.b64encode(b"user@corp:s:cret").decode()
    assert f"Proxy-Authorization: Basic {credentials}" in lines
    # Nothing of the engine request crossed to the proxy in clear.
    assert b"secret" not in seen[0]
    assert b"X-Subscription-Token" not in seen[0]


def test_req_cmp_004_driver_headers_keep_their_own_and_lose_the_reserved() -> None:
    from rypsok.core.engines.client import _driver_headers

    sent = _driver_headers(
        {"Accept": "application/json", "User-Agent": "x", "Host": "evil", "X-Key": "k"}
    )
    assert sent == [("Accept", "application/json"), ("X-Key", "k")]
    assert _driver_headers({}) == [("Accept", "*/*")]
    for bad in ({"X-Key": "ключ"}, {"X-Key": " k"}, {"X Key": "k"}, {"X-Key": "k\x7f"}):
        with pytest.raises(EngineFailure) as caught:
            _driver_headers(bad)
        assert caught.value.failure_class is Reason.REQUEST_FAILURE


async def test_req_sec_017_an_answer_set_cookie_never_returns_on_a_kept_connection() -> None:
    async def set_cookie(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        while await server.read_head(stream, buffer) is not None:
            await stream.send_all(_answer(b"{}", b"Set-Cookie: session=abc; Path=/"))

    async with scripted(set_cookie) as server, EngineClient() as http:
        await _get(http, server)
        await _get(http, server)
    assert server.connections == 1
    assert all(b"cookie" not in head.lower() for head in server.heads)


def _silent(closed: trio.Event) -> Script:
    """A server that reads and never answers; `closed` is set when the client closes."""

    async def silent(stream: trio.SocketStream, server: Scripted) -> None:
        while await stream.receive_some(65536):
            pass
        closed.set()

    return silent


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

    async with scripted(continue_first) as server, EngineClient() as http:
        response = await http.get(_origin(server), "/x", params=[], headers={}, max_bytes=MIB)
    assert (response.status, response.body) == (200, b'{"final":1}')
    assert "x-interim" not in response.headers


async def test_req_res_008_an_idn_origin_is_named_in_its_ascii_form_to_the_proxy() -> None:
    async def refusing_proxy(stream: trio.SocketStream, server: Scripted) -> None:
        if await server.read_head(stream, bytearray()) is not None:
            await stream.send_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")

    async with scripted(refusing_proxy) as proxy, EngineClient(proxy=proxy.url) as http:
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
    async with scripted(_keep_alive) as server, EngineClient() as http:
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
        f"User-Agent: {http.user_agent}",
    ]


async def test_req_sec_017_a_driver_header_with_a_line_break_sends_nothing() -> None:
    # An API key read from a file with a line break in it: refused before a byte is written.
    received = bytearray()

    async def record(stream: trio.SocketStream, server: Scripted) -> None:
        with trio.move_on_after(0.3):
            while data := await stream.receive_some(65536):
                received.extend(data)

    async with scripted(record) as server, EngineClient() as http:
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


@pytest.mark.parametrize(
    ("answer", "body", "connections"),
    [
        (_answer(b"{}"), b"{}", 1),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b"", 1),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked \r\n\r\n2\r\n{}\r\n0\r\n\r\n", b"{}", 1),
        (_answer(b"{}", b"Connection: close"), b"{}", 2),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}", b"{}", 2),
    ],
    ids=[
        "kept",
        "no-content",
        "chunked",
        "close",
        "http-1.0",
    ],
)
async def test_req_perf_004_an_answer_keeps_its_connection_as_its_framing_says(
    answer: bytes, body: bytes, connections: int
) -> None:
    read, server = await _answered_twice(answer)
    status = 204 if answer.startswith(b"HTTP/1.1 204") else 200
    assert read == [(status, body), (status, body)]
    assert server.connections == connections


@pytest.mark.parametrize(
    "trailing",
    [b"HTTP/1.1 200 OK\r\n", b"garbage", b"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\n[1]"],
    ids=["one-more-head", "extra-bytes", "second-answer"],
)
async def test_req_perf_004_bytes_after_an_answer_stay_on_their_own_origins_connection(
    trailing: bytes,
) -> None:
    # h11 keeps bytes that follow a complete answer for the connection's next exchange
    # (decisions/engines-one-outbound-stack): they can only be read as, or break, the next
    # answer of the same provider on the same connection, never another engine's.
    async def reply(stream: trio.SocketStream, server: Scripted) -> None:
        buffer = bytearray()
        while await server.read_head(stream, buffer) is not None:
            await stream.send_all(_answer(b"{}") + trailing)

    async with scripted(reply) as first, scripted(_keep_alive) as second, EngineClient() as http:
        assert await _get(http, first) == b"{}"
        assert await _get(http, second) == b'{"n":1}'
        assert await _get(http, second) == b'{"n":2}'
    assert second.connections == 1


async def test_req_ops_001_an_https_origin_is_verified_and_offered_http_1_1_alone() -> None:
    # The engine client's context is its own, and its ALPN is set before each handshake:
    # whatever was set on it before (here h2, as a pool with HTTP/2 on would), the server
    # is offered HTTP/1.1 alone, which is what the client then speaks.
    authority = Authority()
    server_tls = authority.server_context("localhost")
    server_tls.set_alpn_protocols(["h2", "http/1.1"])
    offered: list[str | None] = []

    async def tls_answer(stream: trio.SocketStream, server: Scripted) -> None:
        secured = trio.SSLStream(stream, server_tls, server_side=True)
        buffer = bytearray()
        with contextlib.suppress(trio.BrokenResourceError):
            while await server.read_head(secured, buffer) is not None:
                offered.append(secured.selected_alpn_protocol())
                await secured.send_all(_answer(b"{}"))

    async with scripted(tls_answer) as server:
        context = authority.client_context()
        context.set_alpn_protocols(["h2"])
        origin = EngineOrigin.parse(f"https://localhost:{server.port}")
        async with EngineClient(ssl_context=context) as http:
            for _ in range(2):
                response = await http.get(origin, "/x", params=[], headers={}, max_bytes=MIB)
                assert response.body == b"{}"
        assert server.connections == 1
        assert offered == ["http/1.1", "http/1.1"]
        async with EngineClient(ssl_context=Authority().client_context()) as stranger:
            with pytest.raises(EngineFailure) as caught:
                await stranger.get(origin, "/x", params=[], headers={}, max_bytes=MIB)
        assert caught.value.failure_class is Reason.REQUEST_FAILURE


async def test_req_sec_010_an_https_answer_read_until_a_close_without_tls_goodbye_is_read() -> None:
    # Many servers end a body read until the close without TLS's close_notify: the abrupt
    # end is the body's end (https_compatible), not a broken connection.
    authority = Authority()
    server_tls = authority.server_context("localhost")
    until_close = _tls_answering(server_tls, b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 3000)
    async with scripted(until_close) as server:
        origin = EngineOrigin.parse(f"https://localhost:{server.port}")
        async with EngineClient(ssl_context=authority.client_context()) as http:
            response = await http.get(origin, "/x", params=[], headers={}, max_bytes=MIB)
    assert response.body == b"x" * 3000


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


@settings(max_examples=150, deadline=None)
@given(_ANSWERS, st.integers(min_value=1, max_value=40))
@example(b"HTTP/1.1 101 R\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n", 40)
@example(b"HTTP/1.1 100 R\r\n\r\nHTTP/1.1 200 R\r\nContent-Length: 2\r\n\r\n{}", 1)
@example(b"HTTP/1.1 200 R\r\nContent-Length: 0\r\n\r\nHTTP/1.1 404 R\r\n\r\nzz", 7)
@example(b"HTTP/1.1 302 R\r\nLocation: javascript:alert(1)\r\nContent-Length: 0\r\n\r\n", 40)
async def test_req_sec_023_any_answer_bytes_end_in_a_response_or_an_engine_failure(
    answer: bytes, piece: int
) -> None:
    # Whatever a provider sends, in whatever pieces, then closes: a response read within
    # what was sent, or EngineFailure; never another exception, never a hang.
    async def reply(stream: trio.SocketStream, server: Scripted) -> None:
        if await server.read_head(stream, bytearray()) is not None:
            for start in range(0, len(answer), piece):
                await stream.send_all(answer[start : start + piece])

    async with scripted(reply) as server, EngineClient() as http:
        with trio.fail_after(5):
            try:
                response = await http.get(
                    _origin(server), "/x", params=[], headers={}, max_bytes=MIB
                )
            except EngineFailure:
                pass
            else:
                assert 200 <= response.status <= 999
                assert len(response.body) <= len(answer)
