"""Tool call limits: LIM-C6..C8 per process, per caller over HTTP (REQ-MCP-010, REQ-SEC-019)."""

from __future__ import annotations

from fractions import Fraction

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from rypsok.config.schema import LimitsConfig
from rypsok.core.ratelimit import ToolRateLimiter, _exact_ns
from rypsok.core.telemetry import LOCAL_CALLER


def test_req_mcp_010_admits_exactly_the_limit_in_a_minute_then_says_when() -> None:
    limiter = ToolRateLimiter(3)
    assert limiter.check(LOCAL_CALLER, 100.0) is None
    assert limiter.check(LOCAL_CALLER, 110.0) is None
    assert limiter.check(LOCAL_CALLER, 120.0) is None
    # The oldest call (100.0) leaves the window at 160.0.
    assert limiter.check(LOCAL_CALLER, 130.0) == 30_000
    assert limiter.check(LOCAL_CALLER, 159.25) == 750
    assert limiter.check(LOCAL_CALLER, 160.0) is None
    # Now 110, 120 and 160 are in the window; 110 leaves at 170.
    assert limiter.check(LOCAL_CALLER, 160.5) == 9_500
    assert limiter.check(LOCAL_CALLER, 170.0) is None
    assert limiter.check(LOCAL_CALLER, 170.0) == 10_000


@pytest.mark.parametrize(
    ("per_minute", "field"),
    [(60, "web_search_per_minute"), (30, "web_fetch_per_minute"), (30, "engine_status_per_minute")],
)
def test_req_mcp_010_the_default_limits_admit_their_number_per_minute(
    per_minute: int, field: str
) -> None:
    configured = getattr(LimitsConfig(), field)
    assert configured == per_minute
    limiter = ToolRateLimiter(configured)
    times = [i * 59.0 / per_minute for i in range(per_minute)]
    assert [limiter.check(LOCAL_CALLER, t) for t in times] == [None] * per_minute
    assert limiter.check(LOCAL_CALLER, 59.5) == 500
    assert limiter.check(LOCAL_CALLER, 60.0) is None


def test_req_mcp_010_retry_after_is_rounded_up_and_at_least_one_millisecond() -> None:
    limiter = ToolRateLimiter(1)
    assert limiter.check("ops", 0.0) is None
    assert limiter.check("ops", 59.9995) == 1
    assert limiter.check("ops", 59.999999999) == 1
    assert limiter.check("ops", 60.0) is None
    fresh = ToolRateLimiter(1)
    assert fresh.check("ops", 0.0) is None
    assert fresh.check("ops", 0.0004) == 60_000  # 59,999.6 ms, rounded up


def test_req_mcp_010_a_refused_call_consumes_nothing() -> None:
    limiter = ToolRateLimiter(2)
    assert limiter.check("ops", 0.0) is None
    assert limiter.check("ops", 1.0) is None
    for step in range(1000):
        assert limiter.check("ops", 2.0 + step * 0.05) is not None
    # Had the refusals counted, the window would still be full at 60.0 and 61.0.
    assert limiter.check("ops", 60.0) is None
    assert limiter.check("ops", 61.0) is None


def test_req_mcp_010_an_earlier_time_is_held_to_the_latest_seen() -> None:
    limiter = ToolRateLimiter(1)
    assert limiter.check("ops", 50.0) is None
    assert limiter.check("ops", 10.0) == 60_000
    assert limiter.check("mimlys", 10.0) is None
    assert limiter.check("ops", 110.0) is None


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "60"])
def test_req_mcp_010_the_limit_is_a_positive_integer(bad: object) -> None:
    with pytest.raises(ValueError, match="per_minute"):
        ToolRateLimiter(bad)  # type: ignore[arg-type]


