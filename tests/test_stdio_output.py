"""The stdio transport's output under a slow host: whole lines, one shutdown budget, and no
answer for a cancelled call even when the answer was ready (REQ-MCP-002, REQ-MCP-007,
REQ-OPS-002).

Standard output is a real socket pair with small buffers, so a large answer blocks the
writer until the test reads: the situation of a host that reads its pipe slowly.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import trio
import trio.testing
from search_fakes import capture_logs
from test_stdio_inprocess import FakeService, config, search

from rypsok.mcp.stdio import serve_stdio


def _slow_stdout() -> tuple[trio.SocketStream, trio.SocketStream]:
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return (
        trio.SocketStream(trio.socket.from_stdlib_socket(a)),
        trio.SocketStream(trio.socket.from_stdlib_socket(b)),
    )


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


async def _drain(stream: trio.SocketStream, seconds: float) -> bytes:
    data = b""
    with trio.move_on_after(seconds):
        while True:
            chunk = await stream.receive_some(1 << 20)
            if not chunk:
                break
            data += chunk
    return data


async def test_req_mcp_002_a_host_that_reads_late_still_gets_whole_lines() -> None:
    out_send, out_recv = _slow_stdout()
    in_send, in_recv = trio.testing.memory_stream_one_way_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: serve_stdio(
                FakeService(), config(shutdown_ms=500), stdin=in_recv, stdout=out_send
            )
        )
        await in_send.send_all(_line(search(1, "x" * 1_000_000)))
        await trio.sleep(0.7)  # longer than shutdown_ms: a write must not give up meanwhile
        await in_send.send_all(_line(search(2, "small")))
        data = await _drain(out_recv, 1.0)
        await in_send.aclose()
        nursery.cancel_scope.cancel()
    await out_send.aclose()
    await out_recv.aclose()
    lines = data.split(b"\n")[:-1]
    answers = [json.loads(line) for line in lines]  # every line is one whole JSON message
    assert sorted(a["id"] for a in answers) == [1, 2]


async def test_req_mcp_007_a_call_cancelled_while_its_answer_waits_is_not_answered() -> None:
    out_send, out_recv = _slow_stdout()
    in_send, in_recv = trio.testing.memory_stream_one_way_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: serve_stdio(
                FakeService(), config(shutdown_ms=3000), stdin=in_recv, stdout=out_send
            )
        )
        # A large answer blocks the writer: call 2's answer is ready and waits behind it.
        await in_send.send_all(_line(search(1, "x" * 500_000)))
        await trio.sleep(0.2)
        await in_send.send_all(_line(search(2, "sleep 0.05")))
        await trio.sleep(0.3)
        await in_send.send_all(
            _line(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": 2},
                }
            )
        )
        await trio.sleep(0.1)
        data = await _drain(out_recv, 1.0)
        await in_send.aclose()
        nursery.cancel_scope.cancel()
    await out_send.aclose()
    await out_recv.aclose()
    assert [json.loads(line)["id"] for line in data.split(b"\n")[:-1]] == [1]


async def test_req_ops_002_a_host_that_stops_reading_cannot_stretch_the_shutdown() -> None:
    out_send, out_recv = _slow_stdout()
    in_send, in_recv = trio.testing.memory_stream_one_way_pair()
    shutdown_s = 1.0
    done = trio.Event()

    async def serve() -> None:
        await serve_stdio(FakeService(), config(shutdown_ms=1000), stdin=in_recv, stdout=out_send)
        done.set()

    with capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            # Several large answers, none read: each write blocks on the full pipe.
            for request_id in range(1, 4):
                await in_send.send_all(_line(search(request_id, "x" * 300_000)))
            await trio.sleep(0.1)
            stopped = trio.current_time()
            await in_send.aclose()  # end of input: the shutdown budget starts
            with trio.move_on_after(3 * shutdown_s):
                await done.wait()
            elapsed = trio.current_time() - stopped
            nursery.cancel_scope.cancel()
    await out_send.aclose()
    await out_recv.aclose()
    assert done.is_set()
    assert elapsed <= shutdown_s
    # One write was cut, the two queued behind it ended with it: one warning, not three.
    assert len(logs.named("stdio_output_stalled")) == 1
