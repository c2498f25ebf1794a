"""The fan-out under the deadline: concurrency, timeouts, early completion, cancellation,
isolation, no retry, and determinism over arrival orders (REQ-AGG-*, REQ-TEST-004/011)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import pytest
import trio
import trio.lowlevel
import trio.testing
from search_fakes import (
    FakeEngine,
    capture_logs,
    engine_config,
    live_tasks,
    make_config,
    results,
)

from rypsok.core.engines.base import RawResult
from rypsok.core.model import (
    DetailReason,
    ErrorKind,
    Notice,
    NoticeCode,
    Outcome,
    Reason,
    SearchRequest,
    ToolError,
    canonical_json,
)
from rypsok.core.services import Rypsok

if TYPE_CHECKING:
    from rypsok.config.schema import Config


def two_engine_config(**search: object) -> Config:
    return make_config(
        engine_config("alpha", preference=10),
        engine_config("beta", preference=20),
        search=dict(search),
    )


async def test_req_agg_001_engines_are_asked_concurrently(
    autojump_clock: trio.testing.MockClock,
) -> None:
    engines = [FakeEngine(e, results(e, 2), delay_s=1.0) for e in ("alpha", "beta", "gamma")]
    config = make_config(*(engine_config(e) for e in ("alpha", "beta", "gamma")))
    async with Rypsok(config, engines=engines) as rypsok:
        start = trio.current_time()
        response = await rypsok.search(SearchRequest(query="rust"))
        elapsed = trio.current_time() - start
    assert response.outcome is Outcome.OK
    assert elapsed == pytest.approx(1.0)  # three one-second engines side by side, not 3 s
    assert all(len(e.queries) == 1 for e in engines)


async def test_req_agg_005_requests_to_one_engine_never_exceed_lim_c2(
    autojump_clock: trio.testing.MockClock,
) -> None:
    engine = FakeEngine("alpha", results("a", 1), delay_s=0.5)
    config = make_config(engine_config("alpha"), limits={"per_engine_in_flight": 2})
    async with Rypsok(config, engines=[engine]) as rypsok, trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(rypsok.search, SearchRequest(query="rust"))
    assert engine.max_active == 2
    assert len(engine.queries) == 5


async def test_req_agg_002_an_engine_request_is_cancelled_after_lim_s5(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slow = FakeEngine("alpha", results("slow", 2), delay_s=30.0)
    fast = FakeEngine("beta", results("fast", 2), delay_s=0.1)
    async with Rypsok(two_engine_config(), engines=[slow, fast]) as rypsok:
        start = trio.current_time()
        response = await rypsok.search(SearchRequest(query="rust"))
        elapsed = trio.current_time() - start
    assert elapsed == pytest.approx(2.0)  # engine_timeout_ms, the default 2000
    assert slow.cancelled == 1
    assert slow.finished == 0
    assert response.outcome is Outcome.PARTIAL
    assert Notice(code=NoticeCode.ENGINE_UNAVAILABLE, engine="alpha", reason=Reason.TIMEOUT) in (
        response.notices
    )
    assert [r.url for r in response.results][:2] == [
        "https://example.org/fast/1",
        "https://example.org/fast/2",
    ]


async def test_req_agg_003_the_deadline_is_measured_from_the_start_of_the_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # One in-flight place: the second call waits 0.7 s for it, then its request may run
    # only until start + LIM-S4 - LIM-S6 = 0.8 s, not 0.7 + LIM-S5.
    engine = FakeEngine("alpha", results("a", 1), delay_s=0.7)
    config = make_config(
        engine_config("alpha"),
        search={"deadline_ms": 1000, "reserve_ms": 200, "engine_timeout_ms": 800},
        limits={"per_engine_in_flight": 1},
    )
    ends: dict[str, float] = {}
    errors: list[ToolError] = []

    async with Rypsok(config, engines=[engine]) as rypsok:

        async def call(name: str) -> None:
            try:
                await rypsok.search(SearchRequest(query="rust"))
            except ToolError as exc:
                errors.append(exc)
            ends[name] = trio.current_time()

        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, "first")
            await trio.lowlevel.checkpoint()
            nursery.start_soon(call, "second")
    assert ends["first"] - start == pytest.approx(0.7)
    assert ends["second"] - start == pytest.approx(0.8)
    assert len(errors) == 1
    assert errors[0].kind is ErrorKind.UNAVAILABLE
    assert errors[0].detail.reason is DetailReason.DEADLINE


async def test_req_agg_003_a_search_call_never_lasts_longer_than_lim_s7(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Engines that never answer, with the largest engine timeout the configuration allows
    # (LIM-S4 - LIM-S6): the call ends at 2.3 s with the deadline error, inside LIM-S7.
    engines = [FakeEngine(e, results(e, 1), delay_s=1000.0) for e in ("alpha", "beta")]
    config = two_engine_config(engine_timeout_ms=2300)
    async with Rypsok(config, engines=engines) as rypsok:
        start = trio.current_time()
        with pytest.raises(ToolError) as caught:
            await rypsok.search(SearchRequest(query="rust"))
        elapsed = trio.current_time() - start
    assert elapsed == pytest.approx(2.3)
    assert elapsed <= 2.5 + 0.3
    assert caught.value.detail.reason is DetailReason.DEADLINE
    assert caught.value.message == "no engine answered before the deadline; retry later"


async def test_req_agg_009_the_call_completes_when_every_engine_has_ended(
    autojump_clock: trio.testing.MockClock,
) -> None:
    engines = [
        FakeEngine("alpha", results("a", 2), delay_s=0.05),
        FakeEngine("beta", failure=Reason.BLOCKED, delay_s=0.1),
    ]
    async with Rypsok(two_engine_config(), engines=engines) as rypsok:
        start = trio.current_time()
        response = await rypsok.search(SearchRequest(query="rust"))
        elapsed = trio.current_time() - start
    assert elapsed == pytest.approx(0.1)
    assert response.outcome is Outcome.PARTIAL


async def test_req_agg_006_the_callers_cancellation_aborts_every_engine_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    engines = [FakeEngine(e, results(e, 1), delay_s=10.0) for e in ("alpha", "beta")]
    async with Rypsok(two_engine_config(), engines=engines) as rypsok:
        before = live_tasks()
        start = trio.current_time()
        with trio.move_on_after(0.3) as scope:
            await rypsok.search(SearchRequest(query="rust"))
        assert scope.cancelled_caught
        assert trio.current_time() - start == pytest.approx(0.3)
        assert [e.cancelled for e in engines] == [1, 1]
        assert [e.active for e in engines] == [0, 0]
        assert live_tasks() == before  # no task left behind, nothing detached
        # The engines' state is not charged: a cancelled call is not a failure, and the
        # next call asks both engines again.
        for engine in engines:
            engine.delay_s = 0.1
        response = await rypsok.search(SearchRequest(query="rust"))
    assert response.outcome is Outcome.OK
    assert [len(e.queries) for e in engines] == [2, 2]


async def test_req_agg_007_an_exception_in_a_driver_ends_that_engine_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    broken = FakeEngine("alpha", error=RuntimeError("provider said: s3cr3t-body-text"))
    good = FakeEngine("beta", results("good", 2))
    with capture_logs() as logs:
        async with Rypsok(two_engine_config(), engines=[broken, good]) as rypsok:
            response = await rypsok.search(SearchRequest(query="rust"))
    assert response.outcome is Outcome.PARTIAL
    assert [r.url for r in response.results] == [
        "https://example.org/good/1",
        "https://example.org/good/2",
    ]
    assert (
        Notice(code=NoticeCode.ENGINE_UNAVAILABLE, engine="alpha", reason=Reason.REQUEST_FAILURE)
        in response.notices
    )
    failed = logs.named("engine_failed")
    assert [(e["engine"], e["class"]) for e in failed] == [("alpha", "request_failure")]
    assert "s3cr3t-body-text" not in logs.text


async def test_req_agg_007_a_malformed_answer_is_a_parse_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    malformed = FakeEngine("alpha", {"results": "not a tuple"}, raw_answer=True)
    good = FakeEngine("beta", results("good", 1))
    async with Rypsok(two_engine_config(), engines=[malformed, good]) as rypsok:
        response = await rypsok.search(SearchRequest(query="rust"))
    assert response.outcome is Outcome.PARTIAL
    assert (
        Notice(code=NoticeCode.ENGINE_UNAVAILABLE, engine="alpha", reason=Reason.PARSE_FAILURE)
        in response.notices
    )
    assert len(response.results) == 1


async def test_req_agg_008_a_failed_engine_is_not_retried_within_the_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    failing = FakeEngine("alpha", failure=Reason.REQUEST_FAILURE, delay_s=0.01)
    good = FakeEngine("beta", results("good", 1), delay_s=1.0)
    async with Rypsok(two_engine_config(), engines=[failing, good]) as rypsok:
        await rypsok.search(SearchRequest(query="rust"))
    assert len(failing.queries) == 1


async def test_req_test_004_one_failing_engine_never_removes_the_results_of_another(
    autojump_clock: trio.testing.MockClock,
) -> None:
    for failure in [Reason.TIMEOUT, Reason.RATE_LIMITED, Reason.PARSE_FAILURE, Reason.BLOCKED]:
        failing = FakeEngine("alpha", failure=failure)
        good = FakeEngine("beta", results("good", 3))
        async with Rypsok(two_engine_config(), engines=[failing, good]) as rypsok:
            response = await rypsok.search(SearchRequest(query="rust"))
        assert response.outcome is Outcome.PARTIAL
        assert len(response.results) == 3
        assert response.notices[0] == Notice(
            code=NoticeCode.ENGINE_UNAVAILABLE, engine="alpha", reason=failure
        )


def _answers() -> dict[str, tuple[RawResult, ...]]:
    rng = random.Random(2026)
    pages = [f"https://site{i}.example/page" for i in range(15)]
    out = {}
    for engine in ("alpha", "beta", "gamma", "delta"):
        chosen = rng.sample(pages, 10)
        out[engine] = tuple(
            RawResult(
                title=f"<b>{engine}</b> on {url[8:14]} &amp; more",
                url=url + ("?utm_source=x" if rank % 3 == 0 else ""),
                snippet=f"{engine} says {rank}\u200b of {url}",
                date=f"2026-0{1 + rank % 9}-1{rank % 10}",
            )
            for rank, url in enumerate(chosen, start=1)
        )
    return out


async def test_req_test_011_shuffled_arrival_orders_give_identical_bytes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    answers = _answers()
    ids = list(answers)
    config = make_config(
        *(engine_config(e, preference=10) for e in ids),  # equal preferences: config order
        search={"max_results": 20, "engine_attribution": True},
    )
    rng = random.Random(11)
    outputs = set()
    orders = set()
    for _ in range(12):
        delays = {e: rng.choice([0.01, 0.02, 0.03, 0.04, 0.05]) for e in ids}
        orders.add(tuple(sorted(ids, key=lambda e: (delays[e], rng.random()))))
        engines = [FakeEngine(e, answers[e], delay_s=delays[e]) for e in ids]
        async with Rypsok(config, engines=engines) as rypsok:
            response = await rypsok.search(SearchRequest(query="rust"))
        outputs.add(canonical_json(response.to_json()))
    assert len(orders) > 3  # the arrival orders really differed
    assert len(outputs) == 1
    (output,) = outputs
    assert '"outcome":"ok"' in output


async def test_lim_s7_the_hard_stop_ends_a_post_processing_that_overruns(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The engines answer at once; cleaning each text then takes 0.4 s of the call's time
    # (a slow machine, a pathological page). Five results need 4 s: the call must end at
    # its hard stop, LIM-S4 + 300 ms = 2.8 s, within one result's cleaning, with the
    # deadline error and no response.
    from rypsok.core import untrusted_text

    cleaned: list[str] = []
    original = untrusted_text.clean_markup_text

    def slow_clean(text: str, limit: int) -> untrusted_text.Cleaned:
        autojump_clock.jump(0.4)
        cleaned.append(text)
        return original(text, limit)

    monkeypatch.setattr(untrusted_text, "clean_markup_text", slow_clean)
    engines = [FakeEngine(e, results(e, 10)) for e in ("alpha", "beta")]
    async with Rypsok(two_engine_config(), engines=engines) as rypsok:
        start = trio.current_time()
        with pytest.raises(ToolError) as caught:
            await rypsok.search(SearchRequest(query="rust"))
        elapsed = trio.current_time() - start
    assert caught.value.detail.reason is DetailReason.DEADLINE
    assert 2.8 <= elapsed <= 2.8 + 2 * 0.4  # stopped within one result (title and snippet)
    assert len(cleaned) < 2 * 5
