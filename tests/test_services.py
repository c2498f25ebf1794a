"""The facade: per-caller tool limits, status, call events, counters, substituted engines,
and one search end to end through the real Wikipedia driver on a local MediaWiki."""

from __future__ import annotations

import gc
import json

import pytest
import trio
import trio.testing
from search_fakes import FakeEngine, capture_logs, engine_config, make_config, results
from servers import Reply, RoutingTransport, serve_http

from rypsok.config.schema import Config, EngineConfig
from rypsok.core.engines.base import AdmissionRecord, EngineAnswer, EngineQuery, RawResult
from rypsok.core.model import (
    Category,
    DetailReason,
    ErrorKind,
    Outcome,
    Reason,
    SearchRequest,
    ToolError,
)
from rypsok.core.services import ReturnedUrls, Rypsok
from rypsok.core.telemetry import COUNTERS


async def test_req_mcp_010_web_search_is_limited_per_caller_with_retry_after_ms(
    autojump_clock: trio.testing.MockClock,
) -> None:
    COUNTERS.reset()
    config = make_config(engine_config("alpha"), limits={"web_search_per_minute": 2})
    engine = FakeEngine("alpha", results("a", 1))
    with capture_logs() as logs:
        async with Rypsok(config, engines=[engine]) as rypsok:
            await rypsok.search_as("ops", SearchRequest(query="one"))
            await trio.sleep(10)
            await rypsok.search_as("ops", SearchRequest(query="two"))
            with pytest.raises(ToolError) as caught:
                await rypsok.search_as("ops", SearchRequest(query="three"))
            other = await rypsok.search_as("mimlys", SearchRequest(query="four"))
            await trio.sleep(50)
            again = await rypsok.search_as("ops", SearchRequest(query="five"))
    error = caught.value
    assert error.kind is ErrorKind.UNAVAILABLE
    assert error.detail.reason is DetailReason.RATE_LIMITED
    assert error.detail.retry_after_ms == 50_000  # the first call leaves the window at 60 s
    assert error.message == "the web_search rate limit is reached; retry later"
    assert other.outcome is Outcome.OK
    assert again.outcome is Outcome.OK
    assert len(engine.queries) == 4  # the refused call asked no engine
    assert COUNTERS.snapshot()["tools"] == {"web_search": {"rate_limited": 1}}
    refused = logs.named("refused")
    assert [(e["tool"], e["reason"], e["caller"]) for e in refused] == [
        ("web_search", "rate_limited", "ops")
    ]


async def test_req_mcp_010_engine_status_has_its_own_limit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    COUNTERS.reset()
    config = make_config(engine_config("alpha"), limits={"engine_status_per_minute": 1})
    async with Rypsok(config, engines=[FakeEngine("alpha")]) as rypsok:
        await rypsok.status()
        with pytest.raises(ToolError) as caught:
            await rypsok.status()
        await rypsok.search(SearchRequest(query="still served"))
    assert caught.value.detail.reason is DetailReason.RATE_LIMITED
    assert caught.value.detail.retry_after_ms == 60_000
    assert COUNTERS.snapshot()["tools"] == {"engine_status": {"rate_limited": 1}}


async def test_req_obs_007_refused_calls_are_counted_per_tool_and_reason() -> None:
    COUNTERS.reset()
    async with Rypsok(make_config(engine_config("alpha")), engines=[FakeEngine("alpha")]) as rypsok:
        for params in ({"max_results": 0}, {"category": "nope"}, {"query": ""}):
            with pytest.raises(ToolError):
                await rypsok.search(SearchRequest(**{"query": "q", **params}))  # type: ignore[arg-type]
        with pytest.raises(ToolError):
            await rypsok.search(SearchRequest(query="ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"))
    assert COUNTERS.snapshot()["tools"] == {
        "web_search": {"invalid_request": 3, "secret_in_query": 1}
    }


async def test_req_obs_005_every_call_logs_one_call_event_with_its_request_id() -> None:
    with capture_logs() as logs:
        async with Rypsok(
            make_config(engine_config("alpha")), engines=[FakeEngine("alpha", results("a", 2))]
        ) as rypsok:
            await rypsok.search_as("ops", SearchRequest(query="secret words"))
            await rypsok.status_as("ops")
    calls = logs.named("call")
    assert [(c["tool"], c["outcome"], c["caller"]) for c in calls] == [
        ("web_search", "ok", "ops"),
        ("engine_status", "ok", "ops"),
    ]
    assert calls[0]["request_id"] != calls[1]["request_id"]
    assert all(isinstance(c["latency_ms"], int) for c in calls)
    assert "secret words" not in logs.text


