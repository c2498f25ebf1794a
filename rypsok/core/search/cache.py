"""The result cache (external design §12; REQ-CACHE-001..007, LIM-K1..K4).

One entry per engine answer, keyed by the caller, the engine and the engine request, held in
memory only and for at most `ttl_s` on the Trio clock (monotonic). It is a convenience and
never a dependency: the aggregator treats any failure inside the cache as a miss, and a
search goes on exactly as without it (REQ-CACHE-006).

Only raw engine answers are stored, before the content boundary: a hit goes through the same
normalization, ranking and cleaning as a fresh answer, so the cache cannot change what the
boundary promises.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import TYPE_CHECKING, Protocol, TypeVar

import attrs

from rypsok.core import telemetry
from rypsok.core.engines.base import RawResult
from rypsok.core.model import SafeSearch, TimeRange

if TYPE_CHECKING:
    from collections.abc import Callable

    from rypsok.config.schema import CacheConfig
    from rypsok.core.engines.base import EngineQuery

__all__ = [
    "AnswerCache",
    "CacheKey",
    "CacheUse",
    "CachedAnswer",
    "Derived",
    "ResultCache",
    "entry_bytes",
]

# Fixed cost counted for each result beside its text: keeps an answer of many empty
# results from being "free" against LIM-K4.
_PER_RESULT_BYTES = 16
# The same for each derived value kept with an answer (its slot and its key's tuple).
_DERIVED_OVERHEAD = 64
_MISSING = object()
T = TypeVar("T")


@attrs.frozen(kw_only=True)
class CacheKey:
    """Who asked, which engine, and the engine request exactly as the driver received it."""

    caller: str
    engine: str
    query: str  # after the privacy check (masked in mask mode)
    language: str
    region: str
    safe_search: SafeSearch
    time_range: TimeRange | None
    count: int

    @classmethod
    def of(cls, caller: str, engine: str, query: EngineQuery) -> CacheKey:
        return cls(
            caller=caller,
            engine=engine,
            query=query.query,
            language=query.language,
            region=query.region,
            safe_search=query.safe_search,
            time_range=query.time_range,
            count=query.count,
        )


def entry_bytes(results: tuple[RawResult, ...]) -> int:
    """The size LIM-K4 bounds: the raw titles, snippets and URLs (and dates), UTF-8."""
    total = 0
    for r in results:
        total += _PER_RESULT_BYTES
        for text in (r.title, r.url, r.snippet, r.date or ""):
            total += len(text.encode("utf-8", "surrogatepass"))
    return total


class Derived:
    """What the pipeline derives from one stored answer's text (normalized URLs, cleaned
    titles and snippets), kept with the answer so that a hit does not derive it again.

    The functions behind it are pure, so a kept value is the value the pipeline would
    compute. It is bounded by what the entry's LIM-K4 budget leaves after the raw answer:
    the entry, raw and derived together, stays within `max_entry_bytes`.
    """

    __slots__ = ("_budget", "_values")

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._values: dict[object, object] = {}

    def get(self, key: object, make: Callable[[], T], made: Callable[[T], int]) -> T:
        """The kept value for `key`, or `make()` kept when `made(value)` bytes still fit."""
        found = self._values.get(key, _MISSING)
        if found is not _MISSING:
            return found  # type: ignore[return-value]
        value = make()
        cost = _DERIVED_OVERHEAD + made(value)
        if cost <= self._budget:
            self._budget -= cost
            self._values[key] = value
        return value


class CachedAnswer(tuple[RawResult, ...]):
    """A stored answer as a lookup returns it: the raw results, with what was derived."""

    derived: Derived

    def __new__(cls, results: tuple[RawResult, ...], derived: Derived) -> CachedAnswer:
        answer = super().__new__(cls, results)
        answer.derived = derived
        return answer


@attrs.frozen
class _Entry:
    results: CachedAnswer
    expires: float


class AnswerCache(Protocol):
    """What the aggregator needs of a cache; the seam where tests put a failing one."""

    def get(self, key: CacheKey, now: float) -> tuple[RawResult, ...] | None: ...

    def put(self, key: CacheKey, results: tuple[RawResult, ...], now: float) -> bool: ...


class ResultCache:
    """A bounded LRU map from CacheKey to an engine's raw results, with expiry.

    Every entry lives `ttl_s`; since that is one constant, entries expire in the order they
    were stored, and a queue in that order lets each operation drop the expired ones in
    amortised constant time, so no query outlives its lifetime in memory (REQ-CACHE-007).
    Not thread-safe and not meant to be: every caller runs on the one Trio thread.
    """

    def __init__(self, config: CacheConfig) -> None:
        self._ttl_s = float(config.ttl_s)
        self._max_entries = config.max_entries
        self._max_entry_bytes = config.max_entry_bytes
        self._entries: OrderedDict[CacheKey, _Entry] = OrderedDict()
        self._expiry: deque[tuple[float, CacheKey]] = deque()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: CacheKey, now: float) -> tuple[RawResult, ...] | None:
        """The stored answer, or None when it is absent or expired."""
        self._purge(now)
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry.results

    def put(self, key: CacheKey, results: tuple[RawResult, ...], now: float) -> bool:
        """Store an answer unless it is above LIM-K4; True when it was stored."""
        self._purge(now)
        if entry_bytes(results) > self._max_entry_bytes:
            self._entries.pop(key, None)  # an older answer to the same request is stale now
            return False
        expires = now + self._ttl_s
        budget = self._max_entry_bytes - entry_bytes(results)
        answer = CachedAnswer(tuple(results), Derived(budget))
        self._entries[key] = _Entry(results=answer, expires=expires)
        self._entries.move_to_end(key)
        self._expiry.append((expires, key))
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)  # the least recently used (LIM-K3)
        return True

    def _purge(self, now: float) -> None:
        expiry = self._expiry
        while expiry and expiry[0][0] <= now:
            expires, key = expiry.popleft()
            entry = self._entries.get(key)
            # A key stored again since has a later expiry: only its own record removes it.
            if entry is not None and entry.expires == expires:
                del self._entries[key]


class CacheUse:
    """The cache as one call uses it: the caller it is keyed by, and failures contained.

    Any exception from the cache is a miss (or a store not made) and a warning, at most one
    a minute: a broken cache costs speed, never a search (REQ-CACHE-006).
    """

    _WARN_EVERY_S = 60.0
    _last_warned: float | None = None  # per process: the cache is one per process

    def __init__(self, cache: AnswerCache, caller: str) -> None:
        self._cache = cache
        self._caller = caller

    def lookup(self, engine: str, query: EngineQuery, now: float) -> tuple[RawResult, ...] | None:
        try:
            results = self._cache.get(CacheKey.of(self._caller, engine, query), now)
            if results is None:
                return None
            if not isinstance(results, tuple) or not all(isinstance(r, RawResult) for r in results):
                raise TypeError("the cache returned something other than an answer")
            return results
        except Exception as exc:
            self._failed("get", exc, now)
            return None

    def store(
        self, engine: str, query: EngineQuery, results: tuple[RawResult, ...], now: float
    ) -> None:
        try:
            self._cache.put(CacheKey.of(self._caller, engine, query), results, now)
        except Exception as exc:
            self._failed("put", exc, now)

    @classmethod
    def _failed(cls, operation: str, exc: Exception, now: float) -> None:
        last = CacheUse._last_warned
        if last is not None and 0 <= now - last < cls._WARN_EVERY_S:
            return
        CacheUse._last_warned = now
        # The type only: an exception's text could carry a query.
        telemetry.log_exception("cache_failed", exc, level="warn", operation=operation)
