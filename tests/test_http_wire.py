"""What the listener reads before hypercorn does: request heads a proxy
and the listener could read differently are refused and the connection closed; the absolute
form is served; `Expect: 100-continue` waits for the gate's decision; over HTTP/2 a stream
beyond LIM-H4 is refused alone and a header block is bounded as its frames arrive.

Raw socket writes for what no well-behaved client sends, the h2 library as the HTTP/2 client;
real loopback sockets, small limits.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import hyperframe.frame
import pytest
import trio
from http_helpers import (
    CALLERS,
    CALLERS_ENV,
    TOKEN_A,
    SlowEngine,
    call_body,
    closed_by_server,
    http_counts,
    make_config,
    modern_headers,
    raw_exchange,
    serving,
)

from rypsok.core import telemetry

if TYPE_CHECKING:
    from collections.abc import Callable


@pytest.fixture(autouse=True)
def _fresh_counters() -> None:
    telemetry.COUNTERS.reset()


_BODY = json.dumps(call_body("engine_status")).encode()


def _fields(token: str | None = None) -> list[bytes]:
    lines = [f"{k}: {v}".encode() for k, v in modern_headers("tools/call", "engine_status").items()]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}".encode())
    return lines


def _request(
    *,
    line: bytes = b"POST /mcp HTTP/1.1",
    host: bytes | None = b"Host: 127.0.0.1",
    extra: tuple[bytes, ...] = (),
    token: str | None = None,
    body: bytes = _BODY,
    length: bool = True,
    eol: bytes = b"\r\n",
) -> bytes:
    lines = [line]
    if host is not None:
        lines.append(host)
    lines += _fields(token)
    lines += extra
    if length:
        lines.append(b"Content-Length: %d" % len(body))
    return eol.join(lines) + eol + eol + body


def _statuses(received: bytes) -> list[int]:
    """The status of every answer in `received` (bodies are JSON, never a status line)."""
    return [int(part[:3]) for part in received.split(b"HTTP/1.1 ")[1:]]


# -- 18.4: heads refused and the connection closed ---------------------------------------------

_SMUGGLED = b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        pytest.param(
            _request(extra=(b"Transfer-Encoding: chunked",), body=b"0\r\n\r\n" + _SMUGGLED),
            400,
            id="content-length-and-transfer-encoding",
        ),
        pytest.param(_request(extra=(b"X-Folded: a", b" b")), 400, id="obsolete-line-folding"),
        pytest.param(_request(eol=b"\n"), 400, id="bare-lf"),
        pytest.param(_request(line=b"post /mcp HTTP/1.1"), 400, id="lower-case-method"),
        pytest.param(_request(line=b"POST /mcp HTTP/2.0"), 505, id="http2-request-line"),
        pytest.param(_request(extra=(b"X-Space : a",)), 400, id="space-before-colon"),
        pytest.param(_request(extra=(b"Content-Length: 7",)), 400, id="two-content-lengths"),
        pytest.param(_request(extra=(b"Transfer-Encoding: gzip",), length=False), 501, id="te"),
    ],
)
async def test_req_sec_018_an_ambiguous_request_head_is_refused_and_the_connection_closed(
    request_bytes: bytes, status: int
) -> None:
    async with serving(make_config()) as server:
        # Each request is followed by a second one on the same connection: were the
        # connection kept, the second would be answered too.
        received = await raw_exchange(server.port, request_bytes + _SMUGGLED, timeout_s=3)
    assert _statuses(received) == [status]
    assert b"connection: close" in received.lower()
    assert http_counts() == {"bad_request": 1}


async def test_req_sec_018_a_valid_request_after_a_chunked_one_is_served_in_turn() -> None:
    """The gate follows the body's framing: a chunked request and a request with a length,
    written at once on one connection, are both answered, in order."""
    chunked = _request(
        extra=(b"Transfer-Encoding: chunked",),
        length=False,
        body=b"%x\r\n" % len(_BODY) + _BODY + b"\r\n0\r\n\r\n",
    )
    second = json.dumps(call_body("engine_status", id=2)).encode()
    last = _request(body=second, extra=(b"Connection: close",))
    async with serving(make_config()) as server:
        received = await raw_exchange(server.port, chunked + last, timeout_s=5)
    assert _statuses(received) == [200, 200]
    assert b'"id":1' in received.split(b"HTTP/1.1 200")[1]
    assert b'"id":2' in received.split(b"HTTP/1.1 200")[2]


@pytest.mark.parametrize("host", [b"Host: 127.0.0.1", b"Host: elsewhere.example", None])
async def test_req_mcp_003_an_absolute_form_target_is_served(host: bytes | None) -> None:
    """RFC 9112 §3.2.2: accepted, and its authority stands for the Host field."""
    async with serving(make_config()) as server:
        line = b"POST http://127.0.0.1:%d/mcp HTTP/1.1" % server.port
        received = await raw_exchange(
            server.port, _request(line=line, host=host, extra=(b"Connection: close",))
        )
    assert _statuses(received) == [200]
    assert json.loads(received.partition(b"\r\n\r\n")[2])["result"]["isError"] is False


async def test_req_mcp_003_an_absolute_form_target_names_the_host_that_is_checked() -> None:
    async with serving(make_config()) as server:
        line = b"POST http://elsewhere.example/mcp HTTP/1.1"
        received = await raw_exchange(
            server.port, _request(line=line, extra=(b"Connection: close",))
        )
    assert _statuses(received) == [403]


# -- 18.4: Expect: 100-continue ----------------------------------------------------------------


async def _head_then_read(port: int, head: bytes, timeout_s: float = 1.0) -> bytes:
    """Send a head that asks for 100 and read what comes before the body is sent."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(head)
    received = b""
    with trio.move_on_after(timeout_s):
        while b"\r\n\r\n" not in received:
            chunk = await stream.receive_some(65536)
            if not chunk:
                break
            received += chunk
    await stream.aclose()
    return received


