"""The connection-level bounds of the listener (LIM-H1, H3, H4, H7) and its accept loop,
over real loopback sockets with small limits and the real clock.
"""

from __future__ import annotations

import errno
import json
import socket
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.settings
import httpx
import pytest
import trio
from http_helpers import (
    ACCEPT,
    CALLERS,
    CALLERS_ENV,
    TOKEN_A,
    TOKEN_B,
    SlowEngine,
    call_body,
    call_status,
    closed_by_server,
    http_counts,
    make_config,
    modern_headers,
    serving,
    start_slow_search,
)
from search_fakes import capture_logs

from rypsok.core import telemetry
from rypsok.mcp.http_framing import Http1RequestParser
from rypsok.mcp.listener import listening_socket
from rypsok.mcp.listener.connection import Connection
from rypsok.mcp.listener.memory import TRIM_AFTER_CLOSES, TRIM_QUIET_S


@pytest.fixture(autouse=True)
def _fresh_counters() -> None:
    telemetry.COUNTERS.reset()


def _request_bytes(keep_alive: bool = True, token: str | None = None) -> bytes:
    body = json.dumps(call_body("engine_status")).encode()
    headers = modern_headers("tools/call", "engine_status", token)
    lines = [b"POST /mcp HTTP/1.1", b"Host: 127.0.0.1"]
    lines += [f"{k}: {v}".encode() for k, v in headers.items()]
    lines.append(b"Content-Length: %d" % len(body))
    if not keep_alive:
        lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


async def _answered(stream: trio.SocketStream, token: str | None = None) -> bytes:
    """Send one request and read its whole answer (the connection stays open)."""
    await stream.send_all(_request_bytes(token=token))
    return await _answer(stream)


