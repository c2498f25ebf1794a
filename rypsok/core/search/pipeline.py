"""The search pipeline: validate → privacy → select → run → normalize → merge → rank →
clean → cut → outcome (external design §5 to §7).

Everything after the fan-out depends only on the engines' answers taken in selection
order, never on their arrival order (REQ-ARCH-004). It yields to Trio between engines and
between results, so that the call's hard stop (LIM-S7) and the caller's cancellation can
end it there: post-processing runs under the same bound as the fan-out.

Implements REQ-SEARCH-007, REQ-SEARCH-008, REQ-ENG-011, REQ-ENG-012, REQ-AGG-004,
REQ-RANK-007, REQ-CTX-001, REQ-CTX-007, REQ-SEC-004, REQ-CMP-003, REQ-ERR-001, REQ-ERR-005,
REQ-LIFE-001, LIM-S3 and LIM-S9.
"""

from __future__ import annotations

import datetime
import math
import re
from fractions import Fraction
from functools import partial
from typing import TYPE_CHECKING, Final

import attrs
import trio

from rypsok.core import errors, telemetry, untrusted_text
from rypsok.core.engines.base import EngineQuery
from rypsok.core.model import (
    Category,
    Notice,
    NoticeCode,
    Outcome,
    Reason,
    SearchRequest,
    SearchResponse,
    SearchResult,
    ToolError,
)
from rypsok.core.search.aggregate import EngineOutcome, run_engines
from rypsok.core.search.cache import CacheUse
from rypsok.core.search.rank import MergedResult, Observation, merge_and_rank
from rypsok.core.search.select import (
    ValidRequest,
    check_privacy,
    select_engines,
    selection_order,
    validate,
)
from rypsok.core.urls import NormalizedUrl, normalize_url, url_host

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from rypsok.config.schema import Config
    from rypsok.core.search.cache import AnswerCache, Derived
    from rypsok.core.search.ports import AdmissionPort, EngineSlot

__all__ = ["CALL_MARGIN_S", "SearchRun", "run_search"]

CALL_MARGIN_S = Fraction(3, 10)  # LIM-S7 = LIM-S4 + 300 ms

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}\Z")


@attrs.frozen(kw_only=True)
class SearchRun:
    """A finished search: the response and the URLs it returned (for strict mode)."""

    response: SearchResponse
    urls: tuple[str, ...]


def _valid_date(value: str | None) -> str | None:
    if value is None or _DATE.match(value) is None:
        return None
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        return None
    return value


def _operator_hosts(config: Config) -> frozenset[str]:
    """The hosts of the engines' configured base_url, as `normalize_url` takes them (a few
    engines: read again for each answer rather than hashing the configuration to keep it)."""
    hosts = (url_host(e.base_url) for e in config.engines if e.base_url is not None)
    return frozenset(h for h in hosts if h is not None)


async def _observations(
    outcomes: Sequence[EngineOutcome], per_engine: int, operator_hosts: frozenset[str]
) -> tuple[list[Observation], int, int]:
    """Normalize every answer, in selection order; counts of url_invalid and url_too_long."""
    observations: list[Observation] = []
    invalid = too_long = 0
    started = False
    for position, outcome in enumerate(outcomes):
        if outcome.results is None:
            continue
        if started:
            await trio.lowlevel.checkpoint()  # LIM-S7 and cancellation act between engines
        started = True
        derived = outcome.derived
        for rank, raw in enumerate(outcome.results[:per_engine], start=1):
            if derived is None:
                normalized = normalize_url(raw.url, operator_hosts)
            else:
                # A cached answer keeps its normalized URLs (a pure function of the URL and
                # the process's configuration).
                normalized = derived.get(
                    ("url", raw.url),
                    partial(normalize_url, raw.url, operator_hosts),
                    _normalized_bytes,
                )
            if normalized is Reason.URL_INVALID:
                invalid += 1
                continue
            if normalized is Reason.URL_TOO_LONG:
                too_long += 1
                continue
            assert not isinstance(normalized, Reason)
            observations.append(
                Observation(
                    engine=outcome.slot.id,
                    # The configured value: equal preferences tie, and the comparison
                    # key decides (REQ-RANK-006); the position only orders observations.
                    preference=outcome.slot.preference,
                    order=position,
                    rank=rank,
                    url=normalized.url,
                    key=normalized.key,
                    https=normalized.https,
                    title=raw.title,
                    snippet=raw.snippet,
                    date=_valid_date(raw.date),
                    decoded=raw.decoded,
                )
            )
    return observations, invalid, too_long