async def test_req_status_001_status_lists_every_engine_in_identifier_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = Config(
        engines=(
            engine_config("zeta"),
            EngineConfig(
                id="brave",
                type="brave",
                categories=(Category.GENERAL,),
                api_key_env="BRAVE_API_KEY",
            ),
            EngineConfig(id="off", type="wikipedia", categories=(Category.GENERAL,), enabled=False),
        )
    )
    async with Rypsok(config, env={}, engines=[FakeEngine("zeta", results("z", 1))]) as rypsok:
        await rypsok.search(SearchRequest(query="rust"))
        status = await rypsok.status()
        assert rypsok.served_categories == (Category.GENERAL,)
    assert status.to_json()["engines"] == [
        {"id": "brave", "state": "disabled", "latency_ms": None, "reason": "no_credential"},
        {"id": "off", "state": "disabled", "latency_ms": None, "reason": "disabled"},
        {"id": "zeta", "state": "closed", "latency_ms": 0},
    ]


async def test_req_arch_007_a_given_engine_replaces_the_driver_but_not_the_rules() -> None:
    config = make_config(
        engine_config("alpha"),
        EngineConfig(id="off", type="wikipedia", categories=(Category.NEWS,), enabled=False),
    )
    off = FakeEngine("off", results("o", 1))
    async with Rypsok(config, engines=[FakeEngine("alpha", results("a", 1)), off]) as rypsok:
        assert rypsok.served_categories == (Category.GENERAL,)  # the operator's switch wins
        with pytest.raises(ToolError) as caught:
            await rypsok.search(SearchRequest(query="rust", category="news"))
    assert caught.value.detail.allowed == ("general",)
    assert off.queries == []
    with pytest.raises(ValueError, match="no \\[engines"):
        Rypsok(config, engines=[FakeEngine("unknown")])


def test_req_sec_021_the_strict_mode_set_is_bounded_and_forgets_the_oldest() -> None:
    urls = ReturnedUrls(3)
    urls.add(["a", "b", "c"])
    urls.add(["a"])  # returned again: young again
    urls.add(["d"])
    assert len(urls) == 3
    assert "b" not in urls
    assert all(u in urls for u in ("a", "c", "d"))


async def test_req_arch_007_properties_the_protocol_layer_reads() -> None:
    config = make_config(engine_config("alpha"), search={"languages": ("en", "fi")})
    async with Rypsok(config, engines=[FakeEngine("alpha")]) as rypsok:
        assert rypsok.config is config
        assert rypsok.languages == ("en", "fi")
        assert rypsok.served_categories == (Category.GENERAL,)


MEDIAWIKI_ANSWER = {
    "batchcomplete": "",
    "query": {
        "searchinfo": {"totalhits": 2},
        "search": [
            {
                "ns": 0,
                "title": "Rust (programming language)",
                "pageid": 1,
                "snippet": '<span class="searchmatch">Rust</span> is a general-purpose '
                "programming language &amp; more",
                "timestamp": "2026-09-01T10:00:00Z",
            },
            {
                "ns": 0,
                "title": "Rust & Bone",
                "pageid": 2,
                "snippet": '<span class="searchmatch">Rust</span> and Bone is a film',
                "timestamp": "2026-07-19T08:00:00Z",
            },
        ],
    },
}


async def test_req_search_001_end_to_end_through_the_wikipedia_driver() -> None:
    async with serve_http({"/w/api.php": Reply.json(MEDIAWIKI_ANSWER)}) as server:
        config = make_config(
            EngineConfig(
                id="wiki",
                type="wikipedia",
                categories=(Category.GENERAL,),
                base_url=f"{server.url}/w",
            ),
            search={"deadline_ms": 2500, "engine_timeout_ms": 2000},
        )
        async with Rypsok(config, env={}) as rypsok:
            response = await rypsok.search(SearchRequest(query="rust programming", max_results=5))
    assert response.outcome is Outcome.OK
    body = response.to_json()
    assert [r["title"] for r in body["results"]] == ["Rust (programming language)", "Rust & Bone"]
    assert body["results"][0]["snippet"] == "Rust is a general-purpose programming language & more"
    assert body["results"][0]["date"] == "2026-09-01"
    assert all(r["url"].startswith(f"{server.url}/w/index.php?title=") for r in body["results"])
    assert "engines" not in body["results"][0]
    assert server.requests[0].param("srsearch") == "rust programming"
    json.dumps(body)  # the response is plain JSON


