"""The Brave Search driver: the web and news endpoints (book, chapter 19, "Brave Search").

The origin is fixed to https://api.search.brave.com: no configuration can point the key
elsewhere. Tests and the conformance harness route it to a local server through the
injected transport of `EngineClient`, which leaves the request (its Host, its token) as
production sends it.

REQ-ARCH-002, REQ-ENG-005 and REQ-MAIN-001: everything of this provider lives in this
module.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, Literal

from rypsok.core.engines.answers import (
    calendar_date,
    json_object,
    object_items,
    raise_for_status,
    require_within_limits,
)
from rypsok.core.engines.base import (
    AdmissionRecord,
    EngineAnswer,
    EngineFailure,
    EngineQuery,
    RawResult,
)
from rypsok.core.engines.client import EngineClient, EngineOrigin, parse_retry_after
from rypsok.core.model import Reason, TimeRange
from rypsok.core.telemetry import Secret
from rypsok.shared.drivers import DRIVER_TYPES

if TYPE_CHECKING:
    import httpx

__all__ = ["BRAVE_ORIGIN", "BRAVE_RECORD", "BraveEngine", "parse_rate_limit_reset"]

BRAVE_ORIGIN: Final = EngineOrigin(scheme="https", host="api.search.brave.com")
MAX_COUNT: Final = 20  # the API's ceiling for count

# The traits the configuration reads too are defined once, with the driver types.
_TRAITS: Final = DRIVER_TYPES["brave"]

BRAVE_RECORD: Final = AdmissionRecord(
    rate_per_minute=60,
    burst=1,  # one per second: the plan's unit; no burst is granted on top of it
    concurrency=2,
    max_query_chars=600,
    max_query_words=75,
    languages_all=True,
    time_ranges=frozenset(TimeRange),
    cacheable=_TRAITS.cacheable,
    attribution_required=False,
    response_max_bytes=1024 * 1024,
    needs_credential=_TRAITS.keyed,
    scrapes=_TRAITS.scrapes,
)

_PATHS: Final = {"web": "/res/v1/web/search", "news": "/res/v1/news/search"}
_FRESHNESS: Final = {
    TimeRange.DAY: "pd",
    TimeRange.WEEK: "pw",
    TimeRange.MONTH: "pm",
    TimeRange.YEAR: "py",
}
_DATE: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ]|\Z)")
# Chapter 19's error table: both refusals are auth_failure; 429 is read by _rate_limit_wait.
_REFUSALS: Final = {401: Reason.AUTH_FAILURE, 403: Reason.AUTH_FAILURE}


def parse_rate_limit_reset(headers: httpx.Headers) -> float | None:
    """Seconds from X-RateLimit-Reset, Brave's per-window list ("1, 1419704").

    The windows whose X-RateLimit-Remaining is 0 are the ones used up; the longest of their
    resets is the wait. Without a usable Remaining list, the shortest reset is taken: the
    per-second window is the one an ordinary 429 is about.
    """
    raw = headers.get("x-ratelimit-reset")
    if raw is None:
        return None
    try:
        resets = [float(int(part.strip())) for part in raw.split(",")]
    except ValueError:
        return None
    if not resets:
        return None
    remaining_raw = headers.get("x-ratelimit-remaining")
    if remaining_raw is not None:
        try:
            remaining = [int(part.strip()) for part in remaining_raw.split(",")]
        except ValueError:
            remaining = []
        if len(remaining) == len(resets):
            spent = [r for r, left in zip(resets, remaining, strict=True) if left <= 0]
            if spent:
                return max(spent)
    return min(resets)


def _rate_limit_wait(headers: httpx.Headers) -> float | None:
    wait = parse_retry_after(headers)
    return wait if wait is not None else parse_rate_limit_reset(headers)


class BraveEngine:
    """One Brave endpoint with its key; the key goes in X-Subscription-Token only."""

    def __init__(
        self,
        engine_id: str,
        http: EngineClient,
        api_key: str | Secret,
        endpoint: Literal["web", "news"] | str = "web",
    ) -> None:
        if endpoint not in _PATHS:
            raise ValueError("engines endpoint is web or news")
        self._id = engine_id
        self._http = http
        self._key = api_key if isinstance(api_key, Secret) else Secret(api_key)
        self._endpoint = endpoint

    @property
    def id(self) -> str:
        return self._id

    @property
    def record(self) -> AdmissionRecord:
        return BRAVE_RECORD

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def __repr__(self) -> str:
        return f"BraveEngine(id={self._id!r}, endpoint={self._endpoint!r})"

    async def search(self, query: EngineQuery) -> EngineAnswer:
        require_within_limits(BRAVE_RECORD, query.query)
        params = [
            ("q", query.query),
            ("count", str(min(query.count, MAX_COUNT))),
            ("search_lang", query.language.split("-", 1)[0].lower()),
            ("country", query.region),
            ("safesearch", str(query.safe_search)),
        ]
        if query.time_range is not None:
            params.append(("freshness", _FRESHNESS[query.time_range]))
        response = await self._http.get(
            BRAVE_ORIGIN,
            _PATHS[self._endpoint],
            params=params,
            headers={"Accept": "application/json", "X-Subscription-Token": self._key.reveal()},
            max_bytes=BRAVE_RECORD.response_max_bytes,
        )
        raise_for_status(response, _REFUSALS, _rate_limit_wait)
        return EngineAnswer(results=await self._http.off_loop(self._parse, response.body))

    def _parse(self, body: bytes) -> tuple[RawResult, ...]:
        document = json_object(body)
        if self._endpoint == "web":
            # Brave leaves the "web" section out when it has no web result.
            section = document.get("web", {"results": []})
            if not isinstance(section, dict):
                raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
            items = section.get("results", [])
        else:
            items = document.get("results", [])
        results = []
        for item in object_items(items):
            title, url = item.get("title"), item.get("url")
            snippet = item.get("description", "")
            if not (isinstance(title, str) and isinstance(url, str) and isinstance(snippet, str)):
                raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
            results.append(
                RawResult(
                    title=title,
                    url=url,
                    snippet=snippet,
                    date=calendar_date(item.get("page_age"), _DATE),
                )
            )
        return tuple(results)
