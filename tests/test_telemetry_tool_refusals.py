"""Tool refusals at a caller's rate limit, logged in aggregate (as the HTTP gate's are): the
first of a caller, tool and reason at once, the rest as one line with a `count` per interval,
the refused calls' own lines folded into it; the counters keep every refusal, and a call
that is served keeps its own line. Through the facade, on Trio's MockClock."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from search_fakes import FakeEngine, capture_logs, engine_config, make_config

from rypsok.core.model import DetailReason, SearchRequest, ToolError
from rypsok.core.services import Rypsok
from rypsok.core.telemetry import COUNTERS, run_counters_reporter
from rypsok.core.telemetry._refusals import TOOL_REFUSAL_LOG_INTERVAL_S


async def _refused(call: object) -> None:
    with pytest.raises(ToolError) as caught:
        await call  # type: ignore[misc]
    assert caught.value.detail.reason is DetailReason.RATE_LIMITED


async def test_req_obs_007_refusals_at_a_callers_rate_limit_are_logged_in_aggregate(
    autojump_clock: trio.testing.MockClock,
) -> None:
    COUNTERS.reset()
    config = make_config(engine_config("alpha"), limits={"web_search_per_minute": 1})
    with capture_logs() as logs:
        async with (
            Rypsok(config, engines=[FakeEngine("alpha")]) as rypsok,
            trio.open_nursery() as nursery,
        ):
            await nursery.start(run_counters_reporter, 3600.0)
            started = trio.current_time()
            await rypsok.search_as("ops", SearchRequest(query="served"))
            # 25 s of refusals, 40 a second: 1,000 refused calls of one caller and tool.
            for _ in range(1000):
                await _refused(rypsok.search_as("ops", SearchRequest(query="again")))
                await trio.sleep(0.025)
            # Another caller's refusals are its own lines.
            await rypsok.search_as("mimlys", SearchRequest(query="served too"))
            await _refused(rypsok.search_as("mimlys", SearchRequest(query="again")))
            await trio.sleep(TOOL_REFUSAL_LOG_INTERVAL_S)  # the last interval ends
            nursery.cancel_scope.cancel()
    assert COUNTERS.snapshot()["tools"] == {"web_search": {"rate_limited": 1001}}
    refused = logs.named("refused")
    ops = [e for e in refused if e["caller"] == "ops"]
    assert [(e["tool"], e["reason"]) for e in ops] == [("web_search", "rate_limited")] * len(ops)
    assert sum(e["count"] for e in ops) == 1000
    # The first at once, then a line per interval: 25 s of refusals make three or four lines.
    assert ops[0]["count"] == 1
    assert 3 <= len(ops) <= 4
    assert [e["count"] for e in refused if e["caller"] == "mimlys"] == [1]
    # The served calls keep their own lines; the refused ones are in the counts above.
    calls = logs.named("call")
    assert [e["caller"] for e in calls] == ["ops", "mimlys"]
    assert all("error" not in e for e in calls)
    assert trio.current_time() - started < 60  # one window of the rate limit


async def test_req_obs_007_an_aggregated_refusal_is_written_when_its_interval_ends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The refusals after the first wait for the end of their interval, not for the next
    refusal: a burst that stops is written all the same, with its count."""
    COUNTERS.reset()
    config = make_config(engine_config("alpha"), limits={"engine_status_per_minute": 1})
    with capture_logs() as logs:
        async with (
            Rypsok(config, engines=[FakeEngine("alpha")]) as rypsok,
            trio.open_nursery() as nursery,
        ):
            await nursery.start(run_counters_reporter, 3600.0)
            await rypsok.status_as("ops")
            for _ in range(5):
                await _refused(rypsok.status_as("ops"))
            assert [e["count"] for e in logs.named("refused")] == [1]
            await trio.sleep(TOOL_REFUSAL_LOG_INTERVAL_S + 0.5)
            assert [e["count"] for e in logs.named("refused")] == [1, 4]
            for _ in range(2):
                await _refused(rypsok.status_as("ops"))
            nursery.cancel_scope.cancel()  # the shutdown writes what is left
    # The two after it fall in the interval its line opened: one line at the shutdown.
    assert [e["count"] for e in logs.named("refused")] == [1, 4, 2]
    assert COUNTERS.snapshot()["tools"] == {"engine_status": {"rate_limited": 7}}
