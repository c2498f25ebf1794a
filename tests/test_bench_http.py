"""tools/bench-http itself: what it says when it cannot measure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_req_perf_004_bench_http_without_wrk_says_how_to_install_it(tmp_path: Path) -> None:
    """Without wrk the throughput cannot be measured: the tool stops before starting any
    server, with exit status 1 and the command that installs wrk."""
    env = {**os.environ, "PATH": str(tmp_path)}  # an empty directory: no wrk on it
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_http", "--duration", "1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert "wrk is not on PATH" in done.stderr
    assert "apt-get install -y wrk" in done.stderr
    assert done.stdout == ""
