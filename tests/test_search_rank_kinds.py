"""Ranking across engines of different kinds, through the real pipeline.

A meta-search engine or a forum can return a long list of near-duplicates; an encyclopedia
or an index of papers a short one. What the pipeline does with them: each engine counts for
at most `results_per_engine` (LIM-S3) results, and fusion scores a result by its rank within
its engine, so one engine's long list is interleaved with the others' rank by rank instead of
drowning them; a result two engines agree on rises above both.
"""

from __future__ import annotations

from collections import Counter

from search_fakes import FakeEngine, engine_config, make_config

from rypsok.core.engines.base import RawResult
from rypsok.core.model import SearchRequest
from rypsok.core.services import Rypsok

SHARED = "https://agreed.example/answer"


def _flood(count: int) -> tuple[RawResult, ...]:
    # Near-duplicates: one page's title and snippet under a hundred addresses.
    return tuple(
        RawResult(
            title="Rust ownership explained",
            url=f"https://mirror{i}.example/rust-ownership",
            snippet="Ownership is Rust's most unique feature.",
        )
        for i in range(count)
    )


def _own(engine: str, count: int, *, shared_at: int | None = None) -> tuple[RawResult, ...]:
    out = [
        RawResult(
            title=f"{engine} result {i}",
            url=f"https://{engine}.example/{i}",
            snippet=f"{engine} snippet {i}",
        )
        for i in range(count)
    ]
    if shared_at is not None:
        out.insert(shared_at, RawResult(title="agreed", url=SHARED, snippet="both say it"))
    return tuple(out[:count])


async def _top(max_results: int, others: int = 10) -> list[str]:
    engines = [
        FakeEngine("flood", _flood(100)),
        FakeEngine("papers", _own("papers", others, shared_at=min(4, others - 1))),
        FakeEngine("forum", _own("forum", others, shared_at=min(6, others - 1))),
    ]
    config = make_config(
        engine_config("flood"),
        engine_config("papers"),
        engine_config("forum"),
        search={"max_results_ceiling": 20},
    )
    async with Rypsok(config, engines=engines) as rypsok:
        response = await rypsok.search(SearchRequest(query="rust", max_results=max_results))
    return [r.url for r in response.results]


def _engine_of(url: str) -> str:
    host = url.split("/")[2]
    if host.startswith("mirror"):
        return "flood"
    return host.split(".")[0]


async def test_req_rank_005_one_engines_hundred_near_duplicates_do_not_drown_the_others() -> None:
    top = await _top(10)
    share = Counter(_engine_of(u) for u in top if u != SHARED)
    # Rank by rank: the flood engine gets about a third of the places, never all of them.
    assert share["flood"] <= 4
    assert share["papers"] >= 3
    assert share["forum"] >= 3
    # Of the hundred, no more than LIM-S3 (10 by default) ever reach the ranking, even when
    # the others run short and places are left.
    everything = await _top(20, others=3)
    assert sum(1 for u in everything if _engine_of(u) == "flood") == 10


async def test_req_rank_005_a_result_two_engines_agree_on_still_rises() -> None:
    top = await _top(10)
    # Ranked 5th by one engine and 7th by another, it beats every engine's own first result.
    assert top[0] == SHARED
