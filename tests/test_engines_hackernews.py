"""The Hacker News driver against a local server replaying a recorded Algolia answer."""

from __future__ import annotations

from typing import Any

import pytest
from keyless_fakes import (
    COMMON_STATUSES,
    ask,
    json_reply,
    outcome_of,
    query,
    recorded,
    recorded_json,
)

from rypsok.core.engines.base import EngineFailure
from rypsok.core.engines.hackernews import HACKERNEWS_RECORD, HackerNewsEngine
from rypsok.core.model import Category, Reason, TimeRange
from testkit.servers import Reply

CAPTURE = "hackernews/search-query=javascript.real-capture.json"


async def _search(reply: Reply, **kwargs: Any) -> tuple[Any, list[Any]]:
    return await ask(
        {"/api/v1/search": reply},
        lambda http, url: HackerNewsEngine("hn", http, base_url=f"{url}/api/v1"),
        query("javascript", category=Category.NEWS, **kwargs),
    )


async def test_req_test_002_hackernews_recorded_answer_parses() -> None:
    answer, requests = await _search(Reply(body=recorded(CAPTURE)))
    results = answer.results
    assert [r.title for r in results][:2] == [
        "Yarn – A new package manager for JavaScript",
        "A spreadsheet in fewer than 30 lines of JavaScript, no library used",
    ]
    assert results[0].url == "https://code.facebook.com/posts/1840075619545360"
    assert results[0].date == "2016-10-11"
    assert len(results) == 5
    request = requests[0]
    assert dict(request.query) == {
        "query": "javascript",
        "tags": "story",
        "hitsPerPage": "10",
    }


async def test_req_eng_012_a_story_without_url_links_to_its_discussion() -> None:
    payload = recorded_json(CAPTURE)
    del payload["hits"][1]["url"]
    payload["hits"][2]["url"] = None
    answer, _ = await _search(json_reply(payload))
    urls = [r.url for r in answer.results]
    assert urls[1] == "https://news.ycombinator.com/item?id=6725387"
    assert urls[2] == "https://news.ycombinator.com/item?id=3824908"


async def test_req_search_005_hackernews_time_range_is_a_numeric_filter() -> None:
    _, requests = await _search(Reply(body=recorded(CAPTURE)), time_range=TimeRange.DAY)
    value = requests[0].param("numericFilters")
    assert value is not None
    assert value.startswith("created_at_i>")


@pytest.mark.parametrize(("reply", "failure", "wait"), COMMON_STATUSES)
async def test_req_eng_006_hackernews_classifies_each_failure(
    reply: Reply, failure: str, wait: float | None
) -> None:
    assert await outcome_of(_search, reply) == (failure, wait)


@pytest.mark.parametrize(
    "payload",
    [
        {"hits": {"not": "a list"}},
        {"hits": [{"url": "https://a.example/", "objectID": "1"}]},  # the title is gone
        {"hits": [{"title": "t", "objectID": "../x"}]},  # no URL and no usable id
        {"results": []},  # the list moved
    ],
)
async def test_req_eng_006_hackernews_drifted_format_is_a_parse_failure(payload: object) -> None:
    assert await outcome_of(_search, json_reply(payload)) == ("parse_failure", None)


async def test_req_sec_010_hackernews_answer_above_the_bound_is_a_parse_failure() -> None:
    big = {"hits": [], "pad": "x" * (HACKERNEWS_RECORD.response_max_bytes + 1)}
    with pytest.raises(EngineFailure) as caught:
        await _search(json_reply(big, gzipped=True))
    assert caught.value.failure_class is Reason.PARSE_FAILURE


def test_req_eng_010_hackernews_record() -> None:
    r = HACKERNEWS_RECORD
    assert (r.rate_per_minute, r.burst, r.concurrency) == (60, 5, 2)
    assert not r.cacheable
    assert not r.attribution_required
    assert not r.needs_credential
    assert r.time_ranges == frozenset(TimeRange)
    assert not r.languages_all
