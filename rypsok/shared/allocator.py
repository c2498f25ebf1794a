"""glibc's malloc, where rypsok runs on it: the calls that hand freed memory back to the
system and that keep large blocks out of the arenas (REQ-PERF-003).

glibc gives each thread that allocates while another holds the main arena an arena of its
own (up to eight per core), and memory freed in an arena stays there for that arena's next
allocations: a parse in a worker thread leaves its freed tree and strings in its thread's
arena, out of reach of the next parse in another thread. Elsewhere (musl, other systems)
neither call exists and both loaders answer None.
"""

from __future__ import annotations

import ctypes
import os
import sys
from functools import partial
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["malloc_trim", "map_large_allocations"]

# <malloc.h>: mallopt's parameter for the size from which a block is mapped on its own.
_M_MMAP_THRESHOLD: Final = -3


def _glibc() -> ctypes.CDLL | None:
    if sys.platform != "linux":
        return None
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
        return ctypes.CDLL("libc.so.6")
    except (AttributeError, OSError, ValueError):
        return None


def malloc_trim() -> Callable[[], object] | None:
    """glibc's `malloc_trim(0)`: the free pages of every malloc arena handed back to the
    system, which glibc otherwise keeps for later allocations. None elsewhere (musl, other
    systems): their allocators have no such call."""
    libc = _glibc()
    if libc is None:
        return None
    try:
        trim = libc.malloc_trim
    except AttributeError:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return partial(trim, 0)


def map_large_allocations(threshold: int) -> bool:
    """Every allocation of at least `threshold` bytes mapped on its own from now on, and
    unmapped when freed (glibc's `mallopt(M_MMAP_THRESHOLD, threshold)`); True when glibc
    took it, False elsewhere. Without it glibc raises its threshold to the largest block
    freed so far (up to 32 MiB), and a page's text, decoded or written, is then carved from
    an arena and stays there once freed."""
    libc = _glibc()
    if libc is None:
        return False
    try:
        mallopt = libc.mallopt
    except AttributeError:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))
