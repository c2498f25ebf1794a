"""HTTP/2 (h2c) at the shutdown, over real loopback: the streams in flight when it starts are
answered whole; a stream opened after it is refused alone (RFC 9113 §8.7 REFUSED_STREAM, or a
GOAWAY whose last stream id leaves it out, §6.8), never by ending the connection under the
streams in flight."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import trio
from http_helpers import SlowEngine, call_body, make_config, modern_headers, serving

if TYPE_CHECKING:
    from collections.abc import Callable


async def _wait_for(condition: Callable[[], bool]) -> None:
    with trio.fail_after(5):
        while not condition():  # noqa: ASYNC110 # a state of the listener, no event to wait on
            await trio.sleep(0.01)


def _search_headers(port: int, body: bytes) -> list[tuple[str, str]]:
    headers = [
        (":method", "POST"),
        (":path", "/mcp"),
        (":scheme", "http"),
        (":authority", f"127.0.0.1:{port}"),
        ("content-length", str(len(body))),
    ]
    return headers + [(k.lower(), v) for k, v in modern_headers("tools/call", "web_search").items()]


def _probe_headers(port: int) -> list[tuple[str, str]]:
    return [
        (":method", "GET"),
        (":path", "/readyz"),
        (":scheme", "http"),
        (":authority", f"127.0.0.1:{port}"),
    ]


async def _until_closed(
    stream: trio.SocketStream, conn: h2.connection.H2Connection, timeout_s: float
) -> list[Any]:
    """Every event of the connection until the server closes it."""
    events: list[Any] = []
    with trio.fail_after(timeout_s):
        while True:
            try:
                data = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                break
            if not data:
                break
            events += conn.receive_data(data)
            await stream.send_all(conn.data_to_send())
    return events


async def test_req_ops_002_over_h2_a_stream_after_the_stop_is_refused_and_the_call_answered() -> (
    None
):
    """A web_search in flight on stream 1 when the stop comes, then a /readyz probe on stream
    3 of the same connection: stream 3 is reset REFUSED_STREAM (not processed, may be
    retried elsewhere), stream 1 gets its whole answer and its END_STREAM, and only then the
    GOAWAY, whose last stream id is 1."""
    engine = SlowEngine("wikipedia", 1.5)
    config = make_config("[service]\nshutdown_ms = 8000\n")
    async with serving(config, engine=engine) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        body = json.dumps(call_body("web_search", {"query": "rust"})).encode()
        conn.send_headers(1, _search_headers(server.port, body))
        conn.send_data(1, body, end_stream=True)
        await stream.send_all(conn.data_to_send())
        with trio.fail_after(5):
            await engine.started.wait()
        server.stop.set()
        await _wait_for(lambda: server.listener.stopping)
        conn.send_headers(3, _probe_headers(server.port), end_stream=True)
        await stream.send_all(conn.data_to_send())
        events = await _until_closed(stream, conn, 10)
        await stream.aclose()
    kinds = [(type(e).__name__, getattr(e, "stream_id", None)) for e in events]
    (answer,) = [e for e in events if isinstance(e, h2.events.ResponseReceived)]
    assert (answer.stream_id, dict(answer.headers)[b":status"]) == (1, b"200")
    data = b"".join(
        e.data for e in events if isinstance(e, h2.events.DataReceived) and e.stream_id == 1
    )
    assert json.loads(data)["id"] == 1  # the whole answer
    assert ("StreamEnded", 1) in kinds, kinds
    (goaway,) = [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]
    assert kinds.index(("StreamEnded", 1)) < kinds.index(("ConnectionTerminated", None))
    assert (goaway.error_code, goaway.last_stream_id) == (h2.errors.ErrorCodes.NO_ERROR, 1)
    resets = [e for e in events if isinstance(e, h2.events.StreamReset)]
    assert [(e.stream_id, e.error_code) for e in resets] == [
        (3, h2.errors.ErrorCodes.REFUSED_STREAM)
    ]
