"""REQ-PERF-003 / LIM-M5: `check` prints the worst-case memory of the settings and warns above
the documented unit's MemoryMax, naming the build the figure is for."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rypsok.config import memory
from rypsok.config.check import run_check
from rypsok.config.load import load_config_text

if TYPE_CHECKING:
    import pytest

MIB = 1024 * 1024


def config(text: str) -> Any:
    return load_config_text("config_version = 1\n" + text, {})


def expected(
    max_bytes: int, *, fetches: int = 4, parses: int = 2, sessions: int = 256, connections: int = 64
) -> int:
    # The costlier of a page of text and a page dense in elements (issue 23).
    text = memory.PARSE_TENTHS_PER_BYTE * max_bytes // 10
    dense = memory.NODE_BOUND_BYTES + memory.DOCUMENT_TENTHS_PER_BYTE * max_bytes // 10
    per_parse = max(text, dense) + memory.PARSE_FIXED_BYTES
    return (
        memory.AT_REST_BYTES
        + fetches * max_bytes
        + parses * per_parse
        + sessions * memory.SESSION_BYTES
        + connections * memory.CONNECTION_BYTES
    )


def test_req_perf_003_the_estimate_follows_the_settings() -> None:
    assert memory.estimate(config("")).total_bytes == expected(5 * MIB)
    tuned = config(
        "[fetch]\nmax_bytes = 1048576\n[limits]\nfetches_in_flight = 8\nparsing_in_flight = 3\n"
        "[service.http]\nlegacy_revisions = false\n"
    )
    assert memory.estimate(tuned).total_bytes == expected(MIB, fetches=8, parses=3, sessions=0)
    cached = config("[cache]\nenabled = true\nmax_entries = 100\nmax_entry_bytes = 4096\n")
    assert memory.estimate(cached).total_bytes == expected(5 * MIB) + 100 * 4096


def test_req_perf_003_the_estimate_covers_what_tokenless_connections_hold() -> None:
    """Each connection a peer may open without a token counts (issue 18.3): at the ceiling
    of max_connections the estimate passes the documented unit's MemoryMax."""
    crowded = config("[service.http]\nmax_connections = 4096\n")
    assert memory.estimate(crowded).total_bytes == expected(5 * MIB, connections=4096)
    assert memory.estimate(crowded).total_bytes > memory.MEMORY_MAX_BYTES


def test_req_perf_003_lim_m5_one_parse_at_a_time_fits_and_the_defaults_warn(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On glibc the worst page shape (links to the node bound, the page's text four bytes a
    # character) costs about 125 MiB a parse: two at once, the defaults, are above the unit;
    # one at a time fits (issue 23).
    monkeypatch.setattr(memory, "measured_build", lambda: ("CPython 3.11 on Linux (glibc)", True))
    small = tmp_path / "small.toml"
    small.write_text("config_version = 1\n[limits]\nparsing_in_flight = 1\n")
    big = tmp_path / "big.toml"
    big.write_text("config_version = 1\n")
    small_lines = run_check(str(small), {}).lines
    big_lines = run_check(str(big), {}).lines
    figure = memory.estimate(config("[limits]\nparsing_in_flight = 1\n")).total_bytes
    assert figure <= memory.MEMORY_MAX_BYTES
    assert memory.estimate(config("")).total_bytes > memory.MEMORY_MAX_BYTES
    assert f"rypsok: memory: worst case about {figure / MIB:.0f} MiB for CPython" in "\n".join(
        small_lines
    )
    assert not any("warning: memory" in line for line in small_lines)
    (warning,) = [line for line in big_lines if "warning: memory" in line]
    assert "256 MiB" in warning
    assert "CPython 3.11 on Linux (glibc)" in warning


def test_req_perf_003_another_build_gets_the_figure_without_a_warning(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory, "measured_build", lambda: ("PyPy on darwin", False))
    big = tmp_path / "big.toml"
    big.write_text("config_version = 1\n[fetch]\nmax_bytes = 10485760\n")
    lines = run_check(str(big), {}).lines
    (line,) = [line for line in lines if line.startswith("rypsok: memory")]
    assert "not measured for PyPy on darwin" in line
    assert not any("warning: memory" in line for line in lines)
