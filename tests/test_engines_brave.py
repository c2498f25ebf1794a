"""The Brave driver against a local server, through the engines' production stack (TLS).

tests/fixtures/brave-web-search.json is trimmed from a real web-search capture and
brave-news-search.json is Brave's documented news example (see tests/fixtures/engines.md).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
import trio
from provider_network import ProviderNetwork, tls_for
from search_fakes import make_config

from rypsok.config.schema import EngineConfig
from rypsok.core.engines.base import EngineFailure, EngineQuery
from rypsok.core.engines.brave import BRAVE_RECORD, BraveEngine, parse_rate_limit_reset
from rypsok.core.engines.client import EngineClient
from rypsok.core.model import (
    Category,
    DetailReason,
    Reason,
    SafeSearch,
    SearchRequest,
    TimeRange,
    ToolError,
)
from rypsok.core.services import Rypsok
from testkit.servers import LocalHttpServer, Reply, serve_http

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

FIXTURES = Path(__file__).parent / "fixtures"
KEY = "BSA-test-key-0123456789"


def _fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _query(
    text: str = "brave search",
    *,
    count: int = 10,
    time_range: TimeRange | None = None,
    language: str = "en",
    safe: SafeSearch = SafeSearch.MODERATE,
) -> EngineQuery:
    return EngineQuery(
        query=text,
        category=Category.GENERAL,
        language=language,
        region="US",
        safe_search=safe,
        time_range=time_range,
        count=count,
    )


BRAVE = "api.search.brave.com"


@asynccontextmanager
async def _brave(
    reply: Reply, endpoint: str = "web", **http_options: int
) -> AsyncIterator[tuple[BraveEngine, LocalHttpServer]]:
    path = f"/res/v1/{endpoint}/search"
    async with serve_http({path: reply}, tls=tls_for(BRAVE)) as server:
        network = ProviderNetwork({BRAVE: server})
        async with EngineClient(**network.http_options(), **http_options) as http:
            yield BraveEngine("brave", http, KEY, endpoint), server


async def test_req_test_002_brave_web_success() -> None:
    async with _brave(Reply(body=_fixture("brave-web-search.json"))) as (engine, server):
        answer = await engine.search(_query())
    assert len(answer.results) == 5
    first = answer.results[0]
    assert first.title == "Private Search Engine - Brave Search"
    assert first.url == "https://search.brave.com/"
    assert first.snippet.startswith("<strong>Brave</strong> <strong>Search</strong> doesn’t")
    assert first.date == "2023-04-27"
    assert first.decoded is False
    assert "&#x27;" in answer.results[3].snippet  # entities stay for the boundary
    assert answer.results[4].date is None  # no page_age in that result
    request = server.requests[0]
    assert request.header("host") == "api.search.brave.com"
    assert request.header("x-subscription-token") == KEY
    assert request.header("accept") == "application/json"
    assert dict(request.query) == {
        "q": "brave search",
        "count": "10",
        "search_lang": "en",
        "country": "US",
        "safesearch": "moderate",
    }


async def test_req_test_002_brave_news_success() -> None:
    reply = Reply(body=_fixture("brave-news-search.json"))
    async with _brave(reply, "news") as (engine, server):
        answer = await engine.search(_query("space exploration", time_range=TimeRange.WEEK))
    assert [(r.title, r.url, r.date) for r in answer.results] == [
        (
            "New Developments in Space Exploration",
            "https://news.example.com/space-exploration",
            "2026-01-15",
        )
    ]
    assert server.requests[0].path == "/res/v1/news/search"
    assert server.requests[0].param("freshness") == "pw"


@pytest.mark.parametrize("endpoint", ["web", "news"])
async def test_req_test_002_brave_empty(endpoint: str) -> None:
    async with _brave(Reply(body=_fixture("brave-web-empty.json")), endpoint) as (engine, _):
        answer = await engine.search(_query())
    assert answer.results == ()


@pytest.mark.parametrize(
    ("time_range", "freshness"),
    [
        (TimeRange.DAY, "pd"),
        (TimeRange.WEEK, "pw"),
        (TimeRange.MONTH, "pm"),
        (TimeRange.YEAR, "py"),
    ],
)
async def test_req_search_005_brave_freshness_from_the_time_range(
    time_range: TimeRange, freshness: str
) -> None:
    async with _brave(Reply(body=_fixture("brave-web-empty.json"))) as (engine, server):
        await engine.search(_query(time_range=time_range))
    assert server.requests[0].param("freshness") == freshness


async def test_req_eng_011_brave_count_is_capped_at_twenty_and_language_is_the_subtag() -> None:
    async with _brave(Reply(body=_fixture("brave-web-empty.json"))) as (engine, server):
        await engine.search(_query(count=20, language="pt-BR", safe=SafeSearch.STRICT))
        await engine.search(_query(count=25, safe=SafeSearch.OFF))
        await engine.search(_query(count=5))
    assert [r.param("count") for r in server.requests] == ["20", "20", "5"]
    assert server.requests[0].param("search_lang") == "pt"
    assert [r.param("safesearch") for r in server.requests] == ["strict", "off", "moderate"]


@pytest.mark.parametrize(
    ("reply", "failure_class", "retry_after"),
    [
        (Reply(status=429, headers=(("Retry-After", "3"),)), Reason.RATE_LIMITED, 3),
        (
            Reply(
                status=429,
                headers=(("X-RateLimit-Reset", "1, 1419704"), ("X-RateLimit-Remaining", "0, 9")),
            ),
            Reason.RATE_LIMITED,
            1,
        ),
        (Reply(status=429), Reason.RATE_LIMITED, None),
        (Reply(status=401), Reason.AUTH_FAILURE, None),
        (Reply(status=403), Reason.AUTH_FAILURE, None),
        (Reply(status=422, body=_fixture("brave-error.json")), Reason.REQUEST_FAILURE, None),
        (Reply(status=500), Reason.REQUEST_FAILURE, None),
        (
            Reply(status=302, headers=(("Location", "https://example.org/"),)),
            Reason.REQUEST_FAILURE,
            None,
        ),
        (Reply(body=b"not json"), Reason.PARSE_FAILURE, None),
        (Reply(body=b'{"web": {"results": {"a": 1}}}'), Reason.PARSE_FAILURE, None),
        (Reply(body=b'{"web": {"results": [{"title": "no url"}]}}'), Reason.PARSE_FAILURE, None),
        (Reply(body=b'{"web": []}'), Reason.PARSE_FAILURE, None),
        (Reply(body=b"[]"), Reason.PARSE_FAILURE, None),
    ],
)
async def test_req_eng_006_brave_classifies_each_failure(
    reply: Reply, failure_class: Reason, retry_after: float | None
) -> None:
    async with _brave(reply) as (engine, _):
        with pytest.raises(EngineFailure) as caught:
            await engine.search(_query())
    assert caught.value.failure_class is failure_class
    assert caught.value.retry_after_s == retry_after


async def test_req_test_002_brave_timeout() -> None:
    # LIM-S5 is the aggregator's scope around the driver: through the facade, the slow
    # provider ends as a timeout at engine_timeout_ms, long before the fan-out's own cut.
    reply = Reply(body=b"{}", delay_s=5)
    async with serve_http({"/res/v1/web/search": reply}, tls=tls_for(BRAVE)) as server:
        config = make_config(
            EngineConfig(id="brave", type="brave", categories=(Category.GENERAL,), api_key_env="K"),
            search={"engine_timeout_ms": 100},
        )
        network = ProviderNetwork({BRAVE: server})
        async with Rypsok(config, env={"K": KEY}, engine_network=network.engine_network) as r:
            start = trio.current_time()
            with pytest.raises(ToolError) as caught:
                await r.search(SearchRequest(query="rust"))
            elapsed = trio.current_time() - start
    assert caught.value.detail.reason is DetailReason.DEADLINE  # the one engine timed out
    assert elapsed < 1.5  # the fan-out would cut at 2.3 s


async def test_req_test_015_the_token_never_reaches_another_origin() -> None:
    async with serve_http(default=Reply(body=b"{}")) as other:
        redirect = Reply(status=307, headers=(("Location", f"{other.url}/steal"),))
        async with serve_http({"/res/v1/web/search": redirect}, tls=tls_for(BRAVE)) as brave:
            network = ProviderNetwork({BRAVE: brave})
            async with EngineClient(**network.http_options()) as http:
                with pytest.raises(EngineFailure) as caught:
                    await BraveEngine("brave", http, KEY).search(_query())
    assert caught.value.failure_class is Reason.REQUEST_FAILURE
    assert other.requests == []
    assert network.hosts_dialled == [BRAVE]
    assert brave.requests[0].header("x-subscription-token") == KEY


async def test_req_test_015_brave_requests_use_https() -> None:
    # The server speaks TLS alone: a request in clear would never be read as one.
    async with serve_http({"/res/v1/web/search": Reply(body=b"{}")}, tls=tls_for(BRAVE)) as server:
        network = ProviderNetwork({BRAVE: server})
        async with EngineClient(**network.http_options()) as http:
            await BraveEngine("brave", http, KEY, "web").search(_query())
    assert network.hosts_dialled == [BRAVE]
    assert [r.header("host") for r in server.requests] == [BRAVE]


async def test_req_eng_010_brave_query_limits_are_checked_before_the_request() -> None:
    async with _brave(Reply(body=_fixture("brave-web-empty.json"))) as (engine, server):
        for text in ("a" * 601, " ".join(["w"] * 76)):
            with pytest.raises(EngineFailure):
                await engine.search(_query(text))
        await engine.search(_query(" ".join(["w"] * 75)))
    assert len(server.requests) == 1


def test_req_eng_010_brave_record() -> None:
    record = BRAVE_RECORD
    assert (record.rate_per_minute, record.burst, record.concurrency) == (60, 1, 2)
    assert (record.max_query_chars, record.max_query_words) == (600, 75)
    assert record.time_ranges == frozenset(TimeRange)
    assert not record.cacheable
    assert not record.attribution_required
    assert record.needs_credential
    assert not record.scrapes
    assert record.response_max_bytes == 1024 * 1024


def test_req_sec_010_the_key_is_not_in_the_engines_repr() -> None:
    engine = BraveEngine("brave", EngineClient(), KEY, "news")
    assert KEY not in repr(engine)
    assert KEY not in str(engine)


def test_req_res_002_x_ratelimit_reset_picks_the_spent_window() -> None:
    def h(**values: str) -> httpx.Headers:
        return httpx.Headers({k.replace("_", "-"): v for k, v in values.items()})

    assert parse_rate_limit_reset(h(X_RateLimit_Reset="1, 1419704")) == 1
    spent_month = h(X_RateLimit_Reset="1, 1419704", X_RateLimit_Remaining="1, 0")
    assert parse_rate_limit_reset(spent_month) == 1419704
    both = h(X_RateLimit_Reset="1, 500", X_RateLimit_Remaining="0, 0")
    assert parse_rate_limit_reset(both) == 500
    assert parse_rate_limit_reset(h(X_RateLimit_Reset="soon")) is None
    assert parse_rate_limit_reset(h()) is None


def test_req_eng_001_endpoint_is_web_or_news() -> None:
    with pytest.raises(ValueError, match="endpoint"):
        BraveEngine("brave", EngineClient(), KEY, "images")


@pytest.mark.parametrize(
    ("headers", "retry_after"),
    [
        ((("Retry-After", "Wed, 02 Dec 99999999999999999999 10:00:00 GMT"),), None),
        ((("Retry-After", "Wed, 02 Dec 2026 10:00:00 +99999999999999999999"),), None),
        (
            (
                ("Retry-After", "Wed, 02 Dec 2020 10:00:00 GMT"),
                ("Date", "Wed, 02 Dec 99999999999999999999 10:00:00 GMT"),
            ),
            0,
        ),
    ],
)
async def test_req_res_002_a_retry_after_past_any_calendar_is_a_rate_limit_all_the_same(
    headers: tuple[tuple[str, str], ...], retry_after: float | None
) -> None:
    # A date whose year or offset no calendar holds is a date that cannot be read: the 429
    # is still the rate limit it is (with no wait, or the wait measured on this host's
    # clock when only the provider's Date is unreadable), never a driver's exception.
    async with _brave(Reply(status=429, headers=headers)) as (engine, _):
        with pytest.raises(EngineFailure) as caught:
            await engine.search(_query())
    assert caught.value.failure_class is Reason.RATE_LIMITED
    assert caught.value.retry_after_s == retry_after