async def _answer(stream: trio.SocketStream) -> bytes:
    """The head of the next whole answer on `stream` (its body read too)."""
    data = b""
    with trio.fail_after(5):
        while b"\r\n\r\n" not in data:
            data += await stream.receive_some(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += await stream.receive_some(65536)
    return head


def _sent_before_accept(port: int, data: bytes) -> trio.SocketStream:
    """A connection whose first bytes are in the server's socket buffer before its accept:
    connected and written with a blocking socket, the listener not running in between (a
    client that writes before a busy server accepts; the kernel completes the connect)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(data)
    return trio.SocketStream(trio.socket.from_stdlib_socket(sock))


async def _wait_for(predicate: Any, timeout_s: float = 5) -> None:
    with trio.fail_after(timeout_s):
        while not predicate():  # noqa: ASYNC110 # a counter of the listener, no event to wait on
            await trio.sleep(0.02)


# -- LIM-H1 -----------------------------------------------------------------------------------


def _search_bytes() -> bytes:
    body = json.dumps(call_body("web_search", {"query": "rust"})).encode()
    headers = modern_headers("tools/call", "web_search")
    lines = [b"POST /mcp HTTP/1.1", b"Host: 127.0.0.1"]
    lines += [f"{k}: {v}".encode() for k, v in headers.items()]
    lines.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


async def _in_flight(server: Any, count: int) -> list[trio.SocketStream]:
    """`count` connections, each with a web_search running (a SlowEngine that never ends)."""
    streams = []
    for _ in range(count):
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        await stream.send_all(_search_bytes())
        streams.append(stream)
    await _wait_for(lambda: server.listener.in_flight == count)
    return streams


async def test_req_sec_018_the_connection_cap_refuses_only_when_every_connection_is_busy() -> None:
    engine = SlowEngine("wikipedia", None)
    config = make_config("[service.http]\nmax_connections = 2\n")
    with capture_logs() as logs:
        async with serving(config, engine=engine) as server:
            first, second = await _in_flight(server, 2)
            third = await trio.open_tcp_stream("127.0.0.1", server.port)
            # Closed unanswered: not a byte comes back, and both calls still run.
            assert await closed_by_server(third, 5) == b""
            assert server.listener.in_flight == 2
            await third.aclose()
            await first.aclose()
            await _wait_for(lambda: server.listener.connections < 2)
            fourth = await trio.open_tcp_stream("127.0.0.1", server.port)
            assert (await _answered(fourth)).startswith(b"HTTP/1.1 200")
            await second.aclose()
            await fourth.aclose()
    refused = logs.named("http_refused")
    assert [(e["reason"], e["family"], e["count"]) for e in refused] == [
        ("too_many_connections", "ipv4", 1)
    ]
    assert http_counts() == {"too_many_connections": 1}


async def test_req_sec_018_at_the_cap_the_longest_waiting_connection_makes_room() -> None:
    """Never one with a request in flight: the silent one goes first, then the one idle
    since its answer; the call that runs on the oldest connection of all goes on."""
    engine = SlowEngine("wikipedia", None)
    config = make_config("[service.http]\nmax_connections = 3\n")
    async with serving(config, engine=engine) as server:
        (busy,) = await _in_flight(server, 1)
        silent = await trio.open_tcp_stream("127.0.0.1", server.port)
        await _wait_for(lambda: server.listener.connections == 2)
        kept_alive = await trio.open_tcp_stream("127.0.0.1", server.port)
        assert (await _answered(kept_alive)).startswith(b"HTTP/1.1 200")
        # Newcomers with their request: a connection younger than the grace makes room too.
        newcomer = _sent_before_accept(server.port, _request_bytes())
        assert await closed_by_server(silent, 2) == b""
        assert (await _answer(newcomer)).startswith(b"HTTP/1.1 200")
        latest = _sent_before_accept(server.port, _request_bytes())
        assert await closed_by_server(kept_alive, 2) == b""
        assert (await _answer(latest)).startswith(b"HTTP/1.1 200")
        assert not engine.cancelled.is_set()
        for stream in (busy, silent, kept_alive, newcomer, latest):
            await stream.aclose()
    assert http_counts() == {"connection_evicted": 2}


# -- LIM-H3 -----------------------------------------------------------------------------------


async def test_req_sec_022_a_silent_connection_is_closed_after_the_idle_time() -> None:
    config = make_config(idle_timeout_s=1)
    with capture_logs() as logs:
        async with serving(config) as server:
            stream = await trio.open_tcp_stream("127.0.0.1", server.port)
            start = trio.current_time()
            assert await closed_by_server(stream, 5) == b""
            elapsed = trio.current_time() - start
            await stream.aclose()
    assert 0.9 <= elapsed < 3
    assert http_counts() == {"idle_connection": 1}
    assert logs.named("http_refused") == []  # counted, never logged per connection


@pytest.mark.parametrize("first", [b"P", b"PRI * HTTP/2.0\r\n\r\nSM\r\n"])
async def test_req_sec_022_one_ambiguous_byte_then_silence_is_closed_after_the_idle_time(
    first: bytes,
) -> None:
    config = make_config(idle_timeout_s=1)
    async with serving(config) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        await stream.send_all(first)
        assert await closed_by_server(stream, 5) == b""
        await stream.aclose()
    assert http_counts() == {"idle_connection": 1}


async def _one_call(port: int, token: str | None = None) -> bytes:
    """One request on a fresh connection, written before the accept: its answer's head, or
    b"" when closed unanswered."""
    stream = _sent_before_accept(port, _request_bytes(keep_alive=False, token=token))
    try:
        return (await closed_by_server(stream, 5)).partition(b"\r\n")[0]
    except trio.BrokenResourceError:
        return b""
    finally:
        await stream.aclose()


async def test_req_sec_022_silent_connections_cannot_hold_every_permit() -> None:
    # The idle time is long: only making room at the cap can let the caller in.
    config = make_config(max_connections=2, idle_timeout_s=60)
    async with serving(config) as server:
        silent = [await trio.open_tcp_stream("127.0.0.1", server.port) for _ in range(2)]
        await _wait_for(lambda: server.listener.connections == 2)
        start = trio.current_time()
        answer = await _one_call(server.port)
        assert answer.startswith(b"HTTP/1.1 200")
        assert trio.current_time() - start < 1
        for stream in silent:
            await stream.aclose()
    assert http_counts() == {"connection_evicted": 1}


async def _trickle(port: int, closed: list[float], start: float) -> None:
    """A request head a byte every 0.2 s, until the server closes the connection."""
    try:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
    except OSError:
        return
    try:
        await stream.send_all(b"POST /mcp HTTP/1.1\r\n")
        await _dribble(stream, b"X")
    finally:
        closed.append(trio.current_time() - start)
        await stream.aclose()


async def _dribble(stream: trio.SocketStream, byte: bytes) -> None:
    """`byte` every 0.2 s until the server closes the connection."""
    try:
        while True:
            with trio.move_on_after(0.2):
                if await stream.receive_some(65536) == b"":
                    return
            await stream.send_all(byte)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


async def test_req_sec_018_a_caller_is_served_within_2_s_during_a_trickling_flood() -> None:
    config = make_config(max_connections=8, idle_timeout_s=60)
    closed: list[float] = []
    async with serving(config) as server, trio.open_nursery() as nursery:
        start = trio.current_time()
        for _ in range(100):
            nursery.start_soon(_trickle, server.port, closed, start)
        await _wait_for(lambda: server.listener.connections == 8)
        await trio.sleep(0.5)  # the flood in place, renewing itself
        asked = trio.current_time()
        answer = await _one_call(server.port)
        served_after = trio.current_time() - asked
        nursery.cancel_scope.cancel()
    assert answer.startswith(b"HTTP/1.1 200")
    assert served_after < 2


async def test_req_sec_022_a_request_head_has_a_bound_shorter_than_the_idle_time() -> None:
    config = make_config(idle_timeout_s=5, head_timeout_s=1)
    closed: list[float] = []
    async with serving(config) as server:
        silent = await trio.open_tcp_stream("127.0.0.1", server.port)
        await _trickle(server.port, closed, trio.current_time())
        # The silent connection waits for a request: the idle time, not the head's, holds.
        with trio.move_on_after(0.5):
            assert await silent.receive_some(65536) != b""
        await silent.aclose()
    assert 0.9 <= closed[0] < 2.5
    assert http_counts() == {"head_timeout": 1}


async def test_req_sec_019_a_caller_past_its_share_gives_up_its_own_idle_connection() -> None:
    """Two callers, four connections: the first caller's third keep-alive connection closes
    its own oldest idle one, not another caller's."""
    config = make_config(CALLERS + "[service.http]\nmax_connections = 4\n", CALLERS_ENV)
    async with serving(config, CALLERS_ENV) as server:
        other = await trio.open_tcp_stream("127.0.0.1", server.port)
        assert (await _answered(other, TOKEN_B)).startswith(b"HTTP/1.1 200")
        own = [await trio.open_tcp_stream("127.0.0.1", server.port) for _ in range(3)]
        for stream in own:
            assert (await _answered(stream, TOKEN_A)).startswith(b"HTTP/1.1 200")
        assert await closed_by_server(own[0], 2) == b""
        assert (await _answered(own[2], TOKEN_A)).startswith(b"HTTP/1.1 200")
        assert (await _answered(other, TOKEN_B)).startswith(b"HTTP/1.1 200")
        for stream in [other, *own]:
            await stream.aclose()
    assert http_counts() == {"connection_evicted": 1}


async def test_req_sec_019_no_caller_holds_more_than_its_share_of_the_connections() -> None:
    """Two callers, four connections: the first caller's third call in flight is refused
    (503: its head came in parts, so the app's claim decides) and the second caller still
    finds room."""
    engine = SlowEngine("wikipedia", None)
    config = make_config(CALLERS + "[service.http]\nmax_connections = 4\n", CALLERS_ENV)
    token = f"Authorization: Bearer {TOKEN_A}\r\n".encode()
    search = _search_bytes().replace(b"\r\n", b"\r\n" + token, 1)
    with capture_logs() as logs:
        async with serving(config, CALLERS_ENV, engine=engine) as server:
            held = []
            for _ in range(2):
                stream = await trio.open_tcp_stream("127.0.0.1", server.port)
                await stream.send_all(search)
                held.append(stream)
            await _wait_for(lambda: server.listener.in_flight == 2)
            beyond = []
            for _ in range(2):
                stream = await trio.open_tcp_stream("127.0.0.1", server.port)
                await stream.send_all(search[:20])
                await _wait_for(lambda: server.listener.connections == 3)
                await trio.sleep(0.05)  # the first part read on its own
                await stream.send_all(search[20:])
                beyond.append((await closed_by_server(stream, 5)).partition(b"\r\n")[0])
                await stream.aclose()
            async with httpx.AsyncClient() as client:
                other = await call_status(client, server, TOKEN_B)
            await _wait_for(lambda: server.listener.in_flight == 2)
            for stream in held:
                await stream.aclose()
    assert beyond == [b"HTTP/1.1 503 "] * 2
    assert other.status_code == 200
    assert http_counts() == {"caller_share": 2}
    lines = logs.named("http_refused")
    assert [(e["reason"], e["count"]) for e in lines] == [("caller_share", 1), ("caller_share", 1)]


def _search_of(token: str) -> bytes:
    token_line = f"Authorization: Bearer {token}\r\n".encode()
    return _search_bytes().replace(b"\r\n", b"\r\n" + token_line, 1)


async def test_req_sec_019_a_caller_past_its_share_is_closed_at_its_accept() -> None:
    """A connection whose head is waiting at its accept, of a caller holding its share with
    a request on each connection, is closed there, unanswered: a flood's renewed connections
    take no slot while hypercorn parses them and the app answers 503."""
    engine = SlowEngine("wikipedia", None)
    config = make_config(CALLERS + "[service.http]\nmax_connections = 4\n", CALLERS_ENV)
    async with serving(config, CALLERS_ENV, engine=engine) as server:
        held = []
        for _ in range(2):
            stream = await trio.open_tcp_stream("127.0.0.1", server.port)
            await stream.send_all(_search_of(TOKEN_A))
            held.append(stream)
        await _wait_for(lambda: server.listener.in_flight == 2)
        beyond = [_sent_before_accept(server.port, _search_of(TOKEN_A)) for _ in range(3)]
        answers = [await closed_by_server(stream, 5) for stream in beyond]
        assert server.listener.connections == 2
        assert await _one_call(server.port, TOKEN_B) == b"HTTP/1.1 200 "
        for stream in [*held, *beyond]:
            await stream.aclose()
    assert answers == [b""] * 3
    assert http_counts() == {"caller_share": 3}


async def _slow_body(port: int, token: str | None, declared: int, sent: bytes) -> trio.SocketStream:
    """A request whose head is whole and whose body (`declared` bytes) stops after `sent`."""
    headers = modern_headers("tools/call", "engine_status", token)
    lines = [b"POST /mcp HTTP/1.1", b"Host: 127.0.0.1"]
    lines += [f"{k}: {v}".encode() for k, v in headers.items()]
    lines.append(b"Content-Length: %d" % declared)
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(b"\r\n".join(lines) + b"\r\n\r\n" + sent)
    return stream


async def test_req_sec_018_a_body_that_cannot_arrive_in_time_makes_room_at_the_cap() -> None:
    """Two connections, each with a request whose body is arriving: the one whose rate
    cannot bring it whole within LIM-H5 (10 of 60000 bytes in a second) makes room for a
    newcomer once the grace has passed; the one on its way (50 of 100) does not, and is
    answered when the rest comes."""
    body = json.dumps(call_body("engine_status")).encode().ljust(100)
    config = make_config(max_connections=2, idle_timeout_s=60)
    async with serving(config) as server:
        on_its_way = await _slow_body(server.port, None, len(body), body[:50])
        doomed = await _slow_body(server.port, None, 60000, b" " * 10)
        await _wait_for(lambda: server.listener.in_flight == 2)
        assert await _one_call(server.port) == b""  # within the grace: no room
        await trio.sleep(1.1)
        assert await _one_call(server.port) == b"HTTP/1.1 200 "
        assert await closed_by_server(doomed, 2) == b""
        await on_its_way.send_all(body[50:])
        assert (await _answer(on_its_way)).startswith(b"HTTP/1.1 200")
        await on_its_way.aclose()
        await doomed.aclose()
    assert http_counts() == {"too_many_connections": 1, "connection_evicted": 1}


async def _slow_body_flooder(port: int, token: str) -> None:
    """One connection of a slow-body flood, opened again each time the server closes it."""
    while True:
        try:
            stream = await _slow_body(port, token, 200, b"{")
        except OSError:
            await trio.sleep(0.05)
            continue
        try:
            await _dribble(stream, b" ")
        finally:
            await stream.aclose()


async def test_req_sec_018_a_caller_is_served_within_2_s_during_a_slow_body_flood() -> None:
    """100 connections of one caller, each with a whole head and a body trickling a byte
    every 0.2 s, renewed as they close, at a cap of 8: the other caller is served within
    2 s."""
    config = make_config(CALLERS, CALLERS_ENV, max_connections=8, idle_timeout_s=60)
    async with serving(config, CALLERS_ENV) as server, trio.open_nursery() as nursery:
        for _ in range(100):
            nursery.start_soon(_slow_body_flooder, server.port, TOKEN_A)
        await _wait_for(lambda: server.listener.in_flight == 4)  # the flood's share
        await trio.sleep(1.5)  # past the grace: the flood renewing itself
        asked = trio.current_time()
        answer = await _one_call(server.port, TOKEN_B)
        served_after = trio.current_time() - asked
        nursery.cancel_scope.cancel()
    assert answer == b"HTTP/1.1 200 "
    assert served_after < 2
    assert http_counts()["caller_share"] > 0  # the flood past its share, closed


async def test_req_sec_018_a_newcomer_without_its_request_closes_only_a_settled_connection() -> (
    None
):
    """A connection that has not sent its request yet is not closed for a newcomer that has
    not either until it has waited the grace (a second): a flood's renewed connections
    would otherwise close a caller's connection before its head comes. (Each sends the
    start of a head: the kernel holds a connection that has sent nothing for a second
    before its accept, `DEFER_ACCEPT_S`.)"""
    config = make_config(max_connections=1, idle_timeout_s=60)
    begun = b"POST /mcp HTTP/1.1\r\n"
    async with serving(config) as server:
        first = await trio.open_tcp_stream("127.0.0.1", server.port)
        await first.send_all(begun)
        await _wait_for(lambda: server.listener.connections == 1)
        second = await trio.open_tcp_stream("127.0.0.1", server.port)
        await second.send_all(begun)
        assert await closed_by_server(second, 2) == b""  # the young one stays
        await trio.sleep(1.1)
        third = await trio.open_tcp_stream("127.0.0.1", server.port)
        await third.send_all(begun)
        assert await closed_by_server(first, 2) == b""  # settled: it makes room
        rest = _request_bytes().removeprefix(begun)
        await third.send_all(rest)
        assert (await _answer(third)).startswith(b"HTTP/1.1 200")
        for stream in (first, second, third):
            await stream.aclose()
    assert http_counts() == {"too_many_connections": 1, "connection_evicted": 1}


async def test_req_sec_022_an_idle_keep_alive_connection_is_closed_after_the_idle_time() -> None:
    config = make_config(idle_timeout_s=1)
    async with serving(config) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        assert (await _answered(stream)).startswith(b"HTTP/1.1 200")
        start = trio.current_time()
        assert await closed_by_server(stream, 5) == b""
        assert 0.9 <= trio.current_time() - start < 3
        await stream.aclose()


async def test_req_sec_022_a_trickled_header_block_is_closed_after_the_idle_time() -> None:
    config = make_config(idle_timeout_s=1)
    async with serving(config) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        await stream.send_all(b"POST /mcp HTTP/1.1\r\n")
        start = trio.current_time()
        closed = False
        with trio.fail_after(5):
            while not closed:
                try:
                    await stream.send_all(b"X")  # one header byte every 0.1 s
                except trio.BrokenResourceError:
                    break
                with trio.move_on_after(0.1):
                    try:
                        closed = await stream.receive_some(65536) == b""
                    except trio.BrokenResourceError:
                        closed = True
        assert trio.current_time() - start < 3
        await stream.aclose()


# -- HTTP/2 (h2c), LIM-H4 and LIM-H7 ----------------------------------------------------------


def _h2_headers(server_port: int, body: bytes, **extra: str) -> list[tuple[str, str]]:
    headers = [
        (":method", "POST"),
        (":path", "/mcp"),
        (":scheme", "http"),
        (":authority", f"127.0.0.1:{server_port}"),
        ("content-length", str(len(body))),
    ]
    headers += [(k.lower(), v) for k, v in modern_headers("tools/call", "engine_status").items()]
    headers += [(k, v) for k, v in extra.items()]
    return headers


async def _h2_events(
    stream: trio.SocketStream, conn: h2.connection.H2Connection, timeout_s: float
) -> list[h2.events.Event]:
    """Events until the connection ends or `timeout_s` passes."""
    events: list[h2.events.Event] = []
    with trio.move_on_after(timeout_s):
        while True:
            try:
                data = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                break
            if not data:
                break
            for event in conn.receive_data(data):
                events.append(event)
                if isinstance(event, h2.events.ConnectionTerminated):
                    return events
            await stream.send_all(conn.data_to_send())
    return events


async def test_req_mcp_003_a_call_over_http2_cleartext_is_answered() -> None:
    async with serving(make_config()) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        body = json.dumps(call_body("engine_status")).encode()
        conn.send_headers(1, _h2_headers(server.port, body))
        conn.send_data(1, body, end_stream=True)
        await stream.send_all(conn.data_to_send())
        events: list[h2.events.Event] = []
        data = b""
        with trio.fail_after(5):
            while not any(isinstance(e, h2.events.StreamEnded) for e in events):
                events += conn.receive_data(await stream.receive_some(65536))
                await stream.send_all(conn.data_to_send())
        await stream.aclose()
    response = next(e for e in events if isinstance(e, h2.events.ResponseReceived))
    assert (b":status", b"200") in response.headers
    data = b"".join(e.data for e in events if isinstance(e, h2.events.DataReceived))
    assert json.loads(data)["result"]["isError"] is False
    settings = next(e for e in events if isinstance(e, h2.events.RemoteSettingsChanged))
    changed = settings.changed_settings
    assert changed[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS].new_value == 16
    assert changed[h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE].new_value == 16384


async def test_req_sec_018_the_http2_header_list_is_bounded() -> None:
    async with serving(make_config()) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        body = json.dumps(call_body("engine_status")).encode()
        conn.send_headers(1, _h2_headers(server.port, body, **{"x-big": "a" * 17000}))
        conn.send_data(1, body, end_stream=True)
        await stream.send_all(conn.data_to_send())
        events = await _h2_events(stream, conn, 5)
        await stream.aclose()
    answered = [e for e in events if isinstance(e, h2.events.ResponseReceived)]
    # h2 advertises the bound (SETTINGS_MAX_HEADER_LIST_SIZE) but does not hold a client to
    # it; the listener does: the stream gets 431 and no call runs.
    assert [e.headers[0] for e in answered] == [(b":status", b"431")]


# -- the accept loop ------------------------------------------------------------------------


class _FailingSocket:
    """A listening socket whose first `failures` accepts fail as if descriptors ran out."""

    def __init__(self, sock: socket.socket, failures: int) -> None:
        self._sock = trio.socket.from_stdlib_socket(sock)
        self.failures = failures
        self.family = sock.family
        self.attempts = 0

    async def accept(self) -> Any:
        self.attempts += 1
        if self.failures > 0:
            self.failures -= 1
            await trio.lowlevel.checkpoint()
            raise OSError(errno.EMFILE, "Too many open files")
        return await self._sock.accept()

    def getsockname(self) -> Any:
        return self._sock.getsockname()

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        self._sock.close()


async def test_req_sec_018_accept_errors_back_off_and_are_logged_once_per_interval() -> None:
    failing = _FailingSocket(listening_socket("127.0.0.1:8737", 0), failures=12)
    with capture_logs() as logs:
        async with serving(make_config(), listen_socket=failing) as server:
            start = trio.current_time()
            async with httpx.AsyncClient() as client:
                response = await call_status(client, server)
            elapsed = trio.current_time() - start
    assert response.status_code == 200
    assert failing.failures == 0
    assert failing.attempts <= 14  # 100 ms apart: no busy loop
    assert elapsed >= 1.1
    failed = logs.named("accept_failed")
    assert len(failed) == 1
    assert failed[0]["error"] == "EMFILE"


async def test_req_sec_018_a_refused_request_leaves_the_process_serving() -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        garbage = await trio.open_tcp_stream("127.0.0.1", server.port)
        await garbage.send_all(b"\x00\x01\x02 not http at all\r\n\r\n")
        await closed_by_server(garbage, 5)
        await garbage.aclose()
        response = await client.post(
            server.url,
            content=json.dumps(call_body("engine_status")),
            headers={**modern_headers("tools/call", "engine_status"), "Accept": ACCEPT},
        )
    assert response.status_code == 200


class _StoppingSocket(_FailingSocket):
    """A listening socket whose accept, once it has a connection, starts the shutdown and
    returns only when the shutdown has closed the socket: the moment trio's accept spends in
    its last checkpoint, which no cancel interrupts, under a flood."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock, failures=0)
        self.stop: trio.Event | None = None

    async def accept(self) -> Any:
        accepted = await self._sock.accept()
        assert self.stop is not None
        self.stop.set()
        with trio.CancelScope(shield=True), trio.fail_after(5):
            while self._sock.fileno() != -1:  # noqa: ASYNC110 # no event: the listener closes it
                await trio.sleep(0.01)
        return accepted


async def test_req_ops_002_a_shutdown_during_an_accept_ends_the_accept_loop() -> None:
    """The shutdown cancels the accept loop and closes the listening socket; an accept that
    had just taken a connection returns after both. The loop then ends: before, it went on
    to take what else the backlog held from the closed descriptor (EBADF), and the error
    ended the process instead of the shutdown's drain."""
    stopping = _StoppingSocket(listening_socket("127.0.0.1:8737", 0))
    with capture_logs() as logs:
        async with serving(make_config(), listen_socket=stopping) as server:
            stopping.stop = server.stop
            stream = await trio.open_tcp_stream("127.0.0.1", server.port)
            await stream.send_all(b"POST /mcp HTTP/1.1\r\n")  # a head begun: accepted now
            with trio.fail_after(5):
                await server.stop.wait()
        # The drain closed the connection the last accept took, as any without a request.
        assert await closed_by_server(stream, 5) == b""
        await stream.aclose()
    assert len(logs.named("shutdown_started")) == 1


async def test_req_mcp_007_an_http2_stream_reset_cancels_its_call() -> None:
    from http_helpers import SlowEngine

    engine = SlowEngine("wikipedia", None)
    async with serving(make_config(), engine=engine) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        body = json.dumps(call_body("web_search", {"query": "rust"})).encode()
        headers = [
            (k, "web_search" if k == "mcp-name" else v) for k, v in _h2_headers(server.port, body)
        ]
        conn.send_headers(1, headers)
        conn.send_data(1, body, end_stream=True)
        await stream.send_all(conn.data_to_send())
        with trio.fail_after(5):
            await engine.started.wait()
        # The client closes this response stream only; the connection stays open.
        conn.reset_stream(1)
        await stream.send_all(conn.data_to_send())
        with trio.fail_after(5):
            await engine.cancelled.wait()
        await _wait_for(lambda: server.listener.in_flight == 0)
        assert server.listener.connections == 1
        # The same connection serves the next call.
        ok = json.dumps(call_body("engine_status", id=2)).encode()
        conn.send_headers(3, _h2_headers(server.port, ok))
        conn.send_data(3, ok, end_stream=True)
        await stream.send_all(conn.data_to_send())
        events: list[h2.events.Event] = []
        with trio.fail_after(5):
            while not any(
                isinstance(e, h2.events.StreamEnded) and e.stream_id == 3 for e in events
            ):
                events += conn.receive_data(await stream.receive_some(65536))
                await stream.send_all(conn.data_to_send())
        await stream.aclose()
    data = b"".join(
        e.data for e in events if isinstance(e, h2.events.DataReceived) and e.stream_id == 3
    )
    assert json.loads(data)["id"] == 2
    assert not any(isinstance(e, h2.events.DataReceived) and e.stream_id == 1 for e in events)


async def test_req_ops_002_shutdown_closes_an_idle_keep_alive_connection_at_once() -> None:
    """While a call in flight keeps the shutdown waiting (up to its grace), a connection with
    nothing running is closed at the start of the shutdown, not at the end of its idle time."""
    engine = SlowEngine("wikipedia", None)
    config = make_config("[service]\nshutdown_ms = 2000\n", idle_timeout_s=60)
    async with serving(config, engine=engine) as server:
        idle = await trio.open_tcp_stream("127.0.0.1", server.port)
        assert (await _answered(idle)).startswith(b"HTTP/1.1 200")
        async with httpx.AsyncClient() as client, trio.open_nursery() as nursery:
            await start_slow_search(nursery, client, server, engine)
            start = trio.current_time()
            server.stop.set()
            assert await closed_by_server(idle, 5) == b""
            assert trio.current_time() - start < 1.0  # the grace is 1.7 s
            assert server.listener.in_flight == 1  # the call still runs
        await idle.aclose()


@pytest.mark.parametrize("sent", [b"", b"P"])
async def test_req_ops_002_shutdown_closes_a_connection_that_sent_no_request_at_once(
    sent: bytes,
) -> None:
    """A connection that has not shown its protocol when the shutdown starts (nothing sent,
    or a byte that could begin either) is closed then, while a call in flight keeps the
    shutdown waiting: not at the end of its idle time, nor when the call ends."""
    engine = SlowEngine("wikipedia", None)
    # The grace (9.7 s) outlasts the call (its deadline, about 3 s): before the call ends,
    # only the shutdown's start can close the silent connection.
    config = make_config("[service]\nshutdown_ms = 10000\n", idle_timeout_s=60)
    async with serving(config, engine=engine) as server:
        silent = await trio.open_tcp_stream("127.0.0.1", server.port)
        await silent.send_all(sent)
        # The listener's once accepted: the kernel holds a connection that has sent nothing
        # for a second first (`DEFER_ACCEPT_S`), and one still there at the shutdown is the
        # kernel's to drop with the listening socket.
        await _wait_for(lambda: server.listener.connections == 1)
        async with httpx.AsyncClient() as client, trio.open_nursery() as nursery:
            await start_slow_search(nursery, client, server, engine)
            server.stop.set()
            assert await closed_by_server(silent, 5) == b""
            assert server.listener.in_flight == 1  # the call still runs
        await silent.aclose()
    assert http_counts() == {}  # closed by the shutdown, not refused as idle


def _h2_bytes(with_request: bool) -> bytes:
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    if with_request:
        conn.send_headers(1, [(":method", "POST"), (":path", "/mcp"), (":scheme", "http"),
                              (":authority", "127.0.0.1")])  # fmt: skip
        conn.send_data(1, b"{}", end_stream=True)
    return conn.data_to_send()


@pytest.mark.parametrize(
    ("sent", "has_request"),
    [
        (b"", False),
        (b"POST /mcp HTTP/1.1\r\nHost: a\r\n", False),
        (_request_bytes(), True),
        (_h2_bytes(with_request=False), False),  # the preface and SETTINGS only
        (_h2_bytes(with_request=True), True),  # and a whole header block
        (_h2_bytes(with_request=True)[:-5], True),  # its DATA frame cut short
        (_h2_bytes(with_request=True)[:-15], False),  # its header block cut short
    ],
)
async def test_req_sec_018_a_connection_whose_request_waits_unread_is_not_one_that_waits(
    sent: bytes, has_request: bool
) -> None:
    """Under a flood a new connection can wait many scheduling rounds before its first read:
    a whole head already in its socket buffer counts as a request, and keeps it from being
    closed to make room (the peek leaves the bytes for the read)."""
    server_side, client_side = socket.socketpair()
    with server_side, client_side:
        client_side.sendall(sent)
        connection = Connection("ipv4", server_side)
        assert (connection.waiting_head() is not None) is has_request
        server_side.setblocking(False)
        assert (server_side.recv(65536) if sent else b"") == sent


# -- memory after a flood ----------------------------------------------------------------------


async def _open_and_close(port: int, count: int) -> None:
    streams = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(count)]
    for stream in streams:
        await stream.send_all(b"POST /mcp HTTP/1.1\r\n")  # a head begun, never ended
    for stream in streams:
        await stream.aclose()


