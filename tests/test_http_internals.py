"""The internals of hypercorn and h2 the listener leans on, each named and checked.

hypercorn is pinned below 0.19 and h2 below 5 (pyproject.toml); these tests are what an upgrade
of either must pass. Each asserts one thing `rypsok.mcp.listener` uses that neither library
documents as public: a name, a signature, or what the library does with it. A failure here
names the internal that moved; the fix goes to the listener (or the decision to own that part,
decisions/http-listener-on-hypercorn).
"""

from __future__ import annotations

import inspect
import json
import socket
from typing import Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import h2.stream
import hpack
import hyperframe.frame
import trio
from http_helpers import call_body, make_config, modern_headers
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState

from rypsok.mcp.listener.h2_streams import ListenerH2Connection, adopt
from rypsok.mcp.listener.stream import NoIdleTask, hypercorn_config

# -- hypercorn ---------------------------------------------------------------------------------


def test_req_sec_018_hypercorn_tcp_server_takes_what_the_listener_passes() -> None:
    """`TCPServer(app, config, context, state, stream)`, a `run()` coroutine, a `send_lock`
    (the listener writes its own refusals and `100 Continue` under it) and an `idle_task`
    the listener replaces (`NoIdleTask`)."""
    parameters = list(inspect.signature(TCPServer.__init__).parameters)
    assert parameters == ["self", "app", "config", "context", "state", "stream"]
    assert inspect.iscoroutinefunction(TCPServer.run)
    server = TCPServer(
        ASGIWrapper(_app), HypercornConfig(), WorkerContext(None), ConnectionState({}), None
    )  # type: ignore[arg-type]
    assert isinstance(server.send_lock, trio.Lock)
    idle = server.idle_task
    for name, expected in (("restart", ["task_group", "action"]), ("stop", [])):
        method = getattr(idle, name)
        assert inspect.iscoroutinefunction(method)
        assert list(inspect.signature(method).parameters) == expected
        ours = getattr(NoIdleTask(), name)
        assert list(inspect.signature(ours).parameters) == expected


def test_req_sec_018hypercorn_config_has_the_settings_the_listener_sets() -> None:
    """Each attribute `hypercorn_config` writes is one hypercorn reads (a renamed one would
    be set silently on the object and read nowhere)."""
    written = {
        "keep_alive_timeout",
        "h11_max_incomplete_size",
        "h2_max_header_list_size",
        "h2_max_concurrent_streams",
        "include_server_header",
        "include_date_header",
        "accesslog",
        "errorlog",
        "graceful_timeout",
    }
    defaults = HypercornConfig()
    assert {name for name in written if hasattr(defaults, name)} == written
    configured = hypercorn_config(make_config("[service.http]\nmax_streams = 3\n"))
    assert configured.h2_max_concurrent_streams == 3
    assert configured.include_server_header is False


def test_req_ops_002_hypercorn_worker_context_terminated_is_an_event_set_by_await() -> None:
    """The drain sets `WorkerContext(None).terminated` (hypercorn then keeps no connection
    alive); hypercorn's own idle timer waits on it."""
    context = WorkerContext(None)
    assert inspect.iscoroutinefunction(context.terminated.set)
    assert inspect.iscoroutinefunction(context.terminated.wait)

    async def main() -> None:
        await context.terminated.set()
        with trio.fail_after(1):
            await context.terminated.wait()

    trio.run(main)


