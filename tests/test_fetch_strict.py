"""Strict fetch mode (REQ-SEC-021, LIM-F14): only what web_search returned, or allowed hosts."""

from __future__ import annotations

from typing import Any

from fetch_helpers import fetch_config, fetching_rypsok
from fetch_sites import Page, serve_site
from search_fakes import FakeEngine

from rypsok.core.engines.base import RawResult
from rypsok.core.model import DetailReason, ErrorKind, FetchRequest, SearchRequest, ToolError

ARTICLE = (
    "<html><head><title>Found</title></head><body><article><p>A page a search returned, "
    "long enough to be the main block of the page.</p></article></body></html>"
)
OPEN = Page.text("User-agent: *\nAllow: /\n")
STRICT = """
[fetch]
strict_mode = true
[egress]
allow_http = true
allow = ["listed.org"]
[engines.alpha]
type = "wikipedia"
categories = ["general"]
"""


async def fetch(rypsok: Any, url: str) -> Any:
    try:
        return await rypsok.fetch(FetchRequest(url=url))
    except ToolError as error:
        return error


def strict_rypsok(site: Any, extra: str = "") -> Any:
    found = RawResult(title="Found", url="http://strict.org/found", snippet="found")
    engine = FakeEngine("alpha", (found,))
    # The sites are reached through an address rule only, so that no name is allowed by a
    # rule except the operator's listed.org.
    rypsok, network_backend, _ = fetching_rypsok(
        fetch_config(STRICT + extra),
        {"strict.org": site, "listed.org": site},
        allow=("127.0.0.1",),
        engines=[engine],
    )
    return rypsok, network_backend


async def test_req_sec_021_only_urls_a_search_returned_or_allowed_hosts_are_fetched() -> None:
    routes = {"/robots.txt": OPEN, "/found": Page.html(ARTICLE), "/other": Page.html(ARTICLE)}
    async with serve_site(routes) as site:
        rypsok, network_backend = strict_rypsok(site)
        async with rypsok:
            before = await fetch(rypsok, "http://strict.org/found")
            assert network_backend.attempts == []  # refused before any request
            await rypsok.search(SearchRequest(query="rust"))
            after = await fetch(rypsok, "http://strict.org/found")
            other = await fetch(rypsok, "http://strict.org/other")
            listed = await fetch(rypsok, "http://listed.org/other")
    for refused in (before, other):
        assert isinstance(refused, ToolError)
        assert (refused.kind, refused.detail.reason) == (ErrorKind.DENIED, DetailReason.STRICT_MODE)
    assert after.title == "Found"
    assert listed.title == "Found"
    assert "/other" in site.paths()


async def test_req_sec_021_without_strict_mode_any_public_url_is_fetched() -> None:
    routes = {"/robots.txt": OPEN, "/other": Page.html(ARTICLE)}
    async with serve_site(routes) as site:
        cfg = fetch_config(STRICT.replace("strict_mode = true", "strict_mode = false"))
        rypsok, _, _ = fetching_rypsok(cfg, {"strict.org": site}, allow=("127.0.0.1",))
        async with rypsok:
            answer = await fetch(rypsok, "http://strict.org/other")
    assert answer.title == "Found"


def page_results(start: int) -> tuple[RawResult, ...]:
    return tuple(
        RawResult(title=f"r{i}", url=f"http://strict.org/p{i}", snippet="s")
        for i in range(start, start + 10)
    )


async def test_lim_f14_strict_mode_remembers_at_most_the_configured_urls() -> None:
    routes = {"/robots.txt": OPEN, "/p0": Page.html(ARTICLE), "/p1": Page.html(ARTICLE)}
    async with serve_site(routes) as site:
        cfg = fetch_config(STRICT + "[limits]\nstrict_mode_urls = 100\n")
        engine = FakeEngine("alpha")
        rypsok, _, _ = fetching_rypsok(
            cfg, {"strict.org": site}, allow=("127.0.0.1",), engines=[engine]
        )
        async with rypsok:
            # An engine gives at most ten results per call (LIM-S3): ten searches.
            for batch in range(10):
                engine._answer = page_results(10 * batch)
                await rypsok.search(SearchRequest(query=f"q{batch}", max_results=10))
            assert len(rypsok._returned) == 100
            first = await fetch(rypsok, "http://strict.org/p0")
            engine._answer = page_results(100)[:1]
            await rypsok.search(SearchRequest(query="one more"))
            # The URL returned longest ago was forgotten to make room (LIM-F14).
            assert len(rypsok._returned) == 100
            forgotten = await fetch(rypsok, "http://strict.org/p0")
            kept = await fetch(rypsok, "http://strict.org/p1")
    assert first.title == "Found"
    assert isinstance(forgotten, ToolError)
    assert forgotten.detail.reason is DetailReason.STRICT_MODE
    assert kept.title == "Found"