@attrs.define
class _Cleaning:
    titles_cut: int = 0
    snippets_cut: int = 0
    removed: int = 0
    flagged_kept: int = 0
    flagged_dropped: int = 0


def _normalized_bytes(value: NormalizedUrl | Reason) -> int:
    if isinstance(value, Reason):
        return 0
    return len(value.url.encode()) + len(value.key.encode())


def _cleaned_bytes(value: untrusted_text.Cleaned) -> int:
    return len(value.text.encode("utf-8", "surrogatepass"))


def _clean(
    memo: Derived | None, decoded: bool, text: str, max_chars: int
) -> untrusted_text.Cleaned:
    clean = untrusted_text.clean_decoded_text if decoded else untrusted_text.clean_markup_text
    if memo is None:
        return clean(text, max_chars)
    return memo.get(
        ("clean", decoded, max_chars, text), partial(clean, text, max_chars), _cleaned_bytes
    )


def _memo_for(merged: MergedResult, memos: Mapping[str, Derived]) -> Derived | None:
    """The kept derivations of a cached answer the merged result's text came from; only
    when every observation is from a cached answer, so that nothing derived from an engine
    whose answers may not be stored is ever kept (REQ-CMP-007)."""
    if not memos or any(o.engine not in memos for o in merged.observations):
        return None
    return memos[merged.observations[0].engine]


async def _clean_and_cut(
    ranked: Sequence[MergedResult],
    config: Config,
    attribution: Callable[[MergedResult], bool],
    max_results: int,
    memos: Mapping[str, Derived],
) -> tuple[list[SearchResult], _Cleaning]:
    """The content boundary on each result in rank order until `max_results` are kept.

    Counts describe what the caller receives: a result below the cut is never cleaned,
    so its truncations are not reported. `memos` are the cached answers' kept
    derivations, by engine.
    """
    search = config.search
    stats = _Cleaning()
    results: list[SearchResult] = []
    for index, merged in enumerate(ranked):
        if len(results) >= max_results:
            break
        if index:
            # LIM-S7 and cancellation act between results (before the first, the caller's
            # own checkpoint after ranking did).
            await trio.lowlevel.checkpoint()
        memo = _memo_for(merged, memos)
        title = _clean(memo, merged.decoded, merged.title, search.title_max_chars)
        snippet = _clean(memo, merged.decoded, merged.snippet, search.snippet_max_chars)
        flagged = title.instruction_like or snippet.instruction_like
        if flagged and search.drop_flagged_results:
            stats.flagged_dropped += 1
            continue
        stats.titles_cut += int(title.truncated)
        stats.snippets_cut += int(snippet.truncated)
        stats.removed += title.removed + snippet.removed
        stats.flagged_kept += int(flagged)
        results.append(
            SearchResult(
                title=title.text,
                url=merged.url,
                snippet=snippet.text,
                date=merged.date,
                engines=merged.engines if attribution(merged) else None,
            )
        )
    return results, stats


def _count_notice(code: NoticeCode, count: int, reason: Reason | None = None) -> list[Notice]:
    return [Notice(code=code, reason=reason, count=count)] if count else []


