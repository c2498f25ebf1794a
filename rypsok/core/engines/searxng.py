"""The SearXNG driver: an operator's own instance, `GET <base_url>/search?format=json`.

The instance is the operator's: `base_url` is required and nothing is asked elsewhere. JSON
output must be enabled on it (`search.formats` in its settings.yml); an instance that refuses
the format answers 403, reported as blocked. An optional credential (an instance behind an
authenticating proxy) is sent as `Authorization: Bearer <key>` to that origin only.

The instance's own fields are not trusted as ranking: `engines`, `score` and `positions`
are ignored, and the results keep the instance's order as one engine's ranks. Its
`unresponsive_engines` list is counted, never repeated: the call says that this engine
answered without some of its sources (notice engine_unavailable with a count).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from rypsok.core.engines.answers import (
    ApiEngine,
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
from rypsok.core.engines.client import EngineClient, parse_base_url
from rypsok.core.model import Category, Reason, SafeSearch, TimeRange
from rypsok.shared.drivers import DRIVER_TYPES

if TYPE_CHECKING:
    from rypsok.core.telemetry import Secret

__all__ = ["SEARXNG_CATEGORIES", "SEARXNG_RECORD", "SearxngEngine"]

_TRAITS: Final = DRIVER_TYPES["searxng"]

SEARXNG_RECORD: Final = AdmissionRecord(
    rate_per_minute=60,
    burst=5,
    concurrency=2,
    max_query_chars=500,
    max_query_words=None,
    languages_all=True,
    time_ranges=frozenset(TimeRange),
    cacheable=_TRAITS.cacheable,
    attribution_required=False,
    response_max_bytes=1024 * 1024,
    needs_credential=False,  # the credential is optional: only a proxy in front asks for it
    scrapes=_TRAITS.scrapes,
)

# rypsok's categories as SearXNG's: its programming category is "it".
SEARXNG_CATEGORIES: Final = {
    Category.GENERAL: "general",
    Category.NEWS: "news",
    Category.SCIENCE: "science",
    Category.CODE: "it",
}
_SAFE: Final = {SafeSearch.OFF: "0", SafeSearch.MODERATE: "1", SafeSearch.STRICT: "2"}
_DATE: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ]|\Z)")
# 401: a proxy in front refused the credential; 403: the instance refuses JSON or the caller.
_REFUSALS: Final = {401: Reason.AUTH_FAILURE, 403: Reason.BLOCKED}


class SearxngEngine(ApiEngine):
    """One SearXNG instance of the operator's."""

    RECORD = SEARXNG_RECORD

    def __init__(
        self, engine_id: str, http: EngineClient, base_url: str, api_key: Secret | None = None
    ) -> None:
        super().__init__(engine_id, http, parse_base_url(base_url))
        self._key = api_key

    async def search(self, query: EngineQuery) -> EngineAnswer:
        require_within_limits(SEARXNG_RECORD, query.query)
        params = [
            ("q", query.query),
            ("format", "json"),
            ("categories", SEARXNG_CATEGORIES[query.category]),
            ("language", query.language),
            ("safesearch", _SAFE[query.safe_search]),
            ("pageno", "1"),
        ]
        if query.time_range is not None:
            params.append(("time_range", str(query.time_range)))
        headers = {"Accept": "application/json"}
        if self._key is not None:
            headers["Authorization"] = f"Bearer {self._key.reveal()}"
        results, unresponsive = await ask_provider(
            self._http,
            self._origin,
            f"{self._root}/search",
            params=params,
            record=SEARXNG_RECORD,
            parse=_parse,
            refusals=_REFUSALS,
            headers=headers,
        )
        return EngineAnswer(results=results[: query.count], unresponsive=unresponsive)


def _parse(body: bytes) -> tuple[tuple[RawResult, ...], int]:
    document = json_object(body)
    results = []
    for item in object_items(document.get("results")):
        title, url = item.get("title"), item.get("url")
        content = item.get("content")
        snippet = content if isinstance(content, str) else ""
        if not (isinstance(title, str) and isinstance(url, str)):
            raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
        results.append(
            RawResult(
                title=title,
                url=url,
                snippet=snippet,
                date=calendar_date(item.get("publishedDate"), _DATE),
            )
        )
    unresponsive = document.get("unresponsive_engines", [])
    if not isinstance(unresponsive, list):
        raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
    return tuple(results), len(unresponsive)
