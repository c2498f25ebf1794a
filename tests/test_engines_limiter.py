"""The engine limiter: rate with burst (LIM-C9), concurrency (LIM-C2), on the mock clock."""

from __future__ import annotations

import math
from fractions import Fraction

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from rypsok.core.engines.brave import BRAVE_RECORD
from rypsok.core.engines.limiter import query_within_limits
from rypsok.core.engines.wikipedia import WIKIPEDIA_RECORD
from rypsok.core.pacing import EngineLimiter, _Units


async def test_req_cmp_002_wikipedia_burst_of_ten_then_one_every_600_ms(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limiter = EngineLimiter(WIKIPEDIA_RECORD, per_engine_in_flight=2)
    start = trio.current_time()
    admitted_at = []
    for _ in range(13):
        assert await limiter.admit(deadline=start + 100)
        admitted_at.append(trio.current_time() - start)
    assert admitted_at[:10] == [0] * 10
    assert [round(t, 9) for t in admitted_at[10:]] == [0.6, 1.2, 1.8]


async def test_req_cmp_002_a_turn_after_the_deadline_is_refused_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limiter = EngineLimiter(BRAVE_RECORD, per_engine_in_flight=2)
    start = trio.current_time()
    assert await limiter.admit(deadline=start + 2.5)  # the one-per-second turn
    assert limiter.next_turn(start) == pytest.approx(start + 1)
    assert not await limiter.admit(deadline=start + 0.5)
    assert trio.current_time() == start  # refused without waiting
    # A refused call took no turn: the next one still gets the turn at +1 s.
    assert await limiter.admit(deadline=start + 2.5)
    assert trio.current_time() - start == pytest.approx(1)
    stats = limiter.statistics()
    assert (stats.admitted, stats.refused) == (2, 1)


async def test_req_cmp_002_a_turn_exactly_at_the_deadline_is_admitted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limiter = EngineLimiter(BRAVE_RECORD, per_engine_in_flight=2)
    start = trio.current_time()
    assert await limiter.admit(deadline=start)
    assert await limiter.admit(deadline=start + 1)


async def test_req_cmp_002_a_cancelled_wait_gives_its_turn_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limiter = EngineLimiter(BRAVE_RECORD, per_engine_in_flight=2)
    start = trio.current_time()
    assert await limiter.admit(deadline=start + 10)
    with trio.move_on_after(0.5):
        await limiter.admit(deadline=start + 10)  # waits for +1 s, cancelled at +0.5 s
    # Not counted as admitted either (REQ-OBS-003: what engine_status shows).
    assert (limiter.statistics().admitted, limiter.statistics().refused) == (1, 0)
    assert await limiter.admit(deadline=start + 10)
    assert trio.current_time() - start == pytest.approx(1)


async def test_req_cmp_002_the_idle_bucket_refills_to_the_burst_and_no_further(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limiter = EngineLimiter(WIKIPEDIA_RECORD, per_engine_in_flight=2)
    start = trio.current_time()
    for _ in range(10):
        await limiter.admit(deadline=start + 100)
    await trio.sleep(3600)  # an hour idle
    t0 = trio.current_time()
    for _ in range(10):
        assert await limiter.admit(deadline=t0)
    assert not await limiter.admit(deadline=t0 + 0.5)


@settings(max_examples=60, deadline=None)
@given(
    rate=st.integers(1, 200),
    burst=st.integers(1, 12),
    gaps=st.lists(st.fractions(0, 3, max_denominator=100), min_size=1, max_size=60),
)
def test_req_cmp_002_no_window_admits_more_than_the_record_allows(
    rate: int, burst: int, gaps: list[Fraction]
) -> None:
    """Over any window of length W, at most burst + W / interval calls start."""
    record = attrs.evolve(WIKIPEDIA_RECORD, rate_per_minute=rate, burst=burst)
    interval = Fraction(60, rate)
    starts: list[Fraction] = []

    async def run() -> None:
        limiter = EngineLimiter(record, per_engine_in_flight=2)
        for gap in gaps:
            await trio.sleep(float(gap))
            if await limiter.admit(deadline=trio.current_time() + 5):
                starts.append(Fraction(trio.current_time()))

    trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))
    for i, first in enumerate(starts):
        for j in range(i, len(starts)):
            window = starts[j] - first
            count = j - i + 1
            # Float clock arithmetic may err by a few ulps; allow a microsecond of slack.
            assert count <= burst + (window + Fraction(1, 10**6)) / interval


async def test_req_cmp_002_concurrency_is_the_lower_of_record_and_lim_c2(
    autojump_clock: trio.testing.MockClock,
) -> None:
    assert EngineLimiter(WIKIPEDIA_RECORD, per_engine_in_flight=2).concurrency == 1
    assert EngineLimiter(BRAVE_RECORD, per_engine_in_flight=8).concurrency == 2
    assert EngineLimiter(BRAVE_RECORD, per_engine_in_flight=1).concurrency == 1
    limiter = EngineLimiter(BRAVE_RECORD, per_engine_in_flight=8)
    peak = 0
    inside = 0

    async def request() -> None:
        nonlocal peak, inside
        async with limiter.slot():
            inside += 1
            peak = max(peak, inside)
            await trio.sleep(1)
            inside -= 1

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(request)
    assert peak == 2
    assert trio.current_time() - start == pytest.approx(3)


