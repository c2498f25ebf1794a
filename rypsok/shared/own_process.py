"""Whether this interpreter is rypsok's own (the `rypsok` console script's), and the
process-wide tuning that serving applies there and nowhere else.

A program that imports rypsok (an embedding host, a test runner) keeps its interpreter as it
set it: the GIL's switch interval, the allocator's thresholds and its collector are its own.
The console script marks the process as rypsok's before it runs the command line, and only
then does `serve` change them. The flag lives here, below the console script, the command
line and both transports, so that none of them imports the console script's module.
"""

from __future__ import annotations

import sys
from typing import Final

__all__ = ["MAP_FROM_BYTES", "SWITCH_INTERVAL_S", "claim", "is_own", "tune_for_serving"]

# The event loop takes the GIL back after every system call; while parse threads hold it,
# that waits up to the switch interval (5 ms by default) each time, and 80 fetch calls ending
# together then answered up to 2 s past LIM-F5. A finer interval makes the loop's turns
# prompt; the threads lose little by it.
SWITCH_INTERVAL_S: Final = 0.0005
# glibc's mmap threshold, fixed (REQ-PERF-003): a page's texts (megabytes each) are mapped on
# their own and handed back when freed, not left in a parse thread's arena for the next parse
# elsewhere (the costliest text pages' peak under 80 calls: 247 MiB instead of 341 MiB).
MAP_FROM_BYTES: Final = 1024 * 1024

_own = False


def claim() -> None:
    """Mark this interpreter as rypsok's own: the console script calls it first."""
    global _own
    _own = True


def is_own() -> bool:
    """Whether the console script runs this interpreter (never in a program importing rypsok)."""
    return _own


def tune_for_serving() -> bool:
    """In rypsok's own process, set the GIL's switch interval and glibc's mmap threshold for
    serving; True when it did, False (nothing changed) in any other program."""
    if not _own:
        return False
    # Imported here: ctypes is for serving only, not for `check` or `--version`.
    from rypsok.shared.allocator import map_large_allocations

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    map_large_allocations(MAP_FROM_BYTES)
    return True