async def test_req_perf_003_memory_is_handed_back_once_a_floods_connections_have_closed() -> None:
    """The allocator's free memory goes back to the system once a flood's connections have
    closed and a quiet second has passed: once, not per connection, not during the flood."""
    trims: list[float] = []
    with capture_logs("debug") as logs:
        async with serving(make_config(), trim=lambda: trims.append(trio.current_time())) as server:
            await _open_and_close(server.port, TRIM_AFTER_CLOSES + 4)
            closed_at = trio.current_time()
            await _wait_for(lambda: server.listener.connections == 0)
            await trio.sleep(TRIM_QUIET_S / 2)
            assert trims == []  # the closes may go on: not yet
            await _wait_for(lambda: len(trims) == 1, timeout_s=3)
            await trio.sleep(TRIM_QUIET_S + 0.2)
    assert len(trims) == 1
    assert trims[0] - closed_at >= TRIM_QUIET_S
    (line,) = logs.named("memory_returned")
    assert line["connections"] == TRIM_AFTER_CLOSES + 4
    assert isinstance(line["released_kib"], int)


async def test_req_perf_003_a_few_closed_connections_cost_no_trim() -> None:
    trims: list[float] = []
    async with serving(make_config(), trim=lambda: trims.append(trio.current_time())) as server:
        await _open_and_close(server.port, TRIM_AFTER_CLOSES - 1)
        await _wait_for(lambda: server.listener.connections == 0)
        await trio.sleep(TRIM_QUIET_S + 0.3)
    assert trims == []