@pytest.mark.parametrize(
    ("token", "length", "status"),
    [(None, len(_BODY), 401), (TOKEN_A, 70000, 413)],
    ids=["no-token", "too-large"],
)
async def test_req_sec_018_expect_continue_is_answered_by_the_gates_refusal_not_100(
    token: str | None, length: int, status: int
) -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    head = _request(token=token, extra=(b"Expect: 100-continue",), length=False, body=b"")
    head = head[:-2] + b"Content-Length: %d\r\n\r\n" % length
    async with serving(config, CALLERS_ENV) as server:
        received = await _head_then_read(server.port, head)
    assert received.startswith(b"HTTP/1.1 %d" % status)


async def test_req_mcp_003_expect_continue_gets_100_once_the_body_is_wanted() -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    head = _request(token=TOKEN_A, extra=(b"Expect: 100-continue",))[: -len(_BODY)]
    async with serving(config, CALLERS_ENV) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        await stream.send_all(head)
        interim = b""
        with trio.fail_after(5):
            while b"\r\n\r\n" not in interim:
                interim += await stream.receive_some(65536)
        await stream.send_all(_BODY)
        with trio.fail_after(5):
            final = b""
            while b'"result"' not in final:
                final += await stream.receive_some(65536)
        await stream.aclose()
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert final.startswith(b"HTTP/1.1 200")


# -- 18.4: HTTP/2, a stream beyond LIM-H4 ------------------------------------------------------


def _h2_headers(port: int, body: bytes, tool: str) -> list[tuple[str, str]]:
    headers = [
        (":method", "POST"),
        (":path", "/mcp"),
        (":scheme", "http"),
        (":authority", f"127.0.0.1:{port}"),
        ("content-length", str(len(body))),
    ]
    return headers + [(k.lower(), v) for k, v in modern_headers("tools/call", tool).items()]


def _open_stream(
    conn: h2.connection.H2Connection, stream_id: int, port: int, body: bytes, tool: str
) -> None:
    conn.send_headers(stream_id, _h2_headers(port, body, tool))
    conn.send_data(stream_id, body, end_stream=True)


async def _in_flight(server: Any, done: Callable[[int], bool]) -> None:
    with trio.fail_after(5):
        while not done(server.listener.in_flight):  # noqa: ASYNC110 # a counter, no event
            await trio.sleep(0.02)


async def _send_until(
    stream: trio.SocketStream, conn: h2.connection.H2Connection, kind: type[h2.events.Event]
) -> list[h2.events.Event]:
    """Send what `conn` has to send, then its events until one of `kind` (5 s at most)."""
    await stream.send_all(conn.data_to_send())
    events: list[h2.events.Event] = []
    with trio.move_on_after(5):
        while not any(isinstance(e, kind) for e in events):
            data = await stream.receive_some(65536)
            if not data:
                break
            events += conn.receive_data(data)
            await stream.send_all(conn.data_to_send())
    return events


