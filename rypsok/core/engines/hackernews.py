"""The Hacker News driver: stories through Algolia's HN Search API (book, "Engines").

`GET https://hn.algolia.com/api/v1/search?query=<q>&tags=story&hitsPerPage=<n>`: titles and
URLs of stories, ranked by the provider's relevance. A story without a URL of its own (an
"Ask HN", a text post) is linked to its discussion page on news.ycombinator.com.
"""

from __future__ import annotations

import re
import time
from typing import Final
from urllib.parse import quote

from rypsok.core.engines.answers import (
    ApiEngine,
    api_root,
    ask_provider,
    calendar_date,
    json_object,
    object_items,
    require_within_limits,
)
from rypsok.core.engines.base import (
    AdmissionRecord,
    EngineAnswer,
    EngineFailure,
    EngineQuery,
    RawResult,
)
from rypsok.core.engines.client import EngineClient, EngineOrigin
from rypsok.core.model import Reason, TimeRange
from rypsok.shared.drivers import DRIVER_TYPES

__all__ = ["DISCUSSION_URL", "HACKERNEWS_ORIGIN", "HACKERNEWS_RECORD", "HackerNewsEngine"]

HACKERNEWS_ORIGIN: Final = EngineOrigin(scheme="https", host="hn.algolia.com")
_ROOT: Final = "/api/v1"
DISCUSSION_URL: Final = "https://news.ycombinator.com/item?id="
MAX_HITS: Final = 50

_TRAITS: Final = DRIVER_TYPES["hackernews"]

HACKERNEWS_RECORD: Final = AdmissionRecord(
    rate_per_minute=60,
    burst=5,
    concurrency=2,
    max_query_chars=500,
    max_query_words=None,
    languages_all=False,  # one community, no language parameter
    time_ranges=frozenset(TimeRange),
    cacheable=_TRAITS.cacheable,
    attribution_required=False,
    response_max_bytes=1024 * 1024,
    needs_credential=_TRAITS.keyed,
    scrapes=_TRAITS.scrapes,
)

_PERIOD_S: Final = {
    TimeRange.DAY: 86400,
    TimeRange.WEEK: 7 * 86400,
    TimeRange.MONTH: 31 * 86400,
    TimeRange.YEAR: 366 * 86400,
}
_DATE: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})T")
_OBJECT_ID: Final = re.compile(r"[0-9]{1,20}\Z")
_REFUSALS: Final = {403: Reason.BLOCKED}


class HackerNewsEngine(ApiEngine):
    """Stories on Hacker News, searched through Algolia."""

    RECORD = HACKERNEWS_RECORD

    def __init__(self, engine_id: str, http: EngineClient, *, base_url: str | None = None) -> None:
        super().__init__(engine_id, http, api_root(base_url, HACKERNEWS_ORIGIN, _ROOT))

    async def search(self, query: EngineQuery) -> EngineAnswer:
        require_within_limits(HACKERNEWS_RECORD, query.query)
        params = [
            ("query", query.query),
            ("tags", "story"),
            ("hitsPerPage", str(min(query.count, MAX_HITS))),
        ]
        if query.time_range is not None:
            since = int(time.time()) - _PERIOD_S[query.time_range]
            params.append(("numericFilters", f"created_at_i>{since}"))
        results = await ask_provider(
            self._http,
            self._origin,
            f"{self._root}/search",
            params=params,
            record=HACKERNEWS_RECORD,
            parse=_parse,
            refusals=_REFUSALS,
        )
        return EngineAnswer(results=results[: query.count])


def story_url(hit: dict[str, object]) -> str:
    """The story's own URL, or its discussion page when it has none (an Ask HN)."""
    url = hit.get("url")
    if isinstance(url, str) and url.strip():
        return url
    object_id = hit.get("objectID")
    if not isinstance(object_id, str) or _OBJECT_ID.match(object_id) is None:
        raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
    return DISCUSSION_URL + quote(object_id, safe="")


def _parse(body: bytes) -> tuple[RawResult, ...]:
    document = json_object(body)
    results = []
    for hit in object_items(document.get("hits")):
        title = hit.get("title")
        text = hit.get("story_text")
        snippet = text if isinstance(text, str) else ""
        if not isinstance(title, str):
            raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
        results.append(
            RawResult(
                title=title,
                url=story_url(hit),
                snippet=snippet,
                date=calendar_date(hit.get("created_at"), _DATE),
            )
        )
    return tuple(results)
