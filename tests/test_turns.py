"""REQ-PERF-004 (overhead): a call gives the event loop a turn only when one is needed.

`rypsok.core.turns` replaces the scheduling rounds Trio's primitives make even when nothing
waits (a free permit, a write the kernel takes at once, a checkpoint in a short computation).
Each helper is tested for both halves: no round in the fast case, and the primitive's own
behaviour (waiting, Trio's exceptions, cancellation) in every other case.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

from rypsok.core import turns

if TYPE_CHECKING:
    from collections.abc import Iterator


async def test_req_perf_004_a_free_permit_is_taken_without_a_scheduling_round() -> None:
    for permits in (trio.Semaphore(1), trio.Lock()):
        with _no_round():
            await turns.take(permits)
        permits.release()


async def test_req_perf_004_a_taken_permit_is_waited_for_until_released() -> None:
    permits = trio.Semaphore(1)
    await turns.take(permits)
    got = trio.Event()

    async def second() -> None:
        await turns.take(permits)
        got.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(second)
        await trio.testing.wait_all_tasks_blocked()
        assert not got.is_set()  # waiting, not failing
        permits.release()
        await got.wait()
    assert permits.value == 0


async def test_req_perf_004_a_cancelled_wait_for_a_permit_takes_nothing() -> None:
    permits = trio.Semaphore(1)
    await turns.take(permits)
    with trio.move_on_after(0.01) as scope:
        await turns.take(permits)
    assert scope.cancelled_caught
    permits.release()
    assert permits.value == 1


class _Rounds(trio.abc.Instrument):
    """Counts the times the current task is resumed: none means no scheduling round.

    (Trio's `assert_no_checkpoints` also counts a cancel point that does not yield, which
    these helpers keep on purpose.)
    """

    def __init__(self) -> None:
        self._task = trio.lowlevel.current_task()
        self.rounds = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self._task:
            self.rounds += 1


@contextlib.contextmanager
def _no_round() -> Iterator[None]:
    rounds = _Rounds()
    trio.lowlevel.add_instrument(rounds)
    try:
        yield
    finally:
        trio.lowlevel.remove_instrument(rounds)
    assert rounds.rounds == 0, "the task gave the loop a turn"


def _socket_streams() -> tuple[trio.SocketStream, trio.SocketStream]:
    left, right = trio.socket.socketpair()
    return trio.SocketStream(left), trio.SocketStream(right)


def _pipe_streams() -> tuple[trio.lowlevel.FdStream, trio.lowlevel.FdStream]:
    read_fd, write_fd = os.pipe()
    return trio.lowlevel.FdStream(read_fd), trio.lowlevel.FdStream(write_fd)


def _pair(kind: str) -> tuple[trio.abc.SendStream, trio.abc.ReceiveStream]:
    """A writer and its reader over a socket pair or a pipe."""
    if kind == "socket":
        return _socket_streams()
    reader, writer = _pipe_streams()
    return writer, reader


async def _read_exactly(stream: trio.abc.ReceiveStream, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = await stream.receive_some(size - len(data))
        assert chunk
        data += chunk
    return data


@pytest.mark.parametrize("kind", ["socket", "pipe"])
async def test_req_perf_004_a_line_the_kernel_takes_is_written_without_a_round(
    kind: str,
) -> None:
    writer, reader = _pair(kind)
    line = b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    with _no_round():
        await turns.send_all_now(writer, line)
    assert await _read_exactly(reader, len(line)) == line
    await writer.aclose()
    await reader.aclose()


@pytest.mark.parametrize("kind", ["socket", "pipe"])
async def test_req_perf_004_what_the_kernel_does_not_take_at_once_is_still_written_whole(
    kind: str,
) -> None:
    # Far more than a pipe's or a socket pair's buffer: the first write is partial, the
    # rest waits for room while the other end reads.
    writer, reader = _pair(kind)
    payload = bytes(range(256)) * 16384  # 4 MiB, every byte value
    received: list[bytes] = []

    async def drain() -> None:
        received.append(await _read_exactly(reader, len(payload)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        await turns.send_all_now(writer, payload)
    assert received == [payload]
    await writer.aclose()
    await reader.aclose()


def _fill(stream: trio.abc.SendStream) -> int:
    """Write to `stream`'s descriptor until the kernel takes nothing more; bytes written."""
    if isinstance(stream, trio.lowlevel.FdStream):
        fd = stream.fileno()
    else:
        assert isinstance(stream, trio.SocketStream)
        fd = stream.socket.fileno()
    written = 0
    while True:
        try:
            written += os.write(fd, b"\0" * 65536)
        except BlockingIOError:
            return written


