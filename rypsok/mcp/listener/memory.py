"""The memory a flood's connections held, handed back to the system once they have closed.

What the connections held is freed as they close, but glibc keeps it for the next
allocations, so without this the process would stay at its flood size.
"""

from __future__ import annotations

import gc
import os
import time
from typing import TYPE_CHECKING, Final

import trio

from rypsok.core import telemetry

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["TRIM_AFTER_CLOSES", "TRIM_QUIET_S", "MemoryReturn"]

# The heap's free pages go back to the system once this many connections have closed and
# then none for `TRIM_QUIET_S`: one trim when a flood ends, none while it lasts (each costs a
# walk of the heap) nor for the odd connection.
TRIM_AFTER_CLOSES: Final = 16
TRIM_QUIET_S: Final = 1.0


def _resident_kib() -> int:
    """The process's resident memory (Linux), 0 when it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * (os.sysconf("SC_PAGE_SIZE") // 1024)


class MemoryReturn:
    """Counts the connections that close and trims the heap once a flood of them is over."""

    def __init__(self) -> None:
        self._closed = 0  # connections closed since the last trim
        self._closing = trio.Event()  # set when one closes

    def connection_closed(self) -> None:
        self._closed += 1
        self._closing.set()

    async def run(
        self,
        trim: Callable[[], object] | None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Hand the allocator's free memory back once a flood's connections have closed.
        `trim` is `malloc_trim` (None: nothing to do here)."""
        task_status.started()
        if trim is None:
            return
        while True:
            await self._closing.wait()
            # The closes stop first: no trim while a flood goes on (each walks the heap).
            quiet = False
            while not quiet:
                self._closing = trio.Event()
                with trio.move_on_after(TRIM_QUIET_S) as timer:
                    await self._closing.wait()
                quiet = timer.cancelled_caught
            if self._closed < TRIM_AFTER_CLOSES:
                continue
            closed, self._closed = self._closed, 0
            before = _resident_kib()
            began = time.perf_counter()
            # The cycles the connections left (hypercorn's objects refer to one another)
            # wait for a full collection; freed first, their memory is the allocator's
            # to hand back, and the next flood does not add to it.
            gc.collect()
            trim()
            telemetry.debug(
                "memory_returned",
                connections=closed,
                released_kib=before - _resident_kib(),
                ms=round((time.perf_counter() - began) * 1000, 1),
            )
