"""What the JSON drivers do alike with an answer: decode it, map its status, read its dates.

Which statuses mean what, where the results sit in the document and which date format a
provider writes stay in each driver; this module holds only the steps that are the same.

Implements REQ-RES-002.
"""

from __future__ import annotations

import json
from datetime import date
from typing import TYPE_CHECKING, Any

from rypsok.core.engines.base import EngineFailure
from rypsok.core.engines.http import parse_retry_after
from rypsok.core.engines.limiter import query_within_limits
from rypsok.core.model import Reason

if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Mapping

    import httpx

    from rypsok.core.engines.base import AdmissionRecord
    from rypsok.core.engines.http import EngineResponse

__all__ = [
    "calendar_date",
    "json_object",
    "object_items",
    "raise_for_status",
    "require_within_limits",
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
) -> None:
    """Nothing for a 2xx; else the failure its status means.

    429 is rate_limited with the wait `wait` reads from the headers; a status in
    `refusals` is the driver's own class; any other status is a request failure.
    """
    status = response.status
    if 200 <= status < 300:
        return
    if status == 429:
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
