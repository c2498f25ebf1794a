"""The Brave Search driver: the web and news endpoints (book, chapter 19, "Brave Search").

The origin is fixed to https://api.search.brave.com: no configuration can point the key
elsewhere. Tests and the conformance harness route it to a local server through the
injected transport of `EngineHttp`, which leaves the request (its Host, its token) as
production sends it.
"""

from __future__ import annotations

import json
import re
from datetime import date
from typing import TYPE_CHECKING, Any, Final, Literal

from rypsok.core.engines.base import (
    AdmissionRecord,
    EngineAnswer,
    EngineFailure,
    EngineQuery,
    RawResult,
)
from rypsok.core.engines.http import EngineHttp, EngineOrigin, EngineResponse, parse_retry_after
from rypsok.core.engines.limiter import query_within_limits
from rypsok.core.model import Reason, TimeRange
from rypsok.core.telemetry import Secret

if TYPE_CHECKING:
    import httpx

__all__ = ["BRAVE_ORIGIN", "BRAVE_RECORD", "BraveEngine", "parse_rate_limit_reset"]

BRAVE_ORIGIN: Final = EngineOrigin(scheme="https", host="api.search.brave.com")
MAX_COUNT: Final = 20  # the API's ceiling for count

BRAVE_RECORD: Final = AdmissionRecord(
    rate_per_minute=60,
    burst=1,  # one per second: the plan's unit; no burst is granted on top of it
    concurrency=2,
    max_query_chars=600,
    max_query_words=75,
    languages_all=True,
    time_ranges=frozenset(TimeRange),
    cacheable=False,
    attribution_required=False,
    response_max_bytes=1024 * 1024,
    needs_credential=True,
    scrapes=False,
)

_PATHS: Final = {"web": "/res/v1/web/search", "news": "/res/v1/news/search"}
_FRESHNESS: Final = {
    TimeRange.DAY: "pd",
    TimeRange.WEEK: "pw",
    TimeRange.MONTH: "pm",
    TimeRange.YEAR: "py",
}
_DATE: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ]|\Z)")


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


def _page_date(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    m = _DATE.match(value)
    if m is None:
        return None
    try:
        return date(int(m[1]), int(m[2]), int(m[3])).isoformat()
    except ValueError:
        return None


class BraveEngine:
    """One Brave endpoint with its key; the key goes in X-Subscription-Token only."""

    def __init__(
        self,
        engine_id: str,
        http: EngineHttp,
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
        if not query_within_limits(BRAVE_RECORD, query.query):
            # The pipeline skips such a query first; this keeps the driver honest alone.
            raise EngineFailure(failure_class=Reason.REQUEST_FAILURE)
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
        _classify_status(response)
        return EngineAnswer(results=self._parse(response.body))

    def _parse(self, body: bytes) -> tuple[RawResult, ...]:
        try:
            document: Any = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise EngineFailure(failure_class=Reason.PARSE_FAILURE) from None
        if not isinstance(document, dict):
            raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
        if self._endpoint == "web":
            # Brave leaves the "web" section out when it has no web result.
            section = document.get("web", {"results": []})
            if not isinstance(section, dict):
                raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
            items = section.get("results", [])
        else:
            items = document.get("results", [])
        if not isinstance(items, list):
            raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
        results = []
        for item in items:
            if not isinstance(item, dict):
                raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
            title, url = item.get("title"), item.get("url")
            snippet = item.get("description", "")
            if not (isinstance(title, str) and isinstance(url, str) and isinstance(snippet, str)):
                raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
            results.append(
                RawResult(
                    title=title, url=url, snippet=snippet, date=_page_date(item.get("page_age"))
                )
            )
        return tuple(results)


def _classify_status(response: EngineResponse) -> None:
    status = response.status
    if 200 <= status < 300:
        return
    if status == 429:
        wait = parse_retry_after(response.headers)
        if wait is None:
            wait = parse_rate_limit_reset(response.headers)
        raise EngineFailure(failure_class=Reason.RATE_LIMITED, retry_after_s=wait)
    if status in (401, 403):
        raise EngineFailure(failure_class=Reason.AUTH_FAILURE)
    raise EngineFailure(failure_class=Reason.REQUEST_FAILURE)