async def test_req_status_002_status_carries_no_endpoint_credential_or_provider_text(
    autojump_clock: trio.testing.MockClock,
) -> None:
    key = "brave-key-" + "k" * 30
    config = Config(
        engines=(
            EngineConfig(
                id="wiki",
                type="wikipedia",
                categories=(Category.GENERAL,),
                base_url="https://private-wiki.example/w",
            ),
            EngineConfig(
                id="brave",
                type="brave",
                categories=(Category.GENERAL,),
                api_key_env="BRAVE_API_KEY",
            ),
        )
    )
    failing = FakeEngine("wiki", error=RuntimeError("upstream said <html>oops</html>"))
    also_failing = FakeEngine("brave", failure=Reason.AUTH_FAILURE)
    # Both drivers are replaced, and the transport refuses every origin: nothing leaves.
    async with Rypsok(
        config,
        env={"BRAVE_API_KEY": key},
        engine_transport=RoutingTransport({}),
        engines=[failing, also_failing],
    ) as rypsok:
        with pytest.raises(ToolError):
            await rypsok.search(SearchRequest(query="rust", category="general"))
        text = json.dumps((await rypsok.status()).to_json())
    for leak in (key, "private-wiki", "api.search.brave.com", "upstream", "oops", "BRAVE_API_KEY"):
        assert leak not in text
    assert json.loads(text)["engines"] == [
        {"id": "brave", "state": "closed", "latency_ms": 0},
        {"id": "wiki", "state": "closed", "latency_ms": 0},
    ]


async def test_req_obs_002_engine_latency_is_recorded_for_completed_requests_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    engine = FakeEngine("alpha", results("a", 1), delay_s=0.18)
    config = make_config(engine_config("alpha"), search={"engine_timeout_ms": 1000})
    async with Rypsok(config, engines=[engine]) as rypsok:
        await rypsok.search(SearchRequest(query="rust"))
        engine.delay_s = 5.0  # cut by the engine timeout: no latency to record
        with pytest.raises(ToolError):
            await rypsok.search(SearchRequest(query="rust"))
        status = await rypsok.status()
    assert status.engines[0].latency_ms == 180


class _ForgetfulEngine:
    """A driver like the real ones: it keeps nothing of a query after answering."""

    def __init__(self, engine_id: str) -> None:
        self._engine = FakeEngine(engine_id)

    @property
    def id(self) -> str:
        return self._engine.id

    @property
    def record(self) -> AdmissionRecord:
        return self._engine.record

    async def search(self, query: EngineQuery) -> EngineAnswer:
        words = query.query.split()
        return EngineAnswer(
            results=(
                RawResult(
                    title=f"About {words[0]}",
                    url=f"https://example.org/{'-'.join(words)}",
                    snippet=" ".join(words),
                ),
            )
        )


def _strings_reachable_from(root: object, limit: int = 200_000) -> list[str]:
    seen: set[int] = set()
    found: list[str] = []
    stack = [root]
    while stack and len(seen) < limit:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen.add(id(obj))
        if isinstance(obj, str):
            found.append(obj)
            continue
        stack.extend(gc.get_referents(obj))
    return found


async def test_req_priv_003_nothing_of_a_call_is_kept_beyond_it_but_the_returned_urls() -> None:
    phrase = "".join(["zq", "unusual", "xw"])  # built at run time: no constant holds it
    config = make_config(engine_config("alpha"))
    async with Rypsok(config, engines=[_ForgetfulEngine("alpha")]) as rypsok:
        response = await rypsok.search(SearchRequest(query=f"{phrase} words"))
        url = response.results[0].url
        del response
        kept = [s for s in _strings_reachable_from(rypsok) if phrase in s]
        assert rypsok.was_returned(url)
    # Only the strict-mode memory of returned URLs holds anything of the call (LIM-F14).
    assert kept == [url]