def _min_retry_ms(outcomes: Sequence[EngineOutcome], cap_s: float) -> int | None:
    """The shortest wait a provider asked for, never above the longest cooldown: by then
    the circuit probes the engine again (LIM-B3, LIM-B4)."""
    waits = [o.retry_after_s for o in outcomes if o.retry_after_s is not None]
    if not waits:
        return None
    return max(1, round(min(min(waits), cap_s) * 1000))


# The parameters a skip reason says the call asked for and no engine could honor.
_UNMET: Final = {
    Reason.TIME_RANGE: "time_range",
    Reason.LANGUAGE: "language",
    Reason.QUERY_TOO_LONG: "the query's length",
}


def _no_engine(skips: Sequence[tuple[EngineSlot, Reason]], now: float) -> ToolError:
    """N = 0: every engine of the category was skipped. When some rest or wait for their
    rate, retrying helps, after the shortest wait rypsok knows (their cooldown's end,
    which holds a provider's Retry-After, or the limiter's next turn); when every skip was
    for what the call asks, retrying the same call cannot help."""
    waits: list[float] = []
    waiting = False
    unmet: list[str] = []
    for slot, reason in skips:
        if reason is Reason.COOLDOWN:
            waiting = True
            resumes = slot.circuit.resumes_at()
            if resumes is not None:
                waits.append(resumes - now)
        elif reason is Reason.RATE_LIMITED:
            waiting = True
            waits.append(slot.limiter.next_turn(now) - now)
        elif _UNMET[reason] not in unmet:
            unmet.append(_UNMET[reason])
    retry_ms = max(1, math.ceil(min(waits) * 1000)) if waits else None
    ordered = [word for word in _UNMET.values() if word in unmet]
    return errors.no_engine_skipped(retry_ms, waiting=waiting, unmet=ordered)


async def run_search(
    request: SearchRequest,
    *,
    config: Config,
    slots: Sequence[EngineSlot],
    served: Sequence[Category],
    start: float,
    caller: str = telemetry.LOCAL_CALLER,
    cache: AnswerCache | None = None,
    admission: AdmissionPort | None = None,
) -> SearchRun:
    """One web_search call; raises ToolError, or trio.Cancelled when the caller cancels.

    `start` is the call's start on the Trio clock: the deadlines are measured from it.
    `cache`, when the operator enabled it, is keyed by `caller` (REQ-CACHE-004).
    `admission` decides the caller's tool limit with the engines' turns ([coordination]).
    """
    search = config.search
    valid = validate(request, config, served)
    verdict = check_privacy(valid, config.privacy.secret_detection)
    valid, privacy_notices = verdict.request, verdict.notices
    if not verdict.carries_secret:
        # Only in the operator's explicit debug mode (LIM-P3), and never a secret (I6).
        telemetry.log_query("search_query", valid.query)

    selection = select_engines(
        slots, valid, now=trio.current_time(), limit=search.engines_per_request
    )
    if not selection.asked:
        if selection.skipped:
            raise _no_engine(selection.skipped, trio.current_time())
        raise errors.no_engine()

    # Engines are cut at LIM-S4 − LIM-S6, so that normalization, ranking and cleaning run
    # inside the reserve and the call returns within LIM-S4 (REQ-AGG-003).
    fanout_deadline = start + (search.deadline_ms - search.reserve_ms) / 1000
    # A query that carries a secret (warn mode let it through) is never kept as a key.
    use = CacheUse(cache, caller) if cache is not None and not verdict.carries_secret else None
    outcomes = await run_engines(
        selection.asked,
        _engine_query(valid, config),
        deadline=fanout_deadline,
        timeout_s=search.engine_timeout_ms / 1000,
        cache=use,
        admission=admission,
    )
    return await _respond(valid, config, selection.skipped, outcomes, privacy_notices)


