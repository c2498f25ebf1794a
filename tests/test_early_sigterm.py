"""SIGTERM while the command line is still starting (REQ-OPS-002).

The signal is sent by the child to itself right after the entry point installed its early
handler and before the core is imported: the window a real host hits when it stops rypsok
during its first few hundred milliseconds.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The real entry point runs; its first `_early.install()` is wrapped so that the signal
# arrives right after it, and the child fails (exit 3) if the command line was already
# imported by then: the handler must come before the heavy imports.
_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from rypsok import _early, _entry
    real_install = _early.install
    calls = []
    def install():
        real_install()
        if not calls:
            if "rypsok.cli" in sys.modules:
                os._exit(3)
            os.kill(os.getpid(), signal.SIGTERM)
        calls.append(1)
    _early.install = install
    sys.argv = ["rypsok", *sys.argv[1:]]
    raise SystemExit(_entry.main())
    """
)


def _start(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,  # left open: only the signal can end the process
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_req_ops_002_sigterm_before_the_transport_listens_is_a_graceful_stop(
    tmp_path: Path,
) -> None:
    config = tmp_path / "rypsok.toml"
    config.write_text(
        "config_version = 1\n[service]\nshutdown_ms = 500\n"
        '[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general"]\n',
        encoding="utf-8",
    )
    started = time.monotonic()
    child = _start("serve", "--config", str(config))
    try:
        # wait(), not communicate(): closing stdin would be end of input, another way out.
        child.wait(timeout=10)
    finally:
        child.kill()
    assert child.stdout is not None
    assert child.stderr is not None
    out, err = child.stdout.read(), child.stderr.read()
    if child.stdin is not None:
        child.stdin.close()
    child.stdout.close()
    child.stderr.close()
    assert child.returncode == 0, err.decode("utf-8", "replace")[-400:]
    assert out == b""  # nothing but protocol messages, and there were none
    assert time.monotonic() - started < 5


def test_req_ops_002_check_keeps_the_default_meaning_of_sigterm() -> None:
    child = _start("check")
    try:
        child.communicate(timeout=10)
    finally:
        child.kill()
    assert child.returncode == -15  # killed by the signal, as any command would be
