"""What the JSON drivers do alike with an answer: decode it, map its status, read its dates.

Which statuses mean what, where the results sit in the document and which date format a
provider writes stay in each driver; this module holds only the steps that are the same.

Implements REQ-RES-002.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import trio

from rypsok.core.engines.base import EngineFailure
from rypsok.core.engines.client import EngineOrigin, parse_base_url, parse_retry_after
from rypsok.core.engines.limiter import query_within_limits
from rypsok.core.model import Reason

if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Collection, Mapping, Sequence

    import httpx

    from rypsok.core.engines.base import AdmissionRecord
    from rypsok.core.engines.client import EngineClient, EngineResponse

_T = TypeVar("_T")

__all__ = [
    "ApiEngine",
    "ProviderWait",
    "api_root",
    "ask_provider",
    "calendar_date",
    "json_object",
    "object_items",
    "raise_for_status",
    "require_within_limits",
    "unix_date",
]


def require_within_limits(record: AdmissionRecord, query: str) -> None:
    """A request failure for a query above the record's limits.

    The pipeline skips such a query before it reaches a driver; this keeps a driver honest
    when it is called alone.
    """
    if not query_within_limits(record, query):
        raise EngineFailure(failure_class=Reason.REQUEST_FAILURE)


def json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object; anything else is a parse failure."""
    try:
        document: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        # RecursionError: a body nested deeper than the decoder's recursion bound is a
        # malformed answer of the provider, not a defect of the driver (REQ-SEC-014).
        raise EngineFailure(failure_class=Reason.PARSE_FAILURE) from None
    if not isinstance(document, dict):
        raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
    return document


def object_items(items: object) -> list[dict[str, Any]]:
    """A result list whose every entry is a JSON object; anything else is a parse failure."""
    if not isinstance(items, list):
        raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
    for item in items:
        if not isinstance(item, dict):
            raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
    return items


def raise_for_status(
    response: EngineResponse,
    refusals: Mapping[int, Reason],
    wait: Callable[[httpx.Headers], float | None] = parse_retry_after,
    rate_statuses: Collection[int] = (429,),
) -> None:
    """Nothing for a 2xx; else the failure its status means.

    A status in `rate_statuses` (429; some providers throttle with 503 too) is rate_limited
    with the wait `wait` reads from the headers; a status in `refusals` is the driver's own
    class; any other status is a request failure.
    """
    status = response.status
    if 200 <= status < 300:
        return
    if status in rate_statuses:
        raise EngineFailure(failure_class=Reason.RATE_LIMITED, retry_after_s=wait(response.headers))
    raise EngineFailure(failure_class=refusals.get(status, Reason.REQUEST_FAILURE))


def calendar_date(value: object, pattern: re.Pattern[str]) -> str | None:
    """YYYY-MM-DD from a provider's date field, or None when it is absent or not a date.

    `pattern` matches the start of the field and captures year, month and day.
    """
    if not isinstance(value, str):
        return None
    m = pattern.match(value)
    if m is None:
        return None
    try:
        return date(int(m[1]), int(m[2]), int(m[3])).isoformat()
    except ValueError:
        return None


def unix_date(value: object) -> str | None:
    """YYYY-MM-DD (UTC) from a provider's Unix time in seconds, or None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value):
        return None
    try:
        return datetime.fromtimestamp(value, tz=UTC).date().isoformat()
    except (OverflowError, OSError, ValueError):
        return None


def api_root(base_url: str | None, origin: EngineOrigin, path: str) -> tuple[EngineOrigin, str]:
    """The provider's API root: its own (`origin`, `path`), or the configured `base_url`
    (a local replay in tests and the conformance harness, or a mirror)."""
    if base_url is None:
        return origin, path
    return parse_base_url(base_url)


class ProviderWait:
    """A wait a provider asked for inside a successful answer (Stack Exchange's `backoff`,
    its spent daily quota): until it ends, the driver sends nothing and fails at once with
    rate_limited and the time left, which opens the engine's circuit for that long
    (LIM-B4), so engine_status shows the engine resting."""

    def __init__(self) -> None:
        self._until = -math.inf

    def hold(self, seconds: float) -> None:
        """Wait `seconds` from now (a later end is kept)."""
        if seconds > 0:
            self._until = max(self._until, trio.current_time() + seconds)

    def check(self) -> None:
        """EngineFailure(rate_limited, the time left) while the wait lasts."""
        left = self._until - trio.current_time()
        if left > 0:
            raise EngineFailure(failure_class=Reason.RATE_LIMITED, retry_after_s=left)


async def ask_provider(
    http: EngineClient,
    origin: EngineOrigin,
    path: str,
    *,
    params: Sequence[tuple[str, str]],
    record: AdmissionRecord,
    parse: Callable[[bytes], _T],
    refusals: Mapping[int, Reason],
    headers: Mapping[str, str] | None = None,
    rate_statuses: Collection[int] = (429,),
) -> _T:
    """One GET of an API driver: the answer bounded by its record, its status classified,
    its body parsed off the event loop (`EngineClient.off_loop`)."""
    response = await http.get(
        origin,
        path,
        params=params,
        headers=headers if headers is not None else {"Accept": "application/json"},
        max_bytes=record.response_max_bytes,
    )
    raise_for_status(response, refusals, rate_statuses=rate_statuses)
    return await http.off_loop(parse, response.body)


class ApiEngine:
    """What the keyless API drivers share: an id, the record of their class (`RECORD`), the
    HTTP client, and the API root the requests go to."""

    RECORD: ClassVar[AdmissionRecord]

    def __init__(self, engine_id: str, http: EngineClient, root: tuple[EngineOrigin, str]) -> None:
        self._id = engine_id
        self._http = http
        self._origin, self._root = root

    @property
    def id(self) -> str:
        return self._id

    @property
    def record(self) -> AdmissionRecord:
        return self.RECORD

    def __repr__(self) -> str:
        # Never a key or an address: the id is all a log or an error needs.
        return f"{type(self).__name__}(id={self._id!r})"
