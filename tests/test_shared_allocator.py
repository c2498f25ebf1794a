"""REQ-PERF-003: glibc's allocator calls that keep a parse's freed memory from staying with
the process: `malloc_trim` after a large page's parse, and a fixed mmap
threshold so that a page's large texts are handed back when freed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rypsok.shared.allocator import malloc_trim, map_large_allocations

ROOT = Path(__file__).resolve().parent.parent
ON_GLIBC = sys.platform == "linux" and bool(os.confstr("CS_GNU_LIBC_VERSION"))

# In a fresh process (the threshold is the process's): a 16 MiB block freed raises glibc's
# own threshold to 16 MiB, so ten 4 MiB blocks then come from the heap and, freed below a
# live block, stay resident; with the threshold fixed each is mapped on its own and handed back.
_PROBE = """
import sys
from rypsok.shared.allocator import map_large_allocations

def resident():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096

if sys.argv[1] == "fixed":
    assert map_large_allocations(1024 * 1024)
big = b"x" * (16 << 20)
del big
before = resident()
blocks = [bytes([index]) * (4 << 20) for index in range(10)]
after = bytes([1]) * (512 << 10)  # above them: the heap's top cannot take them back
del blocks
print((resident() - before) >> 20)
"""


def _kept_mib(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return int(done.stdout)


@pytest.mark.skipif(not ON_GLIBC, reason="glibc's mallopt")
def test_req_perf_003_large_blocks_freed_go_back_with_the_threshold_fixed() -> None:
    assert _kept_mib("default") >= 36  # the default keeps them: what the call is for
    assert _kept_mib("fixed") <= 4


def test_req_perf_003_malloc_trim_is_glibcs_on_linux_and_absent_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trim = malloc_trim()
    if ON_GLIBC:
        assert trim is not None
        assert trim() in (0, 1)  # 1: memory was released, 0: there was none to release
    monkeypatch.setattr(os, "confstr", lambda name: None)  # musl has no glibc version
    assert malloc_trim() is None
    assert map_large_allocations(1024 * 1024) is False
    monkeypatch.setattr(sys, "platform", "darwin")
    assert malloc_trim() is None
    assert map_large_allocations(1024 * 1024) is False
