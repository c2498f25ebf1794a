"""The latency window of an engine: median of the last 20 completed requests (LIM-S11)."""

from __future__ import annotations

import statistics

from hypothesis import given
from hypothesis import strategies as st

from rypsok.core.engines.latency import WINDOW, LatencyWindow


def test_req_obs_002_no_request_yet_is_null() -> None:
    assert LatencyWindow().median_ms() is None


def test_req_obs_002_median_in_whole_milliseconds() -> None:
    window = LatencyWindow()
    for seconds in (0.180, 0.100, 0.250):
        window.record(seconds)
    assert window.median_ms() == 180
    window.record(0.2001)
    assert window.median_ms() == 190  # (180 + 200.1) / 2 rounds to 190


def test_req_obs_002_only_the_last_twenty_count() -> None:
    window = LatencyWindow()
    assert WINDOW == 20
    for _ in range(20):
        window.record(5.0)  # an old, slow period
    for _ in range(20):
        window.record(0.1)
    assert window.median_ms() == 100
    assert len(window) == 20


@given(st.lists(st.integers(0, 60_000), min_size=1, max_size=50))
def test_req_obs_002_median_of_the_window(samples_ms: list[int]) -> None:
    window = LatencyWindow()
    for ms in samples_ms:
        window.record(ms / 1000)
    expected = statistics.median(samples_ms[-20:])
    assert abs(window.median_ms() - expected) <= 0.5  # type: ignore[operator]
