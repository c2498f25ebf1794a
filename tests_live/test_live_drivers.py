"""Live checks of the real providers: the drift detector of the admission records.

Never run by default, in CI or on a pull request (REQ-TEST-003): they live outside `tests/`
(whose loopback guard would refuse them anyway), are marked `live`, and skip unless
RYPSOK_LIVE=1 is set. Run them on demand, and before a release:

    RYPSOK_LIVE=1 .venv/bin/python -m pytest tests_live -m live

Each sends the admission record's one fixed query to the real endpoint with rypsok's
standard User-Agent and asserts that at least one result parses. A failure means the
provider changed its format or its terms (or, for DuckDuckGo, challenged this address):
the driver and its record need review; it is not an outage of rypsok.
"""

from __future__ import annotations

import os

import pytest
import trio

from rypsok.core.engines.base import EngineFailure, EngineQuery
from rypsok.core.engines.brave import BraveEngine
from rypsok.core.engines.client import EngineClient
from rypsok.core.engines.duckduckgo import DuckDuckGoEngine
from rypsok.core.engines.wikipedia import WikipediaEngine
from rypsok.core.model import Category, SafeSearch

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(os.environ.get("RYPSOK_LIVE") != "1", reason="live checks: RYPSOK_LIVE=1"),
]

CONTACT = os.environ.get("RYPSOK_LIVE_CONTACT", "")
# The whole of one live request: the bound a search's deadline puts on an engine (LIM-S5).
LIVE_TOTAL_S = 10.0


def _query(text: str) -> EngineQuery:
    return EngineQuery(
        query=text,
        category=Category.GENERAL,
        language="en",
        region="US",
        safe_search=SafeSearch.MODERATE,
        time_range=None,
        count=10,
    )


async def test_live_wikipedia_answers_rust() -> None:
    async with EngineClient(contact=CONTACT) as http:
        with trio.fail_after(LIVE_TOTAL_S):
            answer = await WikipediaEngine("wikipedia", http).search(
                _query("Rust (programming language)")
            )
    assert answer.results, "Wikipedia answered no result: format drift?"
    assert all(r.url.startswith("https://en.wikipedia.org/wiki/") for r in answer.results)


async def test_live_brave_answers_rust() -> None:
    key = os.environ.get("BRAVE_API_KEY", "")
    if not key:
        pytest.skip("BRAVE_API_KEY is not set")
    async with EngineClient(contact=CONTACT) as http:
        with trio.fail_after(LIVE_TOTAL_S):
            answer = await BraveEngine("brave", http, key).search(
                _query("rust programming language")
            )
    assert answer.results, "Brave answered no result: format drift?"


async def test_live_duckduckgo_answers_rust() -> None:
    async with EngineClient(contact=CONTACT) as http:
        engine = DuckDuckGoEngine("ddg", http, trio.CapacityLimiter(1))
        try:
            with trio.fail_after(LIVE_TOTAL_S):
                answer = await engine.search(_query("Rust programming language"))
        except EngineFailure as exc:
            pytest.fail(f"DuckDuckGo answered {exc.failure_class}: blocked here, or drift")
    assert answer.results, "DuckDuckGo answered no result: format drift?"
    assert all(r.url.startswith(("http://", "https://")) for r in answer.results)
