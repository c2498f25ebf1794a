"""Validation, the privacy check and engine selection: everything before the first request.

REQ-SEARCH-006: every parameter is validated and the privacy check has run before any
engine is asked, so a refused call leaves no trace outside the process.

Implements REQ-SEARCH-001 to -005, REQ-ENG-007, LIM-S1 and LIM-S2.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import attrs

from rypsok.core import errors, secret_scan, telemetry
from rypsok.core.engines.limiter import query_within_limits
from rypsok.core.model import (
    Category,
    DetailReason,
    Notice,
    NoticeCode,
    Reason,
    SearchRequest,
    TimeRange,
)
from rypsok.core.search.ports import EngineSlot

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from rypsok.config.schema import Config

__all__ = [
    "PrivacyVerdict",
    "Selection",
    "ValidRequest",
    "check_privacy",
    "select_engines",
    "validate",
]


@attrs.frozen(kw_only=True)
class ValidRequest:
    query: str  # trimmed; after the privacy check, the text sent to the engines
    query_offset: int = (
        0  # characters trimmed from the front: positions count from the caller's text
    )
    category: Category
    max_results: int
    language: str
    language_given: bool  # the caller chose a language other than the default
    time_range: TimeRange | None


@attrs.frozen(kw_only=True)
class Selection:
    asked: tuple[tuple[EngineSlot, Any], ...]  # with the circuit's ticket, in order
    skipped: tuple[tuple[EngineSlot, Reason], ...]  # in selection order


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@functools.lru_cache(maxsize=16)
def _served_names(served: tuple[Category, ...]) -> tuple[str, ...]:
    """The served categories' names in vocabulary order: the same few for every call of a
    process, so kept rather than walked out of the enumeration each time."""
    return tuple(str(c) for c in Category if c in served)


def validate(request: SearchRequest, config: Config, served: Sequence[Category]) -> ValidRequest:
    """Every parameter, in the order of the tool's schema; raises ToolError."""
    search = config.search
    query = request.query
    if query is None:
        raise errors.required("query")
    if not isinstance(query, str):
        raise errors.invalid_type("query", "a string", 1, search.query_max_chars)
    query_offset = len(query) - len(query.lstrip())
    query = query.strip()
    if not 1 <= len(query) <= search.query_max_chars:
        raise errors.invalid_length("query", 1, search.query_max_chars)

    # Left out, the category is its default, general, and judged as the explicit value is:
    # a process that does not serve general refuses both alike (spec 02).
    served_names = _served_names(tuple(served))
    name = str(Category.GENERAL) if request.category is None else request.category
    if not isinstance(name, str) or name not in served_names:
        raise errors.invalid_allowed("category", served_names)
    category = Category(name)

    max_results = search.max_results
    if request.max_results is not None:
        if not _is_int(request.max_results):
            raise errors.invalid_type("max_results", "an integer", 1, search.max_results_ceiling)
        if not 1 <= request.max_results <= search.max_results_ceiling:
            raise errors.invalid_range("max_results", 1, search.max_results_ceiling)
        max_results = request.max_results

    language = search.languages[0]
    if request.language is not None:
        if not isinstance(request.language, str) or request.language not in search.languages:
            raise errors.invalid_allowed("language", search.languages)
        language = request.language

    time_range: TimeRange | None = None
    if request.time_range is not None:
        allowed = tuple(str(t) for t in TimeRange)
        if not isinstance(request.time_range, str) or request.time_range not in allowed:
            raise errors.invalid_allowed("time_range", allowed)
        time_range = TimeRange(request.time_range)

    return ValidRequest(
        query_offset=query_offset,
        query=query,
        category=category,
        max_results=max_results,
        language=language,
        language_given=language != search.languages[0],
        time_range=time_range,
    )


@attrs.frozen(kw_only=True)
class PrivacyVerdict:
    request: ValidRequest  # the query masked in mask mode
    notices: tuple[Notice, ...]
    carries_secret: bool  # warn mode let a secret through: never log this query


def check_privacy(valid: ValidRequest, mode: str) -> PrivacyVerdict:
    """The secret check of REQ-PRIV-002 in the operator's mode (LIM-P1); raises denied."""
    if mode == "off":
        # The call is not checked; the scan only keeps a secret out of a debug query log.
        carries = secret_scan.find_secret(valid.query) is not None
        return PrivacyVerdict(request=valid, notices=(), carries_secret=carries)
    if mode == "mask":
        masked, count = secret_scan.mask_secrets(valid.query)
        if count == 0:
            return PrivacyVerdict(request=valid, notices=(), carries_secret=False)
        notice = Notice(code=NoticeCode.CREDENTIAL_MASKED, count=count)
        return PrivacyVerdict(
            request=attrs.evolve(valid, query=masked), notices=(notice,), carries_secret=False
        )
    finding = secret_scan.find_secret(valid.query)
    if finding is None:
        return PrivacyVerdict(request=valid, notices=(), carries_secret=False)
    if mode == "warn":
        # The kind only: neither the query nor the secret reaches the log.
        telemetry.warn(
            "secret_in_query",
            kind=str(finding.kind),
            position=finding.position + valid.query_offset,
        )
        return PrivacyVerdict(request=valid, notices=(), carries_secret=True)
    raise errors.denied_secret(
        DetailReason.SECRET_IN_QUERY, finding.kind, finding.position + valid.query_offset
    )


def _static_skip(slot: EngineSlot, valid: ValidRequest) -> Reason | None:
    record = slot.record
    if valid.time_range is not None and valid.time_range not in record.time_ranges:
        return Reason.TIME_RANGE
    # An engine that cannot select a language serves the operator's default language as
    # configured; it cannot honor another one the caller chose.
    if valid.language_given and not record.languages_all:
        return Reason.LANGUAGE
    if not query_within_limits(record, valid.query):
        return Reason.QUERY_TOO_LONG
    return None


def selection_order(slots: Iterable[EngineSlot]) -> list[EngineSlot]:
    """Preference, lower first; equal preferences keep configuration order."""
    return sorted(slots, key=lambda s: (s.preference, s.order))


def select_engines(
    slots: Iterable[EngineSlot], valid: ValidRequest, *, now: float, limit: int
) -> Selection:
    """The engines to ask (at most `limit`, LIM-S8) and the ones skipped, with why.

    The cheap checks run before the circuit's, so that a probe is only claimed for an
    engine that will really be asked; the walk stops once `limit` engines are chosen.
    """
    asked: list[tuple[EngineSlot, Any]] = []
    skipped: list[tuple[EngineSlot, Reason]] = []
    for slot in selection_order(s for s in slots if str(valid.category) in s.categories):
        if len(asked) >= limit:
            break
        reason = _static_skip(slot, valid)
        ticket = None
        if reason is None:
            ticket = slot.circuit.admit(now)
            if ticket is None:
                reason = Reason.COOLDOWN
        if reason is not None:
            skipped.append((slot, reason))
            continue
        asked.append((slot, ticket))
    return Selection(asked=tuple(asked), skipped=tuple(skipped))
