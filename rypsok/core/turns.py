"""Giving the event loop a turn only when one is needed.

Every Trio primitive is a schedule point: acquiring a free permit, a write the kernel takes
at once and an explicit checkpoint each cost a full round of the loop (an epoll call, the
run queue, the deadlines) even when nothing else is waiting. A web_search made nine such
rounds where it waited for the network once; on a paced host each round finds the caches
cold. These helpers keep the semantics that matter here (a permit held, bytes written
whole, a long computation interruptible) and skip the round when it would do nothing.
"""

from __future__ import annotations

import errno
import os
from typing import Final

import trio

__all__ = ["SLICE_S", "Slices", "send_all_now", "take"]

# How long a stretch of computing runs before it gives the loop a turn: other calls and the
# deadlines' cancellations (LIM-S7) act at most this late. A search's post-processing takes
# well under it, so it normally runs without a round; a pathological one is cut in slices.
SLICE_S: Final = 0.002


async def take(permits: trio.Semaphore | trio.Lock) -> None:
    """Acquire `permits`, without a scheduling round when one is free."""
    try:
        permits.acquire_nowait()
    except trio.WouldBlock:
        await permits.acquire()


async def send_all_now(stream: trio.abc.SendStream, data: bytes) -> None:
    """`stream.send_all(data)`, written straight to the descriptor when the kernel takes
    it at once (a pipe or a plain socket; the usual case for a line or a request).

    What the kernel does not take goes through `send_all`, which waits for room; a failure
    raises what Trio's stream raises (closed, broken). A call already cancelled is still
    cancelled here, before anything is written.
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    if isinstance(stream, trio.lowlevel.FdStream):
        fd = stream.fileno()
    elif isinstance(stream, trio.SocketStream):
        fd = stream.socket.fileno()
    else:
        await stream.send_all(data)
        return
    try:
        sent = os.write(fd, data)
    except BlockingIOError:
        sent = 0  # full: `send_all` waits for room
    except OSError as exc:
        raise _stream_error(exc) from None
    if sent < len(data):
        await stream.send_all(memoryview(data)[sent:])


def _stream_error(exc: OSError) -> trio.BrokenResourceError | trio.ClosedResourceError:
    """The exception Trio's own stream raises for the same failure: a descriptor already
    closed (EBADF, which `os.write` gives for a closed stream's -1) is closed, anything else
    broken."""
    if exc.errno == errno.EBADF:
        return trio.ClosedResourceError("the stream was already closed")
    return trio.BrokenResourceError(f"the stream broke: {type(exc).__name__}")


class Slices:
    """Checkpoints for a long computation that yield only once a slice has run out.

    `await slices.pause()` between steps: a schedule and cancel point when the computation
    has run for `SLICE_S` since it started or last yielded, nothing otherwise.
    """

    __slots__ = ("_until",)

    def __init__(self) -> None:
        self._until = trio.current_time() + SLICE_S

    async def pause(self) -> None:
        if trio.current_time() >= self._until:
            await trio.lowlevel.checkpoint()
            self._until = trio.current_time() + SLICE_S
