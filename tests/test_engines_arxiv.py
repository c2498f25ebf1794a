"""The arXiv driver against a local server replaying recorded Atom feeds."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import trio
import trio.testing
from keyless_fakes import COMMON_STATUSES, ask, outcome_of, query, recorded

from rypsok.config.messages import ConfigError
from rypsok.core.engines.arxiv import ARXIV_RECORD, ArxivEngine, parse_feed
from rypsok.core.engines.base import EngineFailure
from rypsok.core.model import Category, Reason
from rypsok.core.pacing import EngineLimiter
from testkit.servers import Reply

CAPTURE = "arxiv/query-au=gariazzo.real-capture.xml"
EMPTY = "arxiv/query-empty.real-capture-2025.xml"
ATOM = (("Content-Type", "application/atom+xml; charset=utf-8"),)


async def _search(reply: Reply) -> tuple[Any, list[Any]]:
    return await ask(
        {"/api/query": reply},
        lambda http, url: ArxivEngine("arxiv", http, base_url=f"{url}/api"),
        query("dark radiation", category=Category.SCIENCE),
    )


async def test_req_test_002_arxiv_recorded_feed_parses() -> None:
    answer, requests = await _search(Reply(headers=ATOM, body=recorded(CAPTURE)))
    assert [r.url for r in answer.results] == [
        "http://arxiv.org/abs/1510.05980v1",
        "http://arxiv.org/abs/1602.05902v1",
    ]
    assert answer.results[0].title == "Dark Radiation and Inflationary Freedom"
    assert answer.results[0].snippet == "test1"  # the wrapped abstract, folded
    assert answer.results[0].date == "2015-10-20"
    assert dict(requests[0].query) == {
        "search_query": "all:dark radiation",
        "start": "0",
        "max_results": "10",
        "sortBy": "relevance",
    }


async def test_req_test_002_arxiv_2025_empty_feed_is_no_results() -> None:
    answer, _ = await _search(Reply(headers=ATOM, body=recorded(EMPTY)))
    assert answer.results == ()


def test_req_eng_006_arxiv_error_entry_is_a_request_failure() -> None:
    # The API's documented error form: a feed whose one entry has an id under /api/errors.
    feed = recorded(EMPTY).replace(
        b"</feed>",
        b"<entry><id>http://arxiv.org/api/errors#incorrect_id_format_for_1234.12345</id>"
        b"<title>Error</title><summary>incorrect id format for 1234.12345</summary>"
        b"<updated>2025-11-11T00:00:00Z</updated></entry></feed>",
    )
    with pytest.raises(EngineFailure) as caught:
        parse_feed(feed)
    assert caught.value.failure_class is Reason.REQUEST_FAILURE


@pytest.mark.parametrize(
    ("reply", "failure", "wait"),
    [
        *COMMON_STATUSES,
        (Reply(status=503, body=b"Rate exceeded."), "rate_limited", None),
        (Reply(body=b"Rate exceeded."), "parse_failure", None),
    ],
)
async def test_req_eng_006_arxiv_classifies_each_failure(
    reply: Reply, failure: str, wait: float | None
) -> None:
    assert await outcome_of(_search, reply) == (failure, wait)


@pytest.mark.parametrize(
    "body",
    [
        b'<?xml version="1.0"?><rss><channel/></rss>',  # another format
        b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><id>x</id></entry></feed>',  # no title
        # An entity expansion: a DTD has no place in a feed; it is refused before any grows.
        b'<?xml version="1.0"?><!DOCTYPE f [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;'
        b'&a;&a;&a;&a;&a;&a;">]><feed xmlns="http://www.w3.org/2005/Atom"><entry><id>i</id>'
        b"<title>&b;</title></entry></feed>",
        # An external entity: refused with its DTD, never fetched, never read from disk.
        b'<?xml version="1.0"?><!DOCTYPE f [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><id>i</id><title>&x;</title>'
        b"</entry></feed>",
        b"<feed" + b"<a>" * 300,
    ],
)
def test_req_sec_014_arxiv_hostile_or_drifted_feed_is_a_parse_failure(body: bytes) -> None:
    with pytest.raises(EngineFailure) as caught:
        parse_feed(body)
    assert caught.value.failure_class is Reason.PARSE_FAILURE


def test_req_sec_014_arxiv_feed_nested_past_the_depth_bound_is_a_parse_failure() -> None:
    body = b'<feed xmlns="http://www.w3.org/2005/Atom">' + b"<x>" * 300 + b"</x>" * 300 + b"</feed>"
    with pytest.raises(EngineFailure) as caught:
        parse_feed(body)
    assert caught.value.failure_class is Reason.PARSE_FAILURE


async def test_req_cmp_002_arxiv_admission_spaces_requests_three_seconds_apart(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The limiter the registry builds for the record, with the most generous LIM-C2.
    limiter = EngineLimiter(ARXIV_RECORD, per_engine_in_flight=8)
    assert limiter.concurrency == 1
    starts: list[float] = []

    async def one() -> None:
        assert await limiter.admit(float("inf"))
        async with limiter.slot():
            starts.append(trio.current_time())
            await trio.sleep(0.5)

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(one)
    starts.sort()
    assert all(b - a >= 3 for a, b in itertools.pairwise(starts))


def test_req_cmp_002_a_second_enabled_arxiv_engine_is_refused() -> None:
    from rypsok.config.load import load_config_text

    text = (
        "config_version = 1\n"
        '[engines.arxiv]\ntype = "arxiv"\ncategories = ["science"]\n'
        '[engines.arxiv2]\ntype = "arxiv"\ncategories = ["science"]\n'
    )
    with pytest.raises(ConfigError, match="only one arxiv engine"):
        load_config_text(text, {})


def test_req_eng_010_arxiv_record() -> None:
    r = ARXIV_RECORD
    assert (r.rate_per_minute, r.burst, r.concurrency) == (20, 1, 1)
    assert r.interval_s == 3
    assert r.time_ranges == frozenset()
    assert r.cacheable
