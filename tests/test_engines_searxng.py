"""The SearXNG driver against a local server replaying a SearXNG JSON answer."""

from __future__ import annotations

from typing import Any

import pytest
from keyless_fakes import COMMON_STATUSES, ask, json_reply, outcome_of, query, recorded_json
from search_fakes import FakeEngine, engine_config, make_config

from rypsok.core.engines.base import EngineAnswer, RawResult
from rypsok.core.engines.searxng import SEARXNG_CATEGORIES, SEARXNG_RECORD, SearxngEngine
from rypsok.core.model import Category, NoticeCode, Outcome, SearchRequest
from rypsok.core.services import Rypsok
from rypsok.core.telemetry import Secret
from testkit.servers import Reply

ANSWER = "searxng/search-format=json.assembled.json"


async def _search(
    reply: Reply, *, category: Category = Category.GENERAL, key: Secret | None = None
) -> tuple[Any, list[Any]]:
    return await ask(
        {"/sx/search": reply},
        lambda http, url: SearxngEngine("sx", http, f"{url}/sx", key),
        query("why is the sky blue", category=category),
    )


async def test_req_test_002_searxng_answer_parses_and_counts_unresponsive_sources() -> None:
    answer, requests = await _search(json_reply(recorded_json(ANSWER)))
    assert [(r.title, r.url) for r in answer.results] == [
        ("Why Is the Sky Blue?", "https://www.spectroscopyonline.com/view/why-sky-blue")
    ]
    assert answer.unresponsive == 2
    assert dict(requests[0].query) == {
        "q": "why is the sky blue",
        "format": "json",
        "categories": "general",
        "language": "en",
        "safesearch": "1",
        "pageno": "1",
    }
    assert requests[0].header("authorization") is None


@pytest.mark.parametrize("category", list(Category))
async def test_req_search_004_searxng_categories_are_mapped(category: Category) -> None:
    _, requests = await _search(json_reply(recorded_json(ANSWER)), category=category)
    assert requests[0].param("categories") == SEARXNG_CATEGORIES[category]
    assert SEARXNG_CATEGORIES[Category.CODE] == "it"


async def test_req_sec_017_the_credential_goes_in_one_header() -> None:
    _, requests = await _search(json_reply(recorded_json(ANSWER)), key=Secret("t0ken"))
    assert requests[0].header("authorization") == "Bearer t0ken"
    assert "t0ken" not in requests[0].target


@pytest.mark.parametrize(
    ("reply", "failure", "wait"),
    [
        *COMMON_STATUSES,
        (Reply(status=403), "blocked", None),  # JSON not enabled on the instance
        (Reply(status=401), "auth_failure", None),
    ],
)
async def test_req_eng_006_searxng_classifies_each_failure(
    reply: Reply, failure: str, wait: float | None
) -> None:
    assert await outcome_of(_search, reply) == (failure, wait)


@pytest.mark.parametrize(
    "payload",
    [{"results": {}}, {"results": [{"title": "t"}]}, {"results": [], "unresponsive_engines": 3}],
)
async def test_req_eng_006_searxng_drifted_format_is_a_parse_failure(payload: object) -> None:
    assert await outcome_of(_search, json_reply(payload)) == ("parse_failure", None)


def test_req_sec_017_searxng_base_url_off_loopback_needs_https() -> None:
    from rypsok.core.engines.client import EngineClient

    with pytest.raises(ValueError, match="loopback"):
        SearxngEngine("sx", EngineClient(), "http://search.example.org")
    SearxngEngine("sx", EngineClient(), "https://search.internal.example")


async def test_req_search_006_unresponsive_sources_become_a_notice_without_their_names() -> None:
    answer = EngineAnswer(
        results=(RawResult(title="t", url="https://a.example/1", snippet="s"),), unresponsive=2
    )
    engine = FakeEngine("sx", answer, raw_answer=True)
    async with Rypsok(make_config(engine_config("sx")), engines=[engine]) as rypsok:
        response = await rypsok.search(SearchRequest(query="sky"))
    assert response.outcome is Outcome.PARTIAL
    notices = [n for n in response.notices if n.code is NoticeCode.ENGINE_UNAVAILABLE]
    assert [n.to_json() for n in notices] == [
        {"code": "engine_unavailable", "engine": "sx", "count": 2}
    ]


def test_req_eng_010_searxng_record() -> None:
    r = SEARXNG_RECORD
    assert (r.rate_per_minute, r.burst, r.concurrency) == (60, 5, 2)
    assert not r.cacheable
    assert r.languages_all