def test_req_eng_010_query_limits_count_characters_and_words() -> None:
    assert query_within_limits(BRAVE_RECORD, "a" * 600)
    assert not query_within_limits(BRAVE_RECORD, "a" * 601)
    assert query_within_limits(BRAVE_RECORD, " ".join(["w"] * 75))
    assert not query_within_limits(BRAVE_RECORD, " ".join(["w"] * 76))
    assert query_within_limits(WIKIPEDIA_RECORD, " ".join(["w"] * 125))  # no word limit
    assert not query_within_limits(WIKIPEDIA_RECORD, "é" * 251)


async def test_req_cmp_002_no_deadline_waits_for_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limiter = EngineLimiter(BRAVE_RECORD, per_engine_in_flight=2)
    start = trio.current_time()
    assert await limiter.admit(deadline=math.inf)
    assert await limiter.admit(deadline=math.inf)
    assert trio.current_time() - start == pytest.approx(1)


@pytest.mark.parametrize(
    ("field", "value"),
    [("rate_per_minute", 0), ("burst", 0), ("share", 0), ("rate_per_minute", -1)],
)
def test_req_cmp_002_a_limiter_below_one_call_is_refused_at_construction(
    field: str, value: int
) -> None:
    """A rate, a burst or a share under one cannot be kept (and would divide by zero or
    admit without end): refused where the limiter is built, never at a call."""
    share = value if field == "share" else 1
    record = (
        WIKIPEDIA_RECORD if field == "share" else attrs.evolve(WIKIPEDIA_RECORD, **{field: value})
    )
    with pytest.raises(ValueError, match="at least 1"):
        EngineLimiter(record, per_engine_in_flight=2, share=share)


def test_req_cmp_002_a_limiter_at_one_call_is_accepted() -> None:
    record = attrs.evolve(WIKIPEDIA_RECORD, rate_per_minute=1, burst=1)
    stats = EngineLimiter(record, per_engine_in_flight=1, share=1).statistics()
    assert (stats.rate_per_minute, stats.burst, stats.concurrency) == (1, 1, 1)


async def test_req_cmp_002_a_share_larger_than_the_burst_keeps_a_burst_of_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """[coordination]'s fallback: a burst of 2 split among 4 processes is 1 each, never 0
    (with a burst of 0 every turn after the first would wait two intervals)."""
    record = attrs.evolve(BRAVE_RECORD, rate_per_minute=60, burst=2)
    limiter = EngineLimiter(record, per_engine_in_flight=2, share=4)
    assert limiter.statistics().burst == 1
    start = trio.current_time()
    assert await limiter.admit(deadline=start)  # the one turn of the burst, at once
    assert not await limiter.admit(deadline=start + 3.9)  # next one 4 s later (60/min ÷ 4)
    assert await limiter.admit(deadline=start + 4)
    assert trio.current_time() - start == pytest.approx(4)


def test_req_cmp_002_no_in_flight_place_is_never_zero_places() -> None:
    """LIM-C2 of zero (a setting the configuration refuses) still lets one request through:
    a limiter without a place would hang every call to the engine."""
    assert EngineLimiter(BRAVE_RECORD, per_engine_in_flight=0).concurrency == 1
    assert (
        EngineLimiter(attrs.evolve(BRAVE_RECORD, concurrency=0), per_engine_in_flight=4).concurrency
        == 1
    )


async def test_req_obs_003_in_flight_counts_the_requests_holding_a_place(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limiter = EngineLimiter(BRAVE_RECORD, per_engine_in_flight=8)  # two places
    assert limiter.statistics().in_flight == 0
    async with limiter.slot():
        assert limiter.statistics().in_flight == 1
        async with limiter.slot():
            assert limiter.statistics().in_flight == 2
        assert limiter.statistics().in_flight == 1
    assert limiter.statistics().in_flight == 0


# The limiter keeps its exact times as integers of 1/per_second s, never as `Fraction`s.
_TIMES = st.one_of(
    st.floats(min_value=0, max_value=3e5, allow_nan=False),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1e308]),
)


@settings(max_examples=500, deadline=None)
@given(
    t=_TIMES,
    denominator=st.integers(min_value=1, max_value=10**6),
    steps=st.integers(min_value=-(10**6), max_value=10**6),
)
def test_req_cmp_002_the_limiters_units_are_the_exact_times(
    t: float, denominator: int, steps: int
) -> None:
    units = _Units(denominator)
    assert Fraction(units.count(t), units.per_second) == Fraction(t)
    assert units.of(Fraction(steps, denominator)) == steps * (units.per_second // denominator)
    # A time a whole number of 1/denominator s from a float: the first float not before it.
    exact = units.count(t) + units.of(Fraction(steps, denominator))
    woken = units.not_before(exact)
    expected = float(Fraction(exact, units.per_second))
    if Fraction(expected) < Fraction(exact, units.per_second):
        expected = math.nextafter(expected, math.inf)
    assert woken == expected
