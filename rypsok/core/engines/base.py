"""The engine abstraction (REQ-ENG-001) and the admission record as data (REQ-ENG-010).

Implements REQ-CMP-001.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Protocol

import attrs

from rypsok.core.model import Category, Reason, SafeSearch, TimeRange

__all__ = [
    "AdmissionRecord",
    "Engine",
    "EngineAnswer",
    "EngineFailure",
    "EngineQuery",
    "RawResult",
]


@attrs.frozen(kw_only=True)
class AdmissionRecord:
    """A provider's obligations, copied from its admission record (book, chapter 19)."""

    rate_per_minute: int  # LIM-C9: requests admitted per minute
    burst: int  # requests admitted at once before the rate applies
    concurrency: int  # at most this many requests in flight (with LIM-C2, the lower wins)
    max_query_chars: int
    max_query_words: int | None  # None: no word limit
    languages_all: bool  # every language tag is honored
    time_ranges: frozenset[TimeRange]  # empty: a period cannot be honored
    cacheable: bool
    attribution_required: bool
    response_max_bytes: int  # after decompression
    needs_credential: bool
    scrapes: bool

    @property
    def interval_s(self) -> Fraction:
        """Seconds between two admissions once the burst is spent."""
        return Fraction(60, self.rate_per_minute)


@attrs.frozen(kw_only=True)
class EngineQuery:
    """What the aggregator asks one engine; the query already passed the privacy check."""

    query: str
    category: Category
    language: str
    region: str
    safe_search: SafeSearch
    time_range: TimeRange | None
    count: int  # LIM-S3


@attrs.frozen(kw_only=True)
class RawResult:
    """One result as the driver parsed it, before the content boundary.

    `decoded` is True only when a parser already decoded the text (a scraping driver);
    JSON engines' titles and snippets carry markup and entities and stay False.
    """

    title: str
    url: str
    snippet: str
    date: str | None = None  # YYYY-MM-DD, when the provider gave one
    decoded: bool = False


@attrs.frozen(kw_only=True)
class EngineAnswer:
    results: tuple[RawResult, ...]
    # A meta-search engine (SearXNG) answered without some of its own sources: how many
    # did not answer it. Their names are the instance's text and never leave the driver.
    unresponsive: int = 0


@attrs.frozen(kw_only=True, auto_exc=True)
class EngineFailure(Exception):
    """A failed engine request, classified by its driver into exactly one class (REQ-ENG-006).

    It carries no provider text: the class and, for rate_limited, the provider's wait.
    `heard` is False when no answer came from the provider at all (the connection refused
    or reset, TLS or protocol failure, the egress judgment): such a request is not a
    completed one and has no latency to keep (LIM-S11).
    """

    failure_class: Reason
    retry_after_s: float | None = None
    heard: bool = True


class Engine(Protocol):
    """A configured engine, usable concurrently (REQ-ENG-002)."""

    @property
    def id(self) -> str: ...

    @property
    def record(self) -> AdmissionRecord: ...

    async def search(self, query: EngineQuery) -> EngineAnswer:
        """Return the parsed answer, or raise EngineFailure; never any other exception
        on purpose (the aggregator still contains one, as request_failure)."""
        ...
