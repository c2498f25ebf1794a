"""REQ-ARCH-007: a program that embeds rypsok keeps its interpreter as it set it; only the
`rypsok` console script's own process is tuned for serving (the GIL's switch interval, glibc's
mmap threshold), by `serve` (rypsok.shared.own_process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from functools import partial
from typing import TYPE_CHECKING

import pytest
from search_fakes import FakeEngine, engine_config, make_config, results

from rypsok import Rypsok, SearchRequest
from rypsok.mcp.process import serving
from rypsok.shared import allocator, own_process

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

_NOT_PASSED = ("RYPSOK_CONFIG", "SSL_CERT_FILE", "SSL_CERT_DIR")
# Neither Python's default (5 ms) nor rypsok's (0.5 ms): a host's own choice.
_HOSTS_INTERVAL_S = 0.003


@pytest.fixture
def hosts_interval() -> Iterator[float]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(_HOSTS_INTERVAL_S)
    try:
        yield sys.getswitchinterval()
    finally:
        sys.setswitchinterval(before)


@pytest.fixture
def allocator_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every time rypsok reaches for glibc (mallopt or malloc_trim), without calling it."""
    calls: list[str] = []

    def spy() -> None:
        calls.append("glibc")

    monkeypatch.setattr(allocator, "_glibc", spy)
    return calls


async def test_req_arch_007_an_embedding_host_keeps_its_switch_interval_and_allocator(
    hosts_interval: float, allocator_calls: list[str]
) -> None:
    config = make_config(engine_config("alpha"))
    async with Rypsok(config, engines=[FakeEngine("alpha", results("a", 3))]) as rypsok:
        response = await rypsok.search(SearchRequest(query="embedded"))
        await rypsok.status()
    assert len(response.results) == 3
    assert sys.getswitchinterval() == hosts_interval
    assert allocator_calls == []


@pytest.mark.parametrize("own", [True, False])
async def test_req_arch_007_serving_tunes_the_interpreter_only_in_rypsoks_own_process(
    own: bool,
    hosts_interval: float,
    allocator_calls: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`serving` (what both transports of `rypsok serve` open) tunes the process when the
    console script claimed it, and leaves it alone in any other program."""
    monkeypatch.setattr(own_process, "_own", own)  # as the console script sets it
    config = make_config(engine_config("alpha"))
    service = partial(Rypsok, config, env={}, engines=[FakeEngine("alpha")])
    async with serving(service, [signal.SIGUSR1]) as (rypsok, stop):
        await rypsok.status()
        assert not stop.is_set()
    if own:
        assert sys.getswitchinterval() == pytest.approx(own_process.SWITCH_INTERVAL_S)
        assert allocator_calls == ["glibc"]
    else:
        assert sys.getswitchinterval() == hosts_interval
        assert allocator_calls == []


# The console script's own entry in a child, serving stdio until its input ends; then it says
# on stderr what the interpreter's switch interval is.
_SERVE_AND_SAY_INTERVAL = textwrap.dedent(
    """
    import sys
    from rypsok import _entry
    sys.argv = ["rypsok", *sys.argv[1:]]
    code = _entry.main()
    sys.stderr.write(f"INTERVAL {sys.getswitchinterval()!r}\\n")
    raise SystemExit(code)
    """
)


def test_req_arch_007_the_console_scripts_serve_tunes_its_own_process(tmp_path: Path) -> None:
    path = tmp_path / "rypsok.toml"
    path.write_text(
        'config_version = 1\n[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general"]\n',
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if k not in _NOT_PASSED}
    done = subprocess.run(
        [sys.executable, "-c", _SERVE_AND_SAY_INTERVAL, "serve", "--config", str(path)],
        input="",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("INTERVAL ")]
    assert said == [f"INTERVAL {own_process.SWITCH_INTERVAL_S!r}"]


def test_req_arch_007_check_leaves_the_interpreter_untuned(tmp_path: Path) -> None:
    """Only `serve` tunes: `rypsok check` in the console script's own process does not."""
    path = tmp_path / "rypsok.toml"
    path.write_text(
        'config_version = 1\n[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general"]\n',
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if k not in _NOT_PASSED}
    done = subprocess.run(
        [sys.executable, "-c", _SERVE_AND_SAY_INTERVAL, "check", "--config", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("INTERVAL ")]
    assert said == [f"INTERVAL {0.005!r}"]