async def test_req_sec_022_an_http2_stream_beyond_max_streams_is_refused_alone() -> None:
    engine = SlowEngine("wikipedia", None)
    config = make_config("[service.http]\nmax_streams = 2\n")
    async with serving(config, engine=engine) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        slow = json.dumps(call_body("web_search", {"query": "rust"})).encode()
        for stream_id in (1, 3):
            _open_stream(conn, stream_id, server.port, slow, "web_search")
        await stream.send_all(conn.data_to_send())
        await _in_flight(server, lambda count: count == 2)
        # A third stream, opened by a client that ignores SETTINGS_MAX_CONCURRENT_STREAMS.
        _open_stream(conn, 5, server.port, _BODY, "engine_status")
        events = await _send_until(stream, conn, h2.events.StreamReset)
        # The two in flight still run on the open connection ...
        assert server.listener.in_flight == 2
        assert not engine.cancelled.is_set()
        # ... and once the client stops counting past the bound, it is served again.
        conn.reset_stream(1)
        await stream.send_all(conn.data_to_send())
        await _in_flight(server, lambda count: count == 1)
        _open_stream(conn, 7, server.port, _BODY, "engine_status")
        later = await _send_until(stream, conn, h2.events.StreamEnded)
        await stream.aclose()
    refused = [e for e in events if isinstance(e, h2.events.StreamReset)]
    assert [(e.stream_id, e.error_code) for e in refused] == [
        (5, h2.errors.ErrorCodes.REFUSED_STREAM)
    ]
    assert not any(isinstance(e, h2.events.ConnectionTerminated) for e in events + later)
    answered = [e for e in later if isinstance(e, h2.events.ResponseReceived)]
    assert [(e.stream_id, dict(e.headers)[b":status"]) for e in answered] == [(7, b"200")]


# -- 18.3: HTTP/2, a header block bounded as it arrives ----------------------------------------


def _frame(frame: hyperframe.frame.Frame) -> bytes:
    return bytes(frame.serialize())


async def test_req_sec_018_an_http2_header_block_in_continuation_frames_is_cut_at_lim_h7() -> None:
    """HEADERS without END_HEADERS, then CONTINUATION frames of 16 KiB: the connection closes
    once the fragments pass 16 KiB, before h2 has buffered them (h2 alone waits for 64)."""
    async with serving(make_config()) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        await stream.send_all(conn.data_to_send())
        headers = hyperframe.frame.HeadersFrame(1)
        headers.data = b"\x82" * 8000  # indexed ":method: GET", over and over
        await stream.send_all(_frame(headers))
        start = trio.current_time()
        closed = False
        try:
            for _ in range(8):
                continuation = hyperframe.frame.ContinuationFrame(1)
                continuation.data = b"\x82" * 16384
                await stream.send_all(_frame(continuation))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            closed = True
        if not closed:
            received = await closed_by_server(stream, 3)
            # A close, no answer: at most the server's own preface (SETTINGS) came first.
            assert b"HTTP" not in received
        await stream.aclose()
        assert trio.current_time() - start < 3
        with trio.fail_after(5):
            while server.listener.connections:  # noqa: ASYNC110 # a counter, no event
                await trio.sleep(0.02)
    assert http_counts() == {"header_too_large": 1}


async def test_req_sec_022_an_unfinished_http2_header_block_has_the_head_bound() -> None:
    """HEADERS without END_HEADERS, then nothing: no other frame may come on the connection
    until the block ends, so the head's bound closes it, not the idle time."""
    async with serving(make_config(idle_timeout_s=5, head_timeout_s=1)) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        headers = hyperframe.frame.HeadersFrame(1)
        headers.data = b"\x82" * 100
        await stream.send_all(conn.data_to_send() + _frame(headers))
        start = trio.current_time()
        received = await closed_by_server(stream, 4)
        elapsed = trio.current_time() - start
        await stream.aclose()
    assert b"HTTP" not in received
    assert 0.9 <= elapsed < 2.5
    assert http_counts() == {"head_timeout": 1}


async def test_req_sec_022_an_http2_connection_between_requests_waits_the_idle_time() -> None:
    """Its preface whole and no header block begun, a connection waits for a request: the
    idle time holds, not the head's bound."""
    async with serving(make_config(idle_timeout_s=5, head_timeout_s=1)) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        opening = conn.data_to_send()
        preface = len(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        await stream.send_all(opening[:preface])  # the preface alone, then nothing for 2 s
        received = b""
        with trio.move_on_after(2):
            while data := await stream.receive_some(65536):
                received += data
        assert server.listener.connections == 1
        conn.receive_data(received)
        await stream.send_all(opening[preface:])
        _open_stream(conn, 1, server.port, _BODY, "engine_status")
        events = await _send_until(stream, conn, h2.events.StreamEnded)
        await stream.aclose()
    assert any(isinstance(e, h2.events.ResponseReceived) for e in events)
    assert http_counts() == {}
