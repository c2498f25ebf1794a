"""The DuckDuckGo HTML driver against a local server, through the engines' production stack.

The fixtures are hand-written in the results page's shape (tests/fixtures/engines.md), plus
the real, abridged capture of /work/shared/data/search-api-samples/ (REQ-TEST-018).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from provider_network import ProviderNetwork, tls_for

from rypsok.config.load import load_config
from rypsok.core.engines.base import EngineFailure, EngineQuery
from rypsok.core.engines.client import EngineClient
from rypsok.core.engines.duckduckgo import (
    DUCKDUCKGO_RECORD,
    MAX_DEPTH,
    MAX_NODES,
    DuckDuckGoEngine,
    parse_results_page,
    result_target,
)
from rypsok.core.model import (
    Category,
    Notice,
    NoticeCode,
    Outcome,
    Reason,
    SafeSearch,
    SearchRequest,
    TimeRange,
)
from rypsok.core.services import Rypsok
from testkit.servers import LocalHttpServer, Reply, serve_http

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

FIXTURES = Path(__file__).parent / "fixtures"
HTML = (("Content-Type", "text/html; charset=UTF-8"),)


def _page(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _query(
    text: str = "rust",
    *,
    count: int = 10,
    time_range: TimeRange | None = None,
    language: str = "en",
    region: str = "US",
    safe: SafeSearch = SafeSearch.MODERATE,
) -> EngineQuery:
    return EngineQuery(
        query=text,
        category=Category.GENERAL,
        language=language,
        region=region,
        safe_search=safe,
        time_range=time_range,
        count=count,
    )


@asynccontextmanager
async def _ddg(
    reply: Reply, permits: trio.CapacityLimiter | None = None
) -> AsyncIterator[tuple[DuckDuckGoEngine, LocalHttpServer]]:
    async with serve_http({"/html/": reply}, tls=tls_for("html.duckduckgo.com")) as server:
        network = ProviderNetwork({"html.duckduckgo.com": server})
        async with EngineClient(**network.http_options(), contact="ops@example.org") as http:
            limiter = permits if permits is not None else trio.CapacityLimiter(2)
            yield DuckDuckGoEngine("ddg", http, limiter), server


async def test_req_test_018_results_in_page_order_with_targets_unwrapped() -> None:
    async with _ddg(Reply(body=_page("ddg-results.html"), headers=HTML)) as (engine, _):
        answer = await engine.search(_query())
    assert [(r.title, r.url) for r in answer.results] == [
        ("Rust Programming Language", "https://www.rust-lang.org/"),
        ("The Rust Programming Language - The Rust Book", "https://doc.rust-lang.org/book/"),
        (
            "Rust (programming language) - Wikipedia",
            "https://en.wikipedia.org/wiki/Rust_(programming_language)?a=1&b=2",
        ),
    ]
    first, second, third = answer.results
    assert first.snippet == (
        "A language empowering everyone to build reliable & efficient software."
    )
    assert second.snippet == "by Steve Klabnik & Carol Nichols 'The Book'"
    assert third.snippet.startswith("Rust is a general-purpose programming")
    # The parser decoded the entities and dropped the markup; no date on this page.
    assert all(r.decoded and r.date is None for r in answer.results)


async def test_req_test_018_the_real_capture_parses_in_order() -> None:
    reply = Reply(body=_page("ddg-real-capture.abridged.html"), headers=HTML)
    async with _ddg(reply) as (engine, _):
        answer = await engine.search(_query("cgb-awxp-eur-1"))
    assert [r.url for r in answer.results] == [
        "https://vgdb.uk/mario-golf/game/48484",
        "https://www.ebay.de/itm/Mario-Golf-Nintendo-Game-Boy-color-Advance-GBC-GBA-CGB-AWXP-EUR/"
        "264853273128?epid=167015543&hash=item3daa7c3a28:g:0U0AAOSwC-5fUT36",
        "https://www.xe.com/currencyconverter/convert/?Amount=1&From=EUR&To=XPF",
        "https://www.youtube.com/watch?v=685J1hos-zw",
    ]
    assert answer.results[3].title == "EUR.1 - einfach erklärt (2020) - YouTube"
    assert all(r.title and r.snippet for r in answer.results)


async def test_req_eng_011_at_most_the_count_asked_for() -> None:
    async with _ddg(Reply(body=_page("ddg-results.html"), headers=HTML)) as (engine, _):
        answer = await engine.search(_query(count=2))
    assert len(answer.results) == 2


async def test_req_test_018_no_results_page_is_an_empty_answer() -> None:
    async with _ddg(Reply(body=_page("ddg-no-results.html"), headers=HTML)) as (engine, _):
        answer = await engine.search(_query("zzqxv"))
    assert answer.results == ()


@pytest.mark.parametrize("tag", ["span", "div", "p"])
def test_req_test_018_the_no_results_class_counts_on_any_element(tag: str) -> None:
    page = f'<html><body><{tag} class="x no-results y">No results.</{tag}></body></html>'
    verdict = parse_results_page(page.encode())
    assert verdict.no_results
    assert not verdict.results
    assert not verdict.challenge


async def test_req_eng_015_drifted_page_is_a_parse_failure() -> None:
    async with _ddg(Reply(body=_page("ddg-drifted.html"), headers=HTML)) as (engine, _):
        with pytest.raises(EngineFailure) as caught:
            await engine.search(_query())
    assert caught.value.failure_class is Reason.PARSE_FAILURE


async def test_req_eng_014_challenge_page_is_blocked() -> None:
    async with _ddg(Reply(body=_page("ddg-challenge.html"), headers=HTML)) as (engine, server):
        with pytest.raises(EngineFailure) as caught:
            await engine.search(_query())
    assert caught.value.failure_class is Reason.BLOCKED
    assert len(server.requests) == 1  # reported, never worked around


@pytest.mark.parametrize(
    "page",
    [
        # Each signal alone is enough (chapter 19, "Challenge").
        "<html><body><p>Unfortunately, bots use DuckDuckGo too.</p></body></html>",
        "<html><body><p>bots   use\n DUCKDUCKGO too</p></body></html>",
        "<html><body><p>bots use <b>DuckDuckGo</b> too</p></body></html>",
        '<html><body><div class="anomaly-modal__title">Hm</div></body></html>',
        '<html><body><form action="/html/anomaly"></form></body></html>',
        '<html><body><form action="/html/anomaly?x=1" method="post"></form></body></html>',
        '<html><body><form action="https://html.duckduckgo.com/anomaly/"></form></body></html>',
    ],
)
def test_req_eng_014_each_challenge_signal_is_recognised(page: str) -> None:
    verdict = parse_results_page(page.encode())
    assert verdict.challenge


@pytest.mark.parametrize(
    "page",
    [
        '<html><body><form action="/html/"></form><p>bots are welcome</p></body></html>',
        '<html><body><form action="/html/anomalyx"></form></body></html>',
        '<html><body><div class="anomaly-modal__titles">x</div></body></html>',
    ],
)
def test_req_eng_014_near_misses_are_not_challenges(page: str) -> None:
    assert not parse_results_page(page.encode()).challenge


def test_req_eng_014_a_challenge_beats_results_on_the_same_page() -> None:
    page = _page("ddg-results.html").replace(
        b"</body>", b'<div class="anomaly-modal__title">x</div></body>'
    )
    verdict = parse_results_page(page)
    assert verdict.challenge
    assert verdict.results
    from rypsok.core.engines.duckduckgo import classify_page

    with pytest.raises(EngineFailure) as caught:
        classify_page(verdict, 10)
    assert caught.value.failure_class is Reason.BLOCKED


@pytest.mark.parametrize(
    ("status", "headers", "expected", "wait"),
    [
        (403, (), Reason.BLOCKED, None),
        (429, (("Retry-After", "30"),), Reason.RATE_LIMITED, 30.0),
        (503, (("Retry-After", "120"),), Reason.RATE_LIMITED, 120.0),
        (503, (), Reason.RATE_LIMITED, None),
        (500, (), Reason.REQUEST_FAILURE, None),
        (404, (), Reason.REQUEST_FAILURE, None),
    ],
)
async def test_req_eng_014_blocking_statuses(
    status: int, headers: tuple[tuple[str, str], ...], expected: Reason, wait: float | None
) -> None:
    async with _ddg(Reply(status=status, headers=headers)) as (engine, _):
        with pytest.raises(EngineFailure) as caught:
            await engine.search(_query())
    assert caught.value.failure_class is expected
    assert caught.value.retry_after_s == wait


@pytest.mark.parametrize(
    "location", ["/html/?q=rust&s=30", "https://html.duckduckgo.com/html/", "https://a.example/"]
)
async def test_req_eng_015_no_redirect_is_followed(location: str) -> None:
    reply = Reply(status=302, headers=(("Location", location),))
    async with _ddg(reply) as (engine, server):
        with pytest.raises(EngineFailure) as caught:
            await engine.search(_query())
    assert caught.value.failure_class is Reason.REQUEST_FAILURE
    assert len(server.requests) == 1  # on the provider's host or off it: never followed


async def test_req_eng_014_no_browser_headers_reach_the_provider() -> None:
    async with _ddg(Reply(body=_page("ddg-results.html"), headers=HTML)) as (engine, server):
        await engine.search(_query())
    request = server.requests[0]
    names = {name for name, _ in request.headers}
    assert names <= {"host", "user-agent", "accept", "accept-encoding", "connection"}
    assert request.method == "GET"
    assert request.header("accept") == "text/html"
    agent = request.header("user-agent")
    assert agent is not None
    assert agent.startswith("rypsok/")
    assert "ops@example.org" in agent
    for browserish in ("cookie", "accept-language", "referer", "dnt", "sec-fetch-mode"):
        assert request.header(browserish) is None


@pytest.mark.parametrize(
    ("safe", "kp"), [(SafeSearch.STRICT, "1"), (SafeSearch.MODERATE, "-1"), (SafeSearch.OFF, "-2")]
)
async def test_req_eng_009_safe_search_maps_to_kp(safe: SafeSearch, kp: str) -> None:
    async with _ddg(Reply(body=_page("ddg-no-results.html"), headers=HTML)) as (engine, server):
        await engine.search(_query(safe=safe))
    assert server.requests[0].param("kp") == kp


@pytest.mark.parametrize(
    ("period", "df"),
    [(TimeRange.DAY, "d"), (TimeRange.WEEK, "w"), (TimeRange.MONTH, "m"), (TimeRange.YEAR, "y")],
)
async def test_req_search_004_time_range_maps_to_df(period: TimeRange, df: str) -> None:
    async with _ddg(Reply(body=_page("ddg-no-results.html"), headers=HTML)) as (engine, server):
        await engine.search(_query(time_range=period))
    assert server.requests[0].param("df") == df


async def test_req_eng_009_request_parameters() -> None:
    async with _ddg(Reply(body=_page("ddg-no-results.html"), headers=HTML)) as (engine, server):
        await engine.search(_query("rust lang", language="de-CH", region="AT"))
    request = server.requests[0]
    assert request.path == "/html/"
    assert request.header("host") == "html.duckduckgo.com"
    assert dict(request.query) == {"q": "rust lang", "kl": "at-de", "kp": "-1"}


async def test_req_eng_015_response_above_256_kib_is_a_parse_failure() -> None:
    body = _page("ddg-results.html")
    padding = b"<!--" + b"x" * (DUCKDUCKGO_RECORD.response_max_bytes) + b"-->"
    reply = Reply(body=body.replace(b"</body>", padding + b"</body>"), headers=HTML)
    async with _ddg(reply) as (engine, _):
        with pytest.raises(EngineFailure) as caught:
            await engine.search(_query())
    assert caught.value.failure_class is Reason.PARSE_FAILURE


def test_req_eng_015_response_bound_is_256_kib() -> None:
    assert DUCKDUCKGO_RECORD.response_max_bytes == 256 * 1024
    assert DUCKDUCKGO_RECORD.rate_per_minute == 10
    assert DUCKDUCKGO_RECORD.concurrency == 1
    assert DUCKDUCKGO_RECORD.scrapes
    assert not DUCKDUCKGO_RECORD.cacheable


@pytest.mark.parametrize("depth", [MAX_DEPTH - 2, MAX_DEPTH - 1])
def test_lim_f11_depth_at_the_bound_parses(depth: int) -> None:
    # html and body are two levels; `depth` more divs reach MAX_DEPTH - 1 or MAX_DEPTH.
    page = b"<html><body>" + b"<div>" * (depth - 2) + b'<span class="no-results"></span>'
    assert parse_results_page(page).no_results


@pytest.mark.parametrize("depth", [MAX_DEPTH, 10**6])
def test_lim_f11_depth_beyond_the_bound_is_a_parse_failure(depth: int) -> None:
    page = b"<html><body>" + b"<div>" * depth + b'<span class="no-results"></span>'
    with pytest.raises(EngineFailure) as caught:
        parse_results_page(page)
    assert caught.value.failure_class is Reason.PARSE_FAILURE


def test_lim_f10_nodes_at_the_bound_parse() -> None:
    # html, body and the marker are three elements.
    page = b"<html><body>" + b"<i></i>" * (MAX_NODES - 3) + b'<span class="no-results"></span>'
    assert parse_results_page(page).no_results


def test_lim_f10_nodes_beyond_the_bound_are_a_parse_failure() -> None:
    page = b"<html><body>" + b"<i></i>" * (MAX_NODES - 2) + b'<span class="no-results"></span>'
    with pytest.raises(EngineFailure) as caught:
        parse_results_page(page)
    assert caught.value.failure_class is Reason.PARSE_FAILURE


async def test_req_eng_015_parsing_waits_for_a_parse_permit() -> None:
    permits = trio.CapacityLimiter(1)
    holder = object()
    await permits.acquire_on_behalf_of(holder)
    reply = Reply(body=_page("ddg-results.html"), headers=HTML)
    async with _ddg(reply, permits) as (engine, server):
        with trio.move_on_after(0.3) as scope:
            await engine.search(_query())
        assert scope.cancelled_caught  # the page arrived, but no permit was free
        assert len(server.requests) == 1
        permits.release_on_behalf_of(holder)
        answer = await engine.search(_query())
    assert len(answer.results) == 3
    assert permits.borrowed_tokens == 0


@pytest.mark.parametrize(
    ("href", "target"),
    [
        (
            "//duckduckgo.com/l/?uddg=https%3A%2F%2Fa.example%2Fp%3Fq%3D1&rut=z",
            "https://a.example/p?q=1",
        ),
        ("https://duckduckgo.com/l/?uddg=http%3A%2F%2Fa.example%2F", "http://a.example/"),
        ("//html.duckduckgo.com/l/?uddg=https%3A%2F%2Fb.example%2F", "https://b.example/"),
        ("https://c.example/x", "https://c.example/x"),
        ("  http://c.example/  ", "http://c.example/"),
        ("//duckduckgo.com/l/?rut=z", None),
        ("//duckduckgo.com/l/?uddg=javascript%3Aalert(1)", None),
        ("//duckduckgo.com/l/?uddg=%2Frelative", None),
        ("https://duckduckgo.com/y.js?ad_domain=a.example", None),
        ("https://duckduckgo.com/?q=rust", None),
        ("/html/?q=rust", None),
        ("javascript:alert(1)", None),
        ("mailto:a@b.example", None),
        ("", None),
        ("https://[::1", None),
    ],
)
def test_req_test_018_result_targets(href: str, target: str | None) -> None:
    assert result_target(href) == target


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=4096),
        st.text(max_size=2048).map(lambda t: t.encode("utf-8", "surrogatepass")),
        st.lists(
            st.sampled_from(
                [
                    "<div class='result'>",
                    "<a class='result__a' href='//duckduckgo.com/l/?uddg=",
                    "https%3A%2F%2Fa.example%2F'>",
                    "</a>",
                    "</div>",
                    "<span class='no-results'>",
                    "<!--",
                    "-->",
                    "&#x27;",
                    "\ud800",
                    "<script>",
                    "\x00",
                    "<b>",
                ]
            ),
            max_size=200,
        ).map(lambda parts: "".join(parts).encode("utf-8", "surrogatepass")),
    )
)
def test_req_sec_014_any_bytes_parse_or_fail_as_parse_failure(body: bytes) -> None:
    try:
        verdict = parse_results_page(body)
    except EngineFailure as exc:
        failure = exc.failure_class
    else:
        failure = None
        for result in verdict.results:
            assert result.url.startswith(("http://", "https://"))
    assert failure in (None, Reason.PARSE_FAILURE)


# --- through the facade, with Tutorial 5's configuration ------------------------------------

TUTORIAL_5 = Path(__file__).parent.parent / "examples" / "configs" / "tutorial-5.toml"


@asynccontextmanager
async def _tutorial_5(
    ddg_reply: Reply,
) -> AsyncIterator[tuple[Rypsok, LocalHttpServer, LocalHttpServer]]:
    wiki_body = (FIXTURES / "wikipedia-search-rust.json").read_bytes()
    async with (
        serve_http({"/html/": ddg_reply}, tls=tls_for("html.duckduckgo.com")) as ddg,
        serve_http(
            {"/w/api.php": Reply(body=wiki_body, headers=JSON)}, tls=tls_for("en.wikipedia.org")
        ) as wiki,
    ):
        network = ProviderNetwork({"html.duckduckgo.com": ddg, "en.wikipedia.org": wiki})
        config = load_config(str(TUTORIAL_5), {})
        async with Rypsok(config, env={}, engine_network=network.engine_network) as rypsok:
            yield rypsok, ddg, wiki


JSON = (("Content-Type", "application/json"),)


async def test_req_eng_013_tutorial_5_two_engines_answer() -> None:
    reply = Reply(body=_page("ddg-results.html"), headers=HTML)
    async with _tutorial_5(reply) as (rypsok, ddg, wiki):
        response = await rypsok.search(SearchRequest(query="rust"))
    assert response.outcome is Outcome.OK
    assert len(ddg.requests) == 1
    assert len(wiki.requests) == 1
    urls = [r.url for r in response.results]
    assert "https://www.rust-lang.org/" in urls
    assert any(u.startswith("https://en.wikipedia.org/wiki/") for u in urls)


async def test_req_eng_014_tutorial_5_a_challenge_is_reported_and_opens_the_circuit(
    mock_clock: trio.testing.MockClock,
) -> None:
    # The clock moves only when told: real loopback I/O takes no time on it, and each
    # search comes 7 s after the last, past DuckDuckGo's admission interval (10 a minute).
    reply = Reply(body=_page("ddg-challenge.html"), headers=HTML)
    async with _tutorial_5(reply) as (rypsok, ddg, _):
        responses = []
        for query in ("rust", "rust lang", "rust book"):
            responses.append(await rypsok.search(SearchRequest(query=query)))
            mock_clock.jump(7)
        after = await rypsok.search(SearchRequest(query="rust again"))
        status = await rypsok.status()
    blocked = Notice(code=NoticeCode.ENGINE_UNAVAILABLE, engine="ddg", reason=Reason.BLOCKED)
    for response in responses:
        assert response.outcome is Outcome.PARTIAL
        assert blocked in response.notices
    # After three failures (LIM-B1) the engine rests: it is skipped, not asked.
    assert len(ddg.requests) == 3
    assert Notice(code=NoticeCode.ENGINE_SKIPPED, engine="ddg", reason=Reason.COOLDOWN) in (
        after.notices
    )
    states = {e.id: str(e.state) for e in status.engines}
    assert states["ddg"] == "open"