@pytest.mark.parametrize("kind", ["socket", "pipe"])
async def test_req_perf_004_a_write_to_a_full_stream_waits_for_room_and_writes_whole(
    kind: str,
) -> None:
    # The kernel takes nothing at first: every byte goes through the stream's own wait.
    writer, reader = _pair(kind)
    filled = _fill(writer)
    payload = bytes(range(256)) * 64
    received: list[bytes] = []

    async def drain() -> None:
        received.append(await _read_exactly(reader, filled + len(payload)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        await turns.send_all_now(writer, payload)
    assert received[0][filled:] == payload
    assert received[0][:filled] == b"\0" * filled
    await writer.aclose()
    await reader.aclose()


@pytest.mark.parametrize("kind", ["socket", "pipe"])
@pytest.mark.parametrize(
    ("closed", "error"),
    [("writer", trio.ClosedResourceError), ("reader", trio.BrokenResourceError)],
)
async def test_req_perf_004_a_closed_stream_or_a_gone_peer_raises_trios_own_error(
    kind: str, closed: str, error: type[Exception]
) -> None:
    writer, reader = _pair(kind)
    first, second = (writer, reader) if closed == "writer" else (reader, writer)
    await first.aclose()
    with pytest.raises(error):
        await turns.send_all_now(writer, b"x\n")
    await second.aclose()


async def test_req_perf_004_a_cancelled_call_writes_nothing() -> None:
    writer, reader = _socket_streams()
    with trio.CancelScope() as scope:
        scope.cancel()
        await turns.send_all_now(writer, b"never\n")
    assert scope.cancelled_caught
    await writer.aclose()
    assert await reader.receive_some(100) == b""  # the end of the stream, nothing before it
    await reader.aclose()


async def test_req_perf_004_another_stream_is_written_by_its_own_send_all() -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    await turns.send_all_now(send, b"line\n")
    assert await receive.receive_some(100) == b"line\n"


async def _tcp_streams() -> tuple[trio.SocketStream, trio.SocketStream]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    client = await trio.open_tcp_stream("127.0.0.1", port)
    server = await listeners[0].accept()
    await listeners[0].aclose()
    assert isinstance(server, trio.SocketStream)
    return client, server


async def test_req_perf_004_a_reset_connection_raises_trios_broken_error() -> None:
    # An abortive close (linger 0) sends a reset, which the next write reports.
    client, server = await _tcp_streams()
    server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    await server.aclose()
    await trio.testing.wait_all_tasks_blocked()
    with pytest.raises(trio.BrokenResourceError):
        await turns.send_all_now(client, b"x" * 10)
    await client.aclose()


async def test_lim_s7_a_short_computation_makes_no_round(
    mock_clock: trio.testing.MockClock,
) -> None:
    slices = turns.Slices()
    mock_clock.jump(turns.SLICE_S * 0.999)
    with _no_round():
        await slices.pause()


async def test_lim_s7_a_computation_past_its_slice_yields_and_starts_a_new_one(
    mock_clock: trio.testing.MockClock,
) -> None:
    slices = turns.Slices()
    mock_clock.jump(turns.SLICE_S)  # exactly the slice: its end is the moment to yield
    with trio.testing.assert_checkpoints():
        await slices.pause()
    mock_clock.jump(turns.SLICE_S * 0.999)
    with _no_round():
        await slices.pause()  # a fresh slice began at the last round


async def test_lim_s7_a_deadline_passed_during_a_computation_cancels_it_at_its_next_pause(
    mock_clock: trio.testing.MockClock,
) -> None:
    steps = 0
    with trio.move_on_after(1.0) as scope:
        slices = turns.Slices()
        while True:
            mock_clock.jump(0.3)  # one step of a slow computation
            steps += 1
            await slices.pause()
    assert scope.cancelled_caught
    assert steps == 4  # cancelled at the first pause after 1.0 s (1.2 s), not later