# -- a caller's first connection at the cap ----------------------------------------------------

# How long a caller takes between its connect and its request: a client process writes its
# request right after its connect returns, but on a loaded host it may run a few tens of
# milliseconds later. Well within any reading of "promptly", and longer than the accept loop
# takes to accept a connection waiting in the backlog.
_CONNECT_TO_REQUEST_S = 0.05


async def _first_try(port: int, token: str | None) -> bytes:
    """One caller's first (and only) try: connect, write the whole request a moment later,
    read the answer. Its status line, or b"" when the connection was closed unanswered."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    try:
        await trio.sleep(_CONNECT_TO_REQUEST_S)
        await stream.send_all(_request_bytes(keep_alive=False, token=token))
        return (await closed_by_server(stream, 10)).partition(b"\r\n")[0]
    except trio.BrokenResourceError:
        return b""  # reset: closed before (or while) the request was written
    finally:
        await stream.aclose()


async def test_req_sec_018_a_callers_request_after_its_connect_finds_room_among_young_ones() -> (
    None
):
    """At the cap, with the only slot held by a connection younger than the grace that has
    not sent its whole head: a caller whose request follows its connect by a moment is
    answered on that connection (the connection is the listener's once its first bytes are
    there, and a newcomer with its whole head may close one without a request), not closed
    as a newcomer without its request."""
    config = make_config(max_connections=1, idle_timeout_s=60)
    async with serving(config) as server:
        young = await trio.open_tcp_stream("127.0.0.1", server.port)
        await young.send_all(b"POST /mcp HTTP/1.1\r\n")  # a head begun, then nothing
        await _wait_for(lambda: server.listener.connections == 1)
        assert await _first_try(server.port, None) == b"HTTP/1.1 200 "
        assert await closed_by_server(young, 2) == b""  # it made room
        await young.aclose()
    assert http_counts() == {"connection_evicted": 1}


async def _flood_connection(port: int, kind: str) -> None:
    """One connection of a flood, opened again each time the server closes it: `idle` sends
    nothing, `trickling` a request line and then a header byte every 0.2 s, `slow-body` a
    whole head with the first caller's token and then a body byte every 0.2 s."""
    while True:
        try:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
        except OSError:
            await trio.sleep(0.05)
            continue
        try:
            if kind == "trickling":
                await stream.send_all(b"POST /mcp HTTP/1.1\r\n")
                await _dribble(stream, b"X")
            elif kind == "slow-body":
                head = _slow_head(TOKEN_A, 200)
                await stream.send_all(head + b"{")
                await _dribble(stream, b" ")
            else:
                await closed_by_server(stream, 120)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await stream.aclose()
        await trio.sleep(0.01)  # renewed at once, as a flood is (without spinning the test)