def _engine_query(valid: ValidRequest, config: Config) -> EngineQuery:
    return EngineQuery(
        query=valid.query,
        category=valid.category,
        language=valid.language,
        region=config.search.region,
        safe_search=config.search.safe_search,
        time_range=valid.time_range,
        count=config.search.results_per_engine,
    )


async def _respond(
    valid: ValidRequest,
    config: Config,
    selection_skips: Sequence[tuple[EngineSlot, Reason]],
    outcomes: Sequence[EngineOutcome],
    privacy_notices: Sequence[Notice],
) -> SearchRun:
    answered = [o for o in outcomes if o.answered]
    failed = [o for o in outcomes if o.failure is not None]
    skips = list(selection_skips) + [(o.slot, o.skipped) for o in outcomes if o.skipped]
    if len(skips) > 1:
        position = {id(slot): i for i, slot in enumerate(selection_order(s for s, _ in skips))}
        skips.sort(key=lambda pair: position[id(pair[0])])

    if not answered:
        if not failed:
            # Every asked engine was held back by its rate: nobody was queried (N = 0).
            raise _no_engine(skips, trio.current_time())
        if all(o.failure is Reason.TIMEOUT for o in failed):
            raise errors.deadline_search()
        raise errors.all_failed(_min_retry_ms(failed, config.resilience.max_cooldown_s))

    observations, invalid, too_long = await _observations(
        outcomes, config.search.results_per_engine, _operator_hosts(config)
    )
    ranked = merge_and_rank(observations)
    await trio.lowlevel.checkpoint()  # between ranking and cleaning
    requires = {o.slot.id for o in outcomes if o.slot.record.attribution_required}

    def attribution(merged: MergedResult) -> bool:
        return config.search.engine_attribution or any(e in requires for e in merged.engines)

    memos = {o.slot.id: o.derived for o in outcomes if o.derived is not None}
    results, stats = await _clean_and_cut(ranked, config, attribution, valid.max_results, memos)

    notices: list[Notice] = list(privacy_notices)
    notices += [
        Notice(code=NoticeCode.ENGINE_SKIPPED, engine=slot.id, reason=reason)
        for slot, reason in skips
    ]
    notices += [
        Notice(code=NoticeCode.ENGINE_UNAVAILABLE, engine=o.slot.id, reason=o.failure)
        for o in failed
    ]
    # A meta-search engine that answered without some of its own sources (SearXNG's
    # unresponsive_engines): that engine is partly unavailable; the count says how much.
    short = [o for o in outcomes if o.unresponsive > 0]
    notices += [
        Notice(code=NoticeCode.ENGINE_UNAVAILABLE, engine=o.slot.id, count=o.unresponsive)
        for o in short
    ]
    notices += [
        Notice(code=NoticeCode.FROM_CACHE, engine=o.slot.id) for o in outcomes if o.from_cache
    ]
    notices += _count_notice(NoticeCode.RESULTS_DROPPED, invalid, Reason.URL_INVALID)
    notices += _count_notice(NoticeCode.RESULTS_DROPPED, too_long, Reason.URL_TOO_LONG)
    notices += _count_notice(NoticeCode.TITLE_TRUNCATED, stats.titles_cut)
    notices += _count_notice(NoticeCode.SNIPPET_TRUNCATED, stats.snippets_cut)
    notices += _count_notice(NoticeCode.CHARACTERS_REMOVED, stats.removed)
    notices += _count_notice(NoticeCode.INSTRUCTION_LIKE_CONTENT, stats.flagged_kept)
    notices += _count_notice(
        NoticeCode.RESULTS_DROPPED, stats.flagged_dropped, Reason.INSTRUCTION_LIKE_CONTENT
    )

    if not results:
        outcome = Outcome.EMPTY
    elif failed or short:
        outcome = Outcome.PARTIAL
    else:
        outcome = Outcome.OK
    response = SearchResponse(outcome=outcome, notices=tuple(notices), results=tuple(results))
    return SearchRun(response=response, urls=tuple(r.url for r in results))
