"""The Stack Exchange driver: API 2.3 `/search/advanced` (book, "Engines", admission records).

Keyless by default: the provider grants a daily quota per address, larger with an app key
(`api_key_env`/`api_key_file`, sent as the `key` parameter). Every answer carries
`quota_remaining` and, when the provider wants callers to slow down, `backoff` (seconds
before the method may be called again). Both are honoured through `ProviderWait`: the next
call within the wait sends nothing and fails as rate_limited with the time left. The
provider compresses every answer; the shared client decompresses it under the bound.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final

from rypsok.core.engines.answers import (
    ApiEngine,
    ProviderWait,
    api_root,
    ask_provider,
    json_object,
    object_items,
    require_within_limits,
    unix_date,
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

if TYPE_CHECKING:
    from rypsok.core.telemetry import Secret

__all__ = ["STACKEXCHANGE_ORIGIN", "STACKEXCHANGE_RECORD", "StackExchangeEngine"]

STACKEXCHANGE_ORIGIN: Final = EngineOrigin(scheme="https", host="api.stackexchange.com")
_ROOT: Final = "/2.3"
MAX_PAGESIZE: Final = 100  # the API's ceiling for pagesize

_TRAITS: Final = DRIVER_TYPES["stackexchange"]

STACKEXCHANGE_RECORD: Final = AdmissionRecord(
    rate_per_minute=10,  # the keyless quota is 300 a day per address: a slow, steady pace
    burst=2,
    concurrency=1,
    max_query_chars=200,
    max_query_words=None,
    languages_all=False,  # the sites are in one language each; no language parameter
    time_ranges=frozenset(TimeRange),
    cacheable=_TRAITS.cacheable,
    attribution_required=False,  # CC BY-SA, as Wikipedia: the question's URL links the source
    response_max_bytes=1024 * 1024,
    needs_credential=False,  # the key is optional: it raises the quota only
    scrapes=_TRAITS.scrapes,
)

_PERIOD: Final = {
    TimeRange.DAY: timedelta(days=1),
    TimeRange.WEEK: timedelta(weeks=1),
    TimeRange.MONTH: timedelta(days=31),
    TimeRange.YEAR: timedelta(days=366),
}
# A refused request (an error wrapper with its error_id) arrives with a 4xx status whose
# body is not read: 403 is the provider refusing the caller; 429 and 503 are its rate.
_REFUSALS: Final = {403: Reason.BLOCKED}


def _until_utc_midnight(now_unix: float) -> float:
    """Seconds to the next UTC midnight: when a spent daily quota is taken to return."""
    now = datetime.fromtimestamp(now_unix, tz=UTC)
    midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return (midnight - now).total_seconds()


class StackExchangeEngine(ApiEngine):
    """One Stack Exchange site (stackoverflow by default); keyless unless a key is set."""

    RECORD = STACKEXCHANGE_RECORD

    def __init__(
        self,
        engine_id: str,
        http: EngineClient,
        *,
        site: str = "stackoverflow",
        api_key: Secret | None = None,
        base_url: str | None = None,
    ) -> None:
        super().__init__(engine_id, http, api_root(base_url, STACKEXCHANGE_ORIGIN, _ROOT))
        self._site = site
        self._key = api_key
        self._wait = ProviderWait()

    def __repr__(self) -> str:
        return f"StackExchangeEngine(id={self._id!r}, site={self._site!r})"

    async def search(self, query: EngineQuery) -> EngineAnswer:
        require_within_limits(STACKEXCHANGE_RECORD, query.query)
        self._wait.check()
        params = [
            ("q", query.query),
            ("site", self._site),
            ("order", "desc"),
            ("sort", "relevance"),
            ("pagesize", str(min(query.count, MAX_PAGESIZE))),
            ("filter", "withbody"),  # a built-in filter: the question's body is the snippet
        ]
        if query.time_range is not None:
            since = time.time() - _PERIOD[query.time_range].total_seconds()
            params.append(("fromdate", str(int(since))))
        if self._key is not None:
            params.append(("key", self._key.reveal()))
        results, backoff, quota_spent = await ask_provider(
            self._http,
            self._origin,
            f"{self._root}/search/advanced",
            params=params,
            record=STACKEXCHANGE_RECORD,
            parse=_parse,
            refusals=_REFUSALS,
            rate_statuses=(429, 503),
        )
        if backoff is not None:
            self._wait.hold(backoff)
        if quota_spent:
            self._wait.hold(_until_utc_midnight(time.time()))
        return EngineAnswer(results=results[: query.count])


def _parse(body: bytes) -> tuple[tuple[RawResult, ...], float | None, bool]:
    """The results, the `backoff` in seconds (or None) and whether the quota is spent."""
    document = json_object(body)
    results = []
    for item in object_items(document.get("items")):
        title, link = item.get("title"), item.get("link")
        snippet = item.get("body", item.get("excerpt", ""))
        if not (isinstance(title, str) and isinstance(link, str) and isinstance(snippet, str)):
            raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
        results.append(
            RawResult(
                title=title, url=link, snippet=snippet, date=unix_date(item.get("creation_date"))
            )
        )
    backoff = document.get("backoff")
    wait = None
    if isinstance(backoff, int) and not isinstance(backoff, bool) and backoff > 0:
        wait = float(min(backoff, 86400))
    remaining = document.get("quota_remaining")
    spent = isinstance(remaining, int) and not isinstance(remaining, bool) and remaining <= 0
    return tuple(results), wait, spent