async def test_req_mcp_010_waiting_retry_after_on_the_trio_clock_is_enough(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limiter = ToolRateLimiter(5)
    await trio.sleep(1234.5678)
    for _ in range(5):
        assert limiter.check(LOCAL_CALLER, trio.current_time()) is None
        await trio.sleep(0.333)
    for _ in range(20):
        retry_after_ms = limiter.check(LOCAL_CALLER, trio.current_time())
        assert retry_after_ms is not None
        assert retry_after_ms >= 1
        # One millisecond short of the answer is still refused; the answer itself admits.
        await trio.sleep((retry_after_ms - 1) / 1000)
        assert limiter.check(LOCAL_CALLER, trio.current_time()) is not None
        await trio.sleep(0.001)
        assert limiter.check(LOCAL_CALLER, trio.current_time()) is None


def test_req_sec_019_each_caller_has_its_own_limit() -> None:
    limiter = ToolRateLimiter(2)
    assert limiter.check("ops", 0.0) is None
    assert limiter.check("ops", 0.0) is None
    assert limiter.check("ops", 1.0) == 59_000
    assert limiter.check("mimlys", 1.0) is None
    assert limiter.check("mimlys", 2.0) is None
    assert limiter.check("mimlys", 3.0) == 58_000
    assert limiter.check("ops", 60.0) is None


def test_req_sec_019_callers_whose_window_emptied_are_forgotten() -> None:
    limiter = ToolRateLimiter(3)
    for number in range(10_000):
        assert limiter.check(f"caller-{number}", number / 1000) is None
    assert limiter.statistics().callers == 10_000
    # At 65.0 the callers whose only call was before 5.0 are gone, the rest are held.
    assert limiter.check("late", 65.0) is None
    assert limiter.statistics().callers == 10_000 - 5_001 + 1
    assert limiter.check("late", 200.0) is None
    assert limiter.statistics().callers == 1
    assert limiter.statistics().per_minute == 3


def test_req_sec_019_a_caller_that_keeps_calling_keeps_its_window() -> None:
    limiter = ToolRateLimiter(2)
    assert limiter.check("ops", 0.0) is None
    assert limiter.check("ops", 50.0) is None
    # The first call has left, the second has not: ops must be kept with one call.
    assert limiter.check("other", 100.0) is None
    assert limiter.check("ops", 100.0) is None
    assert limiter.check("ops", 100.0) == 10_000


@settings(max_examples=300, deadline=None)
@given(
    per_minute=st.integers(min_value=1, max_value=6),
    steps=st.lists(
        st.tuples(st.integers(min_value=0, max_value=40_000), st.sampled_from(["a", "b", "c"])),
        max_size=60,
    ),
)
def test_req_mcp_010_no_sixty_seconds_hold_more_than_the_limit_and_refusals_are_exact(
    per_minute: int, steps: list[tuple[int, str]]
) -> None:
    limiter = ToolRateLimiter(per_minute)
    now_ms = 0
    admitted: dict[str, list[int]] = {"a": [], "b": [], "c": []}
    for gap_ms, caller in steps:
        now_ms += gap_ms
        answer = limiter.check(caller, now_ms / 1000)
        in_window = [t for t in admitted[caller] if t > now_ms - 60_000]
        if answer is None:
            # Admitted only while the window had room.
            assert len(in_window) < per_minute
            admitted[caller].append(now_ms)
        else:
            # Refused only when the window was full, and told exactly when it frees.
            assert len(in_window) == per_minute
            assert answer == in_window[0] + 60_000 - now_ms
    for times in admitted.values():
        for index, start in enumerate(times):
            assert len([t for t in times[index:] if t < start + 60_000]) <= per_minute


@settings(max_examples=2000, deadline=None)
@given(
    st.one_of(
        st.floats(min_value=0, max_value=1e12, allow_nan=False),
        # Exact halves of a nanosecond and their neighbours: where rounding decides.
        st.integers(min_value=0, max_value=10**12).map(lambda n: (n + 0.5) / 1e9),
    )
)
def test_req_mcp_010_the_clock_is_read_to_the_nearest_nanosecond_exactly(now: float) -> None:
    # The window compares integer nanoseconds: each clock reading is the float's exact value
    # rounded once (ties to even), so a call a nanosecond early is never admitted.
    limiter = ToolRateLimiter(1)
    assert limiter.check("c", now) is None
    expected = round(Fraction(now) * 1_000_000_000)
    wait_ms = limiter.check("c", now)
    assert wait_ms == 60_000
    # Admitted again exactly when the first call's nanosecond leaves the window.
    edge = (expected + 60_000_000_000) / 1e9
    if round(Fraction(edge) * 1_000_000_000) >= expected + 60_000_000_000:
        assert limiter.check("c", edge) is None
    else:
        assert limiter.check("c", edge) is not None


@pytest.mark.parametrize(
    "seconds",
    [
        0.0,
        -0.0,
        1 / 1024,  # 976562.5 ns: a tie, to the even neighbour
        3 / 1024,  # 2929687.5 ns: a tie, to the even neighbour above
        -1 / 1024,
        5e-10,
        1e-9,
        0.1,
        86400.000000001,
        2.0**52 + 0.5,
        1e300,
    ],
)
def test_req_mcp_010_the_clock_is_read_exactly_to_the_nanosecond(seconds: float) -> None:
    assert _exact_ns(seconds) == round(Fraction(seconds) * 1_000_000_000)


@given(st.floats(allow_nan=False, allow_infinity=False))
@settings(max_examples=500, deadline=None)
def test_req_mcp_010_every_finite_time_is_read_exactly(seconds: float) -> None:
    assert _exact_ns(seconds) == round(Fraction(seconds) * 1_000_000_000)


def test_req_mcp_010_retry_after_rounds_up_a_wait_just_past_a_whole_millisecond() -> None:
    """59,000.03 ms left is named 59,001 ms (never 59,000, after which the call would still
    be refused), and waiting exactly that long admits it."""
    limiter = ToolRateLimiter(1)
    assert limiter.check("ops", 0.0) is None
    assert limiter.check("ops", 0.99997) == 59_001
    assert limiter.check("ops", 0.99997 + 59.0) == 1
    assert limiter.check("ops", 0.99997 + 59.001) is None


def test_req_mcp_010_the_limiter_says_its_limit() -> None:
    # What [coordination]'s fallback divides and engine_status shows.
    assert ToolRateLimiter(7).per_minute == 7
    assert ToolRateLimiter(1).per_minute == 1


def test_req_sec_019_a_caller_that_calls_again_moves_behind_the_others() -> None:
    """A caller's latest call puts it at the back of the order, so that a caller whose window
    emptied earlier is forgotten even when an active caller had called before it."""
    limiter = ToolRateLimiter(5)
    assert limiter.check("a", 0.0) is None
    assert limiter.check("b", 1.0) is None
    assert limiter.check("a", 2.0) is None
    # At 61.5 b's only call has left the window, a's last has not.
    assert limiter.check("c", 61.5) is None
    assert limiter.statistics().callers == 2  # a and c