class _RecordingIdleTask:
    """hypercorn's idle task as the listener's stand-in sees it: the calls it gets."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def restart(self, task_group: Any, action: Any) -> None:
        assert inspect.iscoroutinefunction(action)  # hypercorn's `_idle_timeout`
        self.calls.append("restart")

    async def stop(self) -> None:
        self.calls.append("stop")


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def _request() -> bytes:
    body = json.dumps(call_body("engine_status")).encode()
    lines = [b"POST /mcp HTTP/1.1", b"Host: 127.0.0.1"]
    lines += [f"{k}: {v}".encode() for k, v in modern_headers("tools/call").items()]
    lines.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


async def _run_tcp_server(first: bytes) -> tuple[TCPServer, _RecordingIdleTask, bytes]:
    """A TCPServer over one end of a socket pair (a stream without `do_handshake`: hypercorn's
    cleartext path), given `first`, with a recording idle task."""
    ours, theirs = socket.socketpair()
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
    peer = trio.SocketStream(trio.socket.from_stdlib_socket(theirs))
    server = TCPServer(
        ASGIWrapper(_app), HypercornConfig(), WorkerContext(None), ConnectionState({}), stream
    )  # type: ignore[arg-type]
    idle = _RecordingIdleTask()
    server.idle_task = idle  # type: ignore[assignment]
    received = b""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.run)
        await peer.send_all(first)
        with trio.move_on_after(2):
            while b"ok" not in received and not received.startswith(b"\x00"):
                chunk = await peer.receive_some(65536)
                if not chunk:
                    break
                received += chunk
                if first.startswith(b"PRI"):
                    break
        await trio.sleep(0.2)  # what hypercorn does once the answer is sent
        nursery.cancel_scope.cancel()
    await stream.aclose()
    await peer.aclose()
    return server, idle, received


async def test_req_sec_022_hypercorn_calls_the_idle_task_the_listener_replaces() -> None:
    """hypercorn restarts its idle task when the connection starts and after each answer
    and stops it while a request runs: the calls `NoIdleTask` takes and ignores (the
    listener's watchdog keeps LIM-H3 instead). A hypercorn that kept its timer elsewhere
    would close connections behind the watchdog's back."""
    _, idle, received = await _run_tcp_server(_request())
    assert received.startswith(b"HTTP/1.1 200")
    assert idle.calls[:3] == ["restart", "stop", "restart"]


async def test_req_sec_022_hypercorn_keeps_the_h2_connection_where_the_listener_finds_it() -> None:
    """After the HTTP/2 preface alone, hypercorn's protocol wrapper holds an H2Protocol whose
    `connection` is h2's `H2Connection` (`server.protocol.protocol.connection`): the object
    whose class the listener changes before the first frame (`_Replay._h2`)."""
    server, _, _ = await _run_tcp_server(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    connection = server.protocol.protocol.connection  # type: ignore[union-attr]
    assert type(connection) is h2.connection.H2Connection


# -- h2: one stream refused alone ---------------------------------------------------------------


def test_req_sec_022_h2_dispatches_headers_through_a_bound_receive_headers_frame() -> None:
    """`_receive_headers_frame(frame)` returning `(frames, events)`, reached through
    `_frame_dispatch_table` (bound when the connection was made), `_closed_streams`,
    `highest_inbound_stream_id` and `decoder.decode(data, raw=True)`: what
    `ListenerH2Connection` overrides, rebinds, records and calls; `_data_to_send` (the frames
    queued, a bytearray), `streams` and each stream's `state_machine.state`, which it reads
    to hold the GOAWAY until every answer's end is queued."""
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    method = connection._frame_dispatch_table[hyperframe.frame.HeadersFrame]
    assert method == connection._receive_headers_frame
    assert list(inspect.signature(method).parameters) == ["frame"]
    assert isinstance(connection._closed_streams, dict)
    assert connection.highest_inbound_stream_id == 0
    assert h2.stream.StreamClosedBy.SEND_RST_STREAM in h2.stream.StreamClosedBy
    assert "raw" in inspect.signature(connection.decoder.decode).parameters
    assert issubclass(hpack.HPACKError, Exception)
    assert h2.errors.ErrorCodes.REFUSED_STREAM == 0x7
    assert isinstance(connection._data_to_send, bytearray)
    assert isinstance(connection.streams, dict)
    assert {"OPEN", "HALF_CLOSED_REMOTE"} <= set(h2.stream.StreamState.__members__)


def _pair(max_streams: int) -> tuple[h2.connection.H2Connection, h2.connection.H2Connection]:
    """A client and a server connection past their SETTINGS exchange, the server's
    SETTINGS_MAX_CONCURRENT_STREAMS at `max_streams` and acknowledged."""
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    server.local_settings = h2.settings.Settings(
        client=False, initial_values={h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: max_streams}
    )
    client.initiate_connection()
    server.initiate_connection()
    for _ in range(3):
        server.receive_data(client.data_to_send())
        client.receive_data(server.data_to_send())
    return client, server


def _ignore_the_bound(client: h2.connection.H2Connection) -> None:
    """A client that opens streams past the server's SETTINGS_MAX_CONCURRENT_STREAMS."""
    client.remote_settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = 100
    client.remote_settings.acknowledge()


def _open(client: h2.connection.H2Connection, stream_id: int) -> bytes:
    client.send_headers(
        stream_id,
        [(":method", "POST"), (":path", "/mcp"), (":scheme", "http"), (":authority", "a")],
        end_stream=True,  # no body: the stream is the server's to end
    )
    return bytes(client.data_to_send())


def test_req_sec_022_h2_ends_the_connection_for_a_stream_beyond_the_bound() -> None:
    """What the listener corrects: h2 itself answers a stream beyond
    SETTINGS_MAX_CONCURRENT_STREAMS with `TooManyStreamsError` out of the headers frame's
    handler, which ends the whole connection."""
    client, server = _pair(1)
    server.receive_data(_open(client, 1))
    _ignore_the_bound(client)
    try:
        server.receive_data(_open(client, 3))
    except h2.exceptions.TooManyStreamsError:
        pass
    else:
        raise AssertionError("h2 no longer raises TooManyStreamsError: re-read the listener")


def test_req_sec_022_h2_refuses_a_stream_beyond_the_bound_alone_once_changed() -> None:
    """The same connection after `adopt`: stream 3 is reset REFUSED_STREAM,
    stream 1 goes on, a DATA frame of the refused stream is answered STREAM_CLOSED, and the
    HPACK state still follows (a later stream's headers decode)."""
    client, server = _pair(1)
    adopt(server, lambda: False)
    _ignore_the_bound(client)
    events = server.receive_data(_open(client, 1))
    assert [type(e) for e in events] == [h2.events.RequestReceived, h2.events.StreamEnded]
    events = server.receive_data(_open(client, 3))
    assert events == []
    resets = [e for e in client.receive_data(server.data_to_send()) if e.stream_id == 3]
    assert [(type(e), e.error_code) for e in resets] == [
        (h2.events.StreamReset, h2.errors.ErrorCodes.REFUSED_STREAM)
    ]
    late = hyperframe.frame.DataFrame(3)
    late.data = b"x"
    server.receive_data(late.serialize())
    answer = client.receive_data(server.data_to_send())
    assert all(not isinstance(e, h2.events.ConnectionTerminated) for e in answer)
    server.send_headers(1, [(":status", "200")], end_stream=True)
    ended = client.receive_data(server.data_to_send())
    assert any(isinstance(e, h2.events.StreamEnded) and e.stream_id == 1 for e in ended)
    events = server.receive_data(_open(client, 5))
    assert [(type(e), e.stream_id) for e in events][:1] == [(h2.events.RequestReceived, 5)]


def _stopping_pair() -> tuple[h2.connection.H2Connection, ListenerH2Connection, list[bool]]:
    client, server = _pair(16)
    stopping = [False]
    adopt(server, lambda: stopping[0])
    assert isinstance(server, ListenerH2Connection)
    return client, server, stopping


def test_req_ops_002_h2_after_the_stop_a_new_stream_is_refused_and_the_open_one_goes_on() -> None:
    client, server, stopping = _stopping_pair()
    events = server.receive_data(_open(client, 1))
    assert [type(e) for e in events] == [h2.events.RequestReceived, h2.events.StreamEnded]
    stopping[0] = True
    assert server.receive_data(_open(client, 3)) == []  # never handed on
    resets = [e for e in client.receive_data(server.data_to_send()) if e.stream_id == 3]
    assert [(type(e), e.error_code) for e in resets] == [
        (h2.events.StreamReset, h2.errors.ErrorCodes.REFUSED_STREAM)
    ]
    server.send_headers(1, [(":status", "200")], end_stream=True)
    ended = client.receive_data(server.data_to_send())
    assert [(type(e), e.stream_id) for e in ended][-1:] == [(h2.events.StreamEnded, 1)]


def test_req_ops_002_h2_a_graceful_goaway_waits_for_the_last_answers_end() -> None:
    """hypercorn closes a stopped connection (`close_connection`) once its last stream is
    closed on its side, possibly before that stream's END_STREAM is queued: the GOAWAY waits
    for it and follows it in the same chunk, its last stream id the last stream handed on
    (stream 3, refused, is not)."""
    client, server, stopping = _stopping_pair()
    server.receive_data(_open(client, 1))
    server.send_headers(1, [(":status", "200")])
    server.send_data(1, b"answer")
    stopping[0] = True
    server.receive_data(_open(client, 3))
    server.close_connection()
    assert not server.settled
    first = server.data_to_send()
    events = client.receive_data(first)
    assert not any(isinstance(e, h2.events.ConnectionTerminated) for e in events)
    server.sent(first)
    server.end_stream(1)  # h2 refuses this once a GOAWAY is out
    last = server.data_to_send()
    events = client.receive_data(last)
    kinds = [type(e) for e in events]
    assert kinds == [h2.events.DataReceived, h2.events.StreamEnded, h2.events.ConnectionTerminated]
    goaway = events[-1]
    assert isinstance(goaway, h2.events.ConnectionTerminated)
    assert (goaway.error_code, goaway.last_stream_id) == (0, 1)
    assert not server.settled  # taken, not yet written
    server.sent(last)
    assert server.settled


def test_req_ops_002_h2_a_goaway_with_no_answer_open_or_for_an_error_goes_at_once() -> None:
    client, server, _ = _stopping_pair()
    assert server.settled
    server.close_connection()
    events = client.receive_data(server.data_to_send())
    assert [type(e) for e in events] == [h2.events.ConnectionTerminated]
    client, server, _ = _stopping_pair()
    server.receive_data(_open(client, 1))
    server.close_connection(h2.errors.ErrorCodes.PROTOCOL_ERROR)  # an error is never held
    events = client.receive_data(server.data_to_send())
    assert [(type(e), e.error_code) for e in events] == [
        (h2.events.ConnectionTerminated, h2.errors.ErrorCodes.PROTOCOL_ERROR)
    ]