def _slow_head(token: str | None, declared: int) -> bytes:
    headers = modern_headers("tools/call", "engine_status", token)
    lines = [b"POST /mcp HTTP/1.1", b"Host: 127.0.0.1"]
    lines += [f"{k}: {v}".encode() for k, v in headers.items()]
    lines.append(b"Content-Length: %d" % declared)
    return b"\r\n".join(lines) + b"\r\n\r\n"


@pytest.mark.parametrize("kind", ["idle", "trickling", "slow-body"])
async def test_req_sec_018_a_callers_first_connection_is_answered_during_a_flood(
    kind: str,
) -> None:
    """A flood of 40 connections renewed as they close, at a cap of 8, two callers (the
    slow-body flood holds the first caller's token): each of 20 callers of the second token
    in turn, connecting and writing its whole request a moment later, is answered on its
    first connection. Before, a caller was closed unanswered as a newcomer without its
    request (accepted before its head came, every slot younger than the grace) nearly every
    time during the idle and trickling floods and one time in four to twelve during the
    slow-body one."""
    config = make_config(CALLERS, CALLERS_ENV, max_connections=8, idle_timeout_s=60)
    async with serving(config, CALLERS_ENV) as server, trio.open_nursery() as nursery:
        for _ in range(40):
            nursery.start_soon(_flood_connection, server.port, kind)
        await _wait_for(lambda: server.listener.connections >= 4)
        await trio.sleep(1.2)  # past the grace: the flood in place and renewing itself
        answers = [await _first_try(server.port, TOKEN_B) for _ in range(20)]
        nursery.cancel_scope.cancel()
    closed = [i for i, answer in enumerate(answers) if answer != b"HTTP/1.1 200 "]
    assert closed == [], f"callers closed on their first connection: {closed} of 20"


