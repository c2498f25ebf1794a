"""engine_status tells the truth about an engine that fails (REQ-STATUS-001, REQ-OBS-002/003).

Latency is kept from completed requests only (the provider answered); every request made,
answered or not, enters the engine's recent failures (LIM-S14: its last 20 requests).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jsonschema
import pytest
from redis_server import free_port
from search_fakes import FakeEngine, capture_logs, engine_config, make_config, results

from rypsok.config.load import load_config_text
from rypsok.core.engines.recent import RECENT_WINDOW, RecentRequests
from rypsok.core.model import (
    DetailReason,
    EngineState,
    Reason,
    RecentFailures,
    SearchRequest,
    ToolError,
)
from rypsok.core.services import FetchNetwork, Rypsok
from rypsok.mcp.protocol.tools import build_toolset
from rypsok.shared.tooldefs import ENGINE_STATUS, ToolSettings

if TYPE_CHECKING:
    import trio.testing


def _status_schema() -> dict[str, object]:
    settings = ToolSettings(
        served_categories=("general",),
        languages=("en",),
        status_enabled=True,
        max_results_default=5,
        max_results_ceiling=20,
        query_max_chars=400,
    )
    tool = next(t for t in build_toolset(settings).tools if t.name == ENGINE_STATUS)
    assert tool.output_schema is not None
    return tool.output_schema


async def test_req_status_001_refused_connections_show_as_failures_after_one_call() -> None:
    # A loopback port with nothing listening: every connection is refused.
    port = free_port()
    config = load_config_text(
        'config_version = 1\n[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general"]\n'
        f'base_url = "http://127.0.0.1:{port}/w"\n',
        {},
    )
    with capture_logs():
        async with Rypsok(
            config, env={}, fetch_network=FetchNetwork(extra_allow=("127.0.0.1",))
        ) as service:
            with pytest.raises(ToolError) as failed:
                await service.search(SearchRequest(query="rust"))
            status = await service.status()
    assert failed.value.detail.reason is DetailReason.ALL_FAILED
    (engine,) = status.engines
    assert engine.state is EngineState.CLOSED  # one failure does not open the circuit
    # No answer came: no completed request, no latency to show.
    assert engine.latency_ms is None
    assert engine.recent_failures == RecentFailures(
        requests=1, count=1, classes=((Reason.REQUEST_FAILURE, 1),)
    )
    shown = status.to_json()
    assert shown["engines"][0]["recent_failures"] == {
        "requests": 1,
        "count": 1,
        "classes": {"request_failure": 1},
    }
    jsonschema.validate(shown, _status_schema())


async def test_req_obs_002_a_timeout_counts_as_a_failure_and_keeps_no_latency(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slow = FakeEngine("slow", results("s", 2), delay_s=30)
    quick = FakeEngine("quick", results("q", 2), delay_s=0.1)
    config = make_config(engine_config("slow"), engine_config("quick"))
    with capture_logs():
        async with Rypsok(config, engines=[slow, quick]) as service:
            await service.search(SearchRequest(query="rust"))
            status = await service.status()
    by_id = {e.id: e for e in status.engines}
    assert by_id["slow"].latency_ms is None
    assert by_id["slow"].recent_failures == RecentFailures(
        requests=1, count=1, classes=((Reason.TIMEOUT, 1),)
    )
    assert by_id["quick"].latency_ms == 100
    assert by_id["quick"].recent_failures == RecentFailures(requests=1, count=0)


async def test_req_obs_003_an_answered_failure_keeps_its_latency(
    autojump_clock: trio.testing.MockClock,
) -> None:
    refusing = FakeEngine("refusing", delay_s=0.2, failure=Reason.AUTH_FAILURE)
    config = make_config(engine_config("refusing"))
    with capture_logs():
        async with Rypsok(config, engines=[refusing]) as service:
            for _ in range(2):
                with pytest.raises(ToolError):
                    await service.search(SearchRequest(query="rust"))
            status = await service.status()
    (engine,) = status.engines
    assert engine.latency_ms == 200  # the provider answered: a completed request
    assert engine.recent_failures == RecentFailures(
        requests=2, count=2, classes=((Reason.AUTH_FAILURE, 2),)
    )
    jsonschema.validate(status.to_json(), _status_schema())


def test_req_status_001_recent_failures_keep_the_last_twenty_requests() -> None:
    recent = RecentRequests()
    assert RECENT_WINDOW == 20
    assert recent.failures() == RecentFailures(requests=0, count=0)
    for _ in range(15):
        recent.ended(Reason.TIMEOUT)
    for _ in range(10):
        recent.ended(Reason.PARSE_FAILURE)
    for _ in range(5):
        recent.ended(None)
    # The last 20: 5 timeouts, 10 parse failures, 5 answers; classes by name.
    assert recent.failures() == RecentFailures(
        requests=20,
        count=15,
        classes=((Reason.PARSE_FAILURE, 10), (Reason.TIMEOUT, 5)),
    )


async def test_req_status_001_recent_failures_appear_with_the_first_request() -> None:
    config = load_config_text(
        'config_version = 1\n[engines.brave]\ntype = "brave"\ncategories = ["general"]\n'
        'api_key_env = "RYPSOK_TEST_NO_SUCH_KEY"\n'
        '[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general"]\n',
        {},
    )
    with capture_logs():
        async with Rypsok(config, env={}) as service:
            status = await service.status()
    shown = {e["id"]: e for e in status.to_json()["engines"]}
    # A disabled engine makes no request; an active one before its first shows as the
    # book's examples do, without the field.
    assert shown["brave"] == {
        "id": "brave",
        "state": "disabled",
        "latency_ms": None,
        "reason": "no_credential",
    }
    assert shown["wikipedia"] == {"id": "wikipedia", "state": "closed", "latency_ms": None}
    jsonschema.validate(status.to_json(), _status_schema())
