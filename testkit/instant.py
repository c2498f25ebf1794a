"""An engine that answers from memory at once: the stand-in of the stdio bench.

Its admission record is generous so that the engine's own limiter never skips it during a
run of thousands of calls; its answer is the first search's two results.
"""

from __future__ import annotations

import trio

from rypsok.core.engines.base import AdmissionRecord, EngineAnswer, EngineQuery, RawResult
from rypsok.core.model import TimeRange

__all__ = ["InstantEngine"]

RECORD = AdmissionRecord(
    rate_per_minute=1_000_000,
    burst=100_000,
    concurrency=64,
    max_query_chars=400,
    max_query_words=None,
    languages_all=True,
    time_ranges=frozenset(TimeRange),
    cacheable=False,
    attribution_required=False,
    response_max_bytes=1 << 20,
    needs_credential=False,
    scrapes=False,
)

ANSWER = EngineAnswer(
    results=(
        RawResult(
            title="Rust (programming language)",
            url="https://en.wikipedia.org/wiki/Rust_(programming_language)",
            snippet='<span class="searchmatch">Rust</span> is a general-purpose programming '
            "language emphasizing performance, type safety, and concurrency.",
            date="2026-09-01",
        ),
        RawResult(
            title="Rust & Bone",
            url="https://en.wikipedia.org/wiki/Rust_&_Bone",
            snippet="Rust and Bone is a 2012 romantic drama film",
            date="2026-07-19",
        ),
    )
)


class InstantEngine:
    def __init__(self, engine_id: str) -> None:
        self._id = engine_id

    @property
    def id(self) -> str:
        return self._id

    @property
    def record(self) -> AdmissionRecord:
        return RECORD

    async def search(self, query: EngineQuery) -> EngineAnswer:
        await trio.lowlevel.checkpoint()
        return ANSWER