# -- a request already there is not closed for room ---------------------------------------------


def _h2_opening(port: int, with_request: bool) -> h2.connection.H2Connection:
    """An h2c client whose first bytes (`data_to_send`) are the preface and SETTINGS, with
    a whole request (HEADERS and DATA, stream 1) when `with_request`."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    if with_request:
        body = json.dumps(call_body("engine_status")).encode()
        conn.send_headers(1, _h2_headers(port, body))
        conn.send_data(1, body, end_stream=True)
    return conn


async def _h2_status(stream: trio.SocketStream, conn: h2.connection.H2Connection) -> bytes:
    """The status of the answer to stream 1, b"" when the connection closed first."""
    with trio.fail_after(5):
        while True:
            try:
                data = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                return b""
            if not data:
                return b""
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived):
                    return dict(event.headers)[b":status"]
            await stream.send_all(conn.data_to_send())


async def test_req_sec_018_an_http2_caller_with_its_request_finds_room_among_young_ones() -> None:
    """At the cap, the only slot held by a connection younger than the grace that has not
    sent its whole head: an h2c caller whose preface and whole request are in its buffer at
    its accept has its request, as an HTTP/1 caller with its whole head has, and makes
    room; before, it was taken for a newcomer without a request and closed."""
    config = make_config(max_connections=1, idle_timeout_s=60)
    async with serving(config) as server:
        young = await trio.open_tcp_stream("127.0.0.1", server.port)
        await young.send_all(b"POST /mcp HTTP/1.1\r\n")
        await _wait_for(lambda: server.listener.connections == 1)
        caller = await trio.open_tcp_stream("127.0.0.1", server.port)
        await trio.sleep(_CONNECT_TO_REQUEST_S)
        client = _h2_opening(server.port, with_request=True)
        await caller.send_all(client.data_to_send())  # in one write, as h2c clients do
        assert await _h2_status(caller, client) == b"200"
        assert await closed_by_server(young, 2) == b""
        for stream in (young, caller):
            await stream.aclose()
    assert http_counts() == {"connection_evicted": 1}


async def test_req_sec_018_http2_openings_without_a_request_cannot_hold_every_slot() -> None:
    """Connections that send the h2c preface and SETTINGS and then nothing (no stream) are
    protected for the grace, as a request about to start, and no longer: a caller then
    takes the slot of one. Before, they held every slot until LIM-H3 (60 s here)."""
    config = make_config(max_connections=2, idle_timeout_s=60)
    async with serving(config) as server:
        openings = []
        for _ in range(2):
            stream = await trio.open_tcp_stream("127.0.0.1", server.port)
            await stream.send_all(_h2_opening(server.port, with_request=False).data_to_send())
            openings.append(stream)
        await _wait_for(lambda: server.listener.connections == 2)
        await trio.sleep(1.2)  # past the grace
        assert await _one_call(server.port) == b"HTTP/1.1 200 "
        for stream in openings:
            await stream.aclose()
    assert http_counts() == {"connection_evicted": 1}


@pytest.mark.parametrize(
    ("sent", "has_request"),
    [
        (b"", False),
        (b"POST /mcp HTTP/1.1\r\nHost: a\r\n", False),
        (_request_bytes(), True),
    ],
)
async def test_req_sec_018_a_kept_alive_connections_next_request_unread_is_not_one_that_waits(
    sent: bytes, has_request: bool
) -> None:
    """A kept-alive HTTP/1 connection between requests whose next whole head is in its
    socket buffer, not yet read (its task not having run since it came), has a request:
    closing it for room would drop that request unanswered."""
    server_side, client_side = socket.socketpair()
    with server_side, client_side:
        connection = Connection("ipv4", server_side)
        connection.gate = Http1RequestParser(16384)
        # The first request, whole and passed on: the gate waits for the next head.
        assert connection.gate.feed(_request_bytes())
        assert not connection.gate.head_started
        assert not connection.gate.in_body
        client_side.sendall(sent)
        assert (connection.waiting_head() is not None) is has_request
        server_side.setblocking(False)
        assert (server_side.recv(65536) if sent else b"") == sent


# -- an error of one peer's socket -------------------------------------------------------------


async def test_req_sec_018_an_error_of_one_connections_socket_ends_that_connection_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The socket of a connection fails (EBADF, as a descriptor closed under it would; then
    an error gathered by the connection's nurseries): that connection ends, an aggregated
    `connection_failed` line says so, its descriptor is counted free, and the listener
    serves the next connection."""
    from rypsok.mcp.listener.lifecycle import Listener

    served = Listener._serve_stream
    failures = 0

    async def failing_once(self: Listener, stream: Any, connection: Connection) -> None:
        nonlocal failures
        failures += 1
        if failures == 1:
            raise OSError(errno.EBADF, "Bad file descriptor")
        if failures == 2:  # as the nurseries inside a connection gather it
            inner = ExceptionGroup("inner", [OSError(errno.ENOTCONN, "not connected")])
            raise ExceptionGroup("connection", [inner])
        await served(self, stream, connection)

    monkeypatch.setattr(Listener, "_serve_stream", failing_once)
    with capture_logs() as logs:
        async with serving(make_config()) as server:
            assert await _one_call(server.port) == b""
            assert await _one_call(server.port) == b""
            assert await _one_call(server.port) == b"HTTP/1.1 200 "
            await _wait_for(lambda: server.listener.connections == 0)
            assert server.listener.descriptors.open == 0
    failed = logs.named("connection_failed")
    assert [(e["error"], e["family"], e["level"], e["count"]) for e in failed] == [
        ("EBADF", "ipv4", "warn", 1),
        ("ENOTCONN", "ipv4", "warn", 1),
    ]
    assert logs.named("uncaught_exception") == []
