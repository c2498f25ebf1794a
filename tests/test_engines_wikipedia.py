"""The Wikipedia driver against local servers that answer in MediaWiki's shapes.

The fixtures in tests/fixtures/wikipedia-*.json are derived from real list=search answers
(see tests/fixtures/engines.md): snippets keep MediaWiki's markup and entities.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from provider_network import ProviderNetwork, tls_for
from search_fakes import engine_config, make_config

from rypsok.core.engines.base import EngineFailure, EngineQuery
from rypsok.core.engines.client import EngineClient
from rypsok.core.engines.wikipedia import WIKIPEDIA_RECORD, WikipediaEngine, article_path
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
from testkit.servers import LocalHttpServer, RecordedRequest, Reply, serve_http

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

FIXTURES = Path(__file__).parent / "fixtures"


def _fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _query(text: str = "rust", *, language: str = "en", count: int = 10) -> EngineQuery:
    return EngineQuery(
        query=text,
        category=Category.GENERAL,
        language=language,
        region="US",
        safe_search=SafeSearch.MODERATE,
        time_range=None,
        count=count,
    )


@asynccontextmanager
async def _wikipedia(
    reply: Reply, *, host: str = "en.wikipedia.org"
) -> AsyncIterator[tuple[WikipediaEngine, LocalHttpServer]]:
    async with serve_http({"/w/api.php": reply}, tls=tls_for(host)) as server:
        network = ProviderNetwork({host: server})
        async with EngineClient(**network.http_options(), contact="ops@example.org") as http:
            yield WikipediaEngine("wikipedia", http, None), server


async def test_req_test_002_wikipedia_success_parses_titles_urls_snippets_and_dates() -> None:
    async with _wikipedia(Reply(body=_fixture("wikipedia-search-rust.json"))) as (engine, server):
        answer = await engine.search(_query("rust programming language"))
    titles = [r.title for r in answer.results]
    assert titles == [
        "Rust (programming language)",
        "Rust & Bone",
        "Café Überfluss/100% (Ä?#)",
        "Rust",
    ]
    urls = [r.url for r in answer.results]
    assert urls[0] == "https://en.wikipedia.org/wiki/Rust_(programming_language)"
    assert urls[1] == "https://en.wikipedia.org/wiki/Rust_&_Bone"
    assert urls[2] == "https://en.wikipedia.org/wiki/Caf%C3%A9_%C3%9Cberfluss/100%25_(%C3%84%3F%23)"
    assert [r.date for r in answer.results] == ["2022-04-14", "2026-07-19", None, "2022-04-18"]
    # REQ-ENG-012: raw text; markup and entities are the boundary's to remove.
    assert answer.results[1].snippet.startswith('<span class="searchmatch">Rust</span> and Bone')
    assert "d&#039;os" in answer.results[1].snippet
    assert all(r.decoded is False for r in answer.results)
    request = server.requests[0]
    assert request.path == "/w/api.php"
    assert request.header("host") == "en.wikipedia.org"
    assert dict(request.query) == {
        "action": "query",
        "list": "search",
        "srsearch": "rust programming language",
        "srlimit": "10",
        "srprop": "snippet|timestamp",
        "format": "json",
        "formatversion": "2",
    }


async def test_req_test_002_wikipedia_empty_answer_is_no_results() -> None:
    async with _wikipedia(Reply(body=_fixture("wikipedia-search-empty.json"))) as (engine, _):
        answer = await engine.search(_query())
    assert answer.results == ()


async def test_req_eng_011_wikipedia_asks_for_the_requested_count() -> None:
    async with _wikipedia(Reply(body=_fixture("wikipedia-search-empty.json"))) as (engine, server):
        await engine.search(_query(count=7))
    assert server.requests[0].param("srlimit") == "7"


async def test_req_eng_006_wikipedia_language_edition_from_the_primary_subtag() -> None:
    body = _fixture("wikipedia-search-rust.json")
    async with _wikipedia(Reply(body=body), host="ja.wikipedia.org") as (engine, server):
        answer = await engine.search(_query(language="ja-JP"))
    assert server.requests[0].header("host") == "ja.wikipedia.org"
    assert answer.results[0].url == "https://ja.wikipedia.org/wiki/Rust_(programming_language)"


@pytest.mark.parametrize(
    ("reply", "failure_class", "retry_after"),
    [
        (Reply(status=429, headers=(("Retry-After", "12"),)), Reason.RATE_LIMITED, 12),
        (Reply(status=429), Reason.RATE_LIMITED, None),
        (Reply(status=403, body=b"bad user agent"), Reason.BLOCKED, None),
        (Reply(status=500), Reason.REQUEST_FAILURE, None),
        (Reply(status=404), Reason.REQUEST_FAILURE, None),
        (
            Reply(status=301, headers=(("Location", "https://evil.example/"),)),
            Reason.REQUEST_FAILURE,
            None,
        ),
        (Reply(body=_fixture("wikipedia-error.json")), Reason.REQUEST_FAILURE, None),
        (Reply(body=b"<html>not json</html>"), Reason.PARSE_FAILURE, None),
        (Reply(body=b'{"query": {"search": {"not": "a list"}}}'), Reason.PARSE_FAILURE, None),
        (
            Reply(body=b'{"query": {"search": [{"snippet": "no title"}]}}'),
            Reason.PARSE_FAILURE,
            None,
        ),
        (Reply(body=b'["a list"]'), Reason.PARSE_FAILURE, None),
        (Reply(body=b"{}"), Reason.PARSE_FAILURE, None),
        (Reply(body=b"\xff\xfe{}"), Reason.PARSE_FAILURE, None),
    ],
)
async def test_req_eng_006_wikipedia_classifies_each_failure(
    reply: Reply, failure_class: Reason, retry_after: float | None
) -> None:
    async with _wikipedia(reply) as (engine, _):
        with pytest.raises(EngineFailure) as caught:
            await engine.search(_query())
    assert caught.value.failure_class is failure_class
    assert caught.value.retry_after_s == retry_after


async def test_req_eng_006_no_provider_text_leaves_the_driver() -> None:
    async with _wikipedia(Reply(body=_fixture("wikipedia-error.json"))) as (engine, _):
        with pytest.raises(EngineFailure) as caught:
            await engine.search(_query())
    text = repr(caught.value) + str(caught.value) + repr(caught.value.args)
    assert "INSTRUCTIONS" not in text
    assert "cirrussearch" not in text


async def test_req_test_002_wikipedia_timeout() -> None:
    reply = Reply(body=b"{}", delay_s=5)
    async with serve_http({"/w/api.php": reply}, tls=tls_for("en.wikipedia.org")) as server:
        network = ProviderNetwork({"en.wikipedia.org": server})
        # LIM-S5 is the aggregator's scope around the driver (the facade's search).
        config = make_config(engine_config("wikipedia"), search={"engine_timeout_ms": 100})
        async with Rypsok(config, env={}, engine_network=network.engine_network) as rypsok:
            start = trio.current_time()
            with pytest.raises(ToolError) as caught:
                await rypsok.search(SearchRequest(query="rust"))
            elapsed = trio.current_time() - start
    assert caught.value.detail.reason is DetailReason.DEADLINE  # the one engine timed out
    assert elapsed < 1.5  # the fan-out would cut at 2.3 s


async def test_req_sec_017_a_loopback_mirror_over_plain_http() -> None:
    reply = Reply(body=_fixture("wikipedia-search-rust.json"))
    async with serve_http({"/mw/api.php": reply}) as server, EngineClient() as http:
        by_root = WikipediaEngine("wiki", http, f"{server.url}/mw")
        by_api = WikipediaEngine("wiki", http, f"{server.url}/mw/api.php")
        first = await by_root.search(_query())
        second = await by_api.search(_query(language="de"))
    assert [r.path for r in server.requests] == ["/mw/api.php", "/mw/api.php"]
    assert first == second  # one wiki: the language does not change the host
    assert first.results[0].url == f"{server.url}/mw/index.php?title=Rust_(programming_language)"
    assert first.results[1].url == f"{server.url}/mw/index.php?title=Rust_%26_Bone"


def test_req_sec_017_a_mirror_off_loopback_needs_https() -> None:
    http = EngineClient()
    with pytest.raises(ValueError, match="loopback"):
        WikipediaEngine("wiki", http, "http://wiki.example.org/w")
    with pytest.raises(ValueError, match="base_url"):
        WikipediaEngine("wiki", http, "https://user:pw@wiki.example.org/w")
    WikipediaEngine("wiki", http, "https://wiki.example.org/w")


async def test_req_eng_010_a_query_over_the_record_is_never_sent() -> None:
    async with _wikipedia(Reply(body=_fixture("wikipedia-search-empty.json"))) as (engine, server):
        with pytest.raises(EngineFailure):
            await engine.search(_query("a" * (WIKIPEDIA_RECORD.max_query_chars + 1)))
    assert server.requests == []


def test_req_eng_010_wikipedia_record() -> None:
    record = WIKIPEDIA_RECORD
    assert (record.rate_per_minute, record.burst, record.concurrency) == (100, 10, 1)
    assert record.max_query_chars == 250
    assert record.max_query_words is None
    assert record.time_ranges == frozenset()
    assert TimeRange.DAY not in record.time_ranges
    assert record.cacheable
    assert not record.attribution_required
    assert record.response_max_bytes == 1024 * 1024
    assert not record.needs_credential
    assert not record.scrapes


_SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/%")


@given(st.text(min_size=1, max_size=60))
def test_req_eng_005_article_path_round_trips_and_stays_a_valid_path(title: str) -> None:
    path = article_path(title)
    assert path.startswith("/wiki/")
    assert set(path) <= _SAFE
    assert " " not in path
    assert "?" not in path
    assert "#" not in path
    assert unquote(path[len("/wiki/") :]) == title.replace(" ", "_")


async def test_req_eng_002_one_driver_serves_concurrent_searches() -> None:
    def echo(request: RecordedRequest) -> Reply:
        title = request.param("srsearch") or ""
        return Reply.json({"query": {"search": [{"title": title, "snippet": ""}]}})

    async with serve_http({"/w/api.php": echo}, tls=tls_for("en.wikipedia.org")) as server:
        network = ProviderNetwork({"en.wikipedia.org": server})
        async with EngineClient(**network.http_options()) as http:
            engine = WikipediaEngine("wikipedia", http)
            answers: dict[str, str] = {}

            async def one(text: str) -> None:
                answer = await engine.search(_query(text))
                answers[text] = answer.results[0].title

            async with trio.open_nursery() as nursery:
                for i in range(6):
                    nursery.start_soon(one, f"query {i}")
    assert answers == {f"query {i}": f"query {i}" for i in range(6)}


async def test_req_search_004_a_private_mediawiki_is_skipped_for_another_language() -> None:
    # One mirror is one wiki in one language: a call that chooses another language skips
    # it (engine_skipped language) instead of asking the mirror in its own language.
    import attrs
    from search_fakes import FakeEngine, engine_config, make_config, results

    from rypsok import Notice, NoticeCode, Outcome, Rypsok, SearchRequest
    from rypsok.core.model import Reason as NoticeReason

    mirror = attrs.evolve(engine_config("mirror"), base_url="http://127.0.0.1:9/w")
    config = make_config(mirror, engine_config("alpha"), search={"languages": ("en", "ja")})
    alpha = FakeEngine("alpha", results("a", 1))
    async with Rypsok(config, engines=[alpha]) as rypsok:
        response = await rypsok.search(SearchRequest(query="rust", language="ja"))
    assert response.outcome is Outcome.OK
    skipped = Notice(code=NoticeCode.ENGINE_SKIPPED, engine="mirror", reason=NoticeReason.LANGUAGE)
    assert skipped in response.notices
