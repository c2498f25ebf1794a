"""The application services: one entry point per tool, independent of any transport.

`Rypsok` is the facade a host embeds (REQ-ARCH-007) and the MCP layer calls. A call ends
with a response, with a `ToolError` (the error object to return), or with `trio.Cancelled`
when the caller cancelled it: the caller's own Trio cancellation is the cancellation.

Implements REQ-PRIV-003, REQ-LIFE-002, REQ-OBS-002 and REQ-MAIN-002.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import TYPE_CHECKING

import trio

from rypsok.config.memory import parse_bytes
from rypsok.config.secrets import store_password
from rypsok.core import errors, telemetry
from rypsok.core.coordination.gate import SearchGate
from rypsok.core.coordination.limits import SharedEngineLimiter, SharedToolLimiter
from rypsok.core.coordination.store import Store
from rypsok.core.engines.base import Engine
from rypsok.core.engines.client import EngineClient, EngineNetwork
from rypsok.core.engines.registry import (
    RegisteredEngine,
    Registry,
    active_entry,
    build_registry,
    status_entries,
)
from rypsok.core.fetch.egress_port import FetchNetwork, build_fetch_egress
from rypsok.core.fetch.slots import FetchSlots
from rypsok.core.model import (
    Category,
    DetailReason,
    DisabledReason,
    EngineStatus,
    ErrorKind,
    FetchRequest,
    FetchResponse,
    SearchRequest,
    SearchResponse,
    StatusResponse,
    ToolError,
)
from rypsok.core.parsing import MAX_NODES, ParseBudget
from rypsok.core.ratelimit import ToolRateLimiter
from rypsok.core.search.ports import EngineSlot

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence
    from types import TracebackType

    from rypsok.config.schema import Config
    from rypsok.core.egress import FetchClient
    from rypsok.core.fetch.pipeline import FetchPipeline
    from rypsok.core.fetch.robots import RobotsCache
    from rypsok.core.readiness import Readiness
    from rypsok.core.search.cache import AnswerCache
    from rypsok.core.search.pipeline import SearchRun

# `Engine` is the facade's seam for substituted engines (tests, the conformance harness):
# the protocol layer names it through the facade and never imports a driver's module.
__all__ = ["Engine", "EngineNetwork", "FetchNetwork", "ReturnedUrls", "Rypsok"]

ToolLimit = ToolRateLimiter | SharedToolLimiter

WEB_SEARCH = "web_search"
WEB_FETCH = "web_fetch"
FETCH_CALL_MARGIN_MS = 1000  # LIM-F5 = LIM-F4 + 1000 ms
_REFUSAL_KINDS = frozenset({ErrorKind.INVALID_REQUEST, ErrorKind.DENIED})
ENGINE_STATUS = "engine_status"


class ReturnedUrls:
    """The URLs web_search returned in this process, for strict mode (REQ-SEC-021).

    Bounded by LIM-F14: when full, the URL returned longest ago is forgotten first; a URL
    returned again moves to the young end.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("the strict-mode set holds at least one URL")
        self._capacity = capacity
        self._urls: OrderedDict[str, None] = OrderedDict()

    def add(self, urls: Sequence[str]) -> None:
        for url in urls:
            self._urls[url] = None
            self._urls.move_to_end(url)
        while len(self._urls) > self._capacity:
            self._urls.popitem(last=False)

    def __contains__(self, url: object) -> bool:
        return url in self._urls

    def __len__(self) -> int:
        return len(self._urls)


def _substitute(registry: Registry, engines: Sequence[Engine], config: Config) -> Registry:
    """The registry with the given drivers in place of those it built.

    The engine's own state still applies: each substituted engine gets a fresh circuit,
    a limiter built from the substitute's admission record and a latency window. The
    operator's switch wins: an engine disabled in configuration stays disabled.
    """
    given = {engine.id: engine for engine in engines}
    known = {entry.id for entry in registry.entries}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ValueError(f"{len(unknown)} given engine(s) have no [engines.<id>] table")
    entries: list[RegisteredEngine] = []
    for entry in registry.entries:
        engine = given.get(entry.id)
        if engine is None or entry.disabled_reason is DisabledReason.DISABLED:
            entries.append(entry)
            continue
        entries.append(
            active_entry(entry.config, engine, "driver given by the embedding program", config)
        )
    return Registry(entries=tuple(entries))


def _slots(registry: Registry, store: Store | None, config: Config) -> tuple[EngineSlot, ...]:
    slots = []
    for order, entry in enumerate(registry.entries):
        if (
            entry.engine is None
            or entry.circuit is None
            or entry.limiter is None
            or entry.latency is None
        ):
            continue
        slots.append(
            EngineSlot(
                id=entry.id,
                engine=entry.engine,
                record=entry.engine.record,
                preference=entry.config.preference,
                order=order,
                categories=frozenset(str(c) for c in entry.config.categories),
                circuit=entry.circuit,
                limiter=entry.limiter
                if store is None
                else SharedEngineLimiter(
                    entry.id,
                    entry.engine.record,
                    store,
                    per_engine_in_flight=config.limits.per_engine_in_flight,
                ),
                latency=entry.latency,
                recent=entry.recent,
            )
        )
    return tuple(slots)


def _is_cancellation(exc: BaseException) -> bool:
    """trio.Cancelled, alone or as every leaf of a group: a nursery inside the call wraps
    the cancellation of its children in an exception group."""
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        rest = exc.split(trio.Cancelled)[1]
        return rest is None
    return False


# The search pipeline and LIM-S7's margin, once the first search imported them. A module's
# global, not an attribute: nothing of the pipeline's modules becomes reachable from a
# `Rypsok` (REQ-PRIV-003's test walks what an instance holds).
_pipeline: tuple[Callable[..., Awaitable[SearchRun]], float] | None = None


def _load_pipeline() -> tuple[Callable[..., Awaitable[SearchRun]], float]:
    """Imported by the first search, not at start-up: a host's first message is its
    handshake (decisions/process-startup). Looked up once: a `from` import in every call cost about
    10,000 instructions a call."""
    global _pipeline
    from rypsok.core.search.pipeline import CALL_MARGIN_S, run_search

    _pipeline = (run_search, float(CALL_MARGIN_S))
    return _pipeline


def _ms_since(start: float) -> int:
    return max(0, round((trio.current_time() - start) * 1000))


def _seconds_since(start: float) -> float:
    return max(0.0, trio.current_time() - start)


def _log_ended(tool: str, outcome: str, start: float, **fields: object) -> None:
    """A call that answered (`outcome` is its response's) or was cancelled: counted, and
    logged with `fields` (what the answer holds) and its latency."""
    telemetry.COUNTERS.call_ended(tool, outcome, _seconds_since(start))
    telemetry.info("call", tool=tool, outcome=outcome, **fields, latency_ms=_ms_since(start))


def _call_start(received_at: float | None) -> float:
    """When a call's clock starts: when its transport read it, or now."""
    now = trio.current_time()
    return now if received_at is None else min(received_at, now)


class Rypsok:
    """The rypsok core: search and status (fetch joins in M3), usable from any Trio program.

    `env` is where engine keys are read (the process environment when None);
    `engine_network` replaces what lies below the engines' production stack (the lookup,
    the connect, the TLS trust: tests and the conformance harness); `engines` replaces the
    drivers the registry would build, while
    the registry's rules, circuits and limiters still apply; `cache` replaces the in-memory
    result cache when `[cache] enabled` is true (tests).
    """

    def __init__(
        self,
        config: Config,
        *,
        env: Mapping[str, str] | None = None,
        engines: Sequence[Engine] | None = None,
        cache: AnswerCache | None = None,
        fetch_network: FetchNetwork | None = None,
        engine_network: EngineNetwork | None = None,
    ) -> None:
        self._config = config
        self._http = EngineClient.from_config(config, network=engine_network)
        env_map = os.environ if env is None else env
        # One parse limiter for everything CPU-bound off the event loop (LIM-C5): page
        # parsing and extraction, the engines' JSON decoding, the scraping driver's pages.
        self._parse_limiter = trio.CapacityLimiter(config.limits.parsing_in_flight)
        # Beside the permits, the bytes of page in parse at once: the pages and
        # the engines' large answers take their shares of one budget, which stands for one
        # parse of a page at the bounds (the estimate's figure).
        self._parse_budget = ParseBudget(
            config.fetch.max_bytes * MAX_NODES, parse_bytes(config.fetch.max_bytes)
        )
        registry = build_registry(
            config, env_map, http=self._http, parse_permits=self._parse_limiter
        )
        if engines is not None:
            registry = _substitute(registry, engines, config)
        self._registry = registry
        # [coordination]: the provider admissions and the callers' limits in the shared
        # store; without the table, nothing is contacted and every limit is this process's.
        self._store: Store | None = None
        if config.coordination is not None:
            self._store = Store(config.coordination, store_password(config, env_map))
        self._slots = _slots(registry, self._store, config)
        self._served = registry.served_categories()
        self._search_limit = self._tool_limit(WEB_SEARCH, config.limits.web_search_per_minute)
        self._status_limit = self._tool_limit(ENGINE_STATUS, config.limits.engine_status_per_minute)
        self._returned = ReturnedUrls(config.limits.strict_mode_urls)
        # The result cache (LIM-K1): off unless the operator turned it on; `cache` replaces
        # the in-memory one (tests). It lives as long as this object and its configuration.
        self._cache: AnswerCache | None = None
        if config.cache.enabled:
            from rypsok.core.search.cache import ResultCache

            self._cache = cache if cache is not None else ResultCache(config.cache)
        self._fetch_limit = self._tool_limit(WEB_FETCH, config.limits.web_fetch_per_minute)
        self._http.parse_limiter = self._parse_limiter
        self._http.parse_budget = self._parse_budget
        self._fetch_network = fetch_network if fetch_network is not None else FetchNetwork()
        self._fetch_client: FetchClient | None = None
        self._fetch: FetchPipeline | None = None
        self._robots: RobotsCache | None = None
        self._fetch_slots = FetchSlots(config.limits.fetches_in_flight)

    @property
    def config(self) -> Config:
        return self._config

    @property
    def registry(self) -> Registry:
        return self._registry

    def engine_states(self) -> tuple[EngineStatus, ...]:
        """Each engine's state as engine_status gives it, without a call (the metrics)."""
        return status_entries(self._registry)

    def readiness(self) -> Readiness:
        """Whether a search can be served now (`GET /readyz`); it makes no request."""
        from rypsok.core.readiness import readiness

        return readiness(self._registry, self._store, trio.current_time())

    @property
    def served_categories(self) -> tuple[Category, ...]:
        """Categories an active engine serves, in vocabulary order (the schema's enum)."""
        return self._served

    @property
    def languages(self) -> tuple[str, ...]:
        return self._config.search.languages

    def was_returned(self, url: str) -> bool:
        """Whether web_search returned `url` in this process (strict mode, LIM-F14)."""
        return url in self._returned

    def _tool_limit(self, tool: str, per_minute: int) -> ToolLimit:
        if self._store is None:
            return ToolRateLimiter(per_minute)
        return SharedToolLimiter(tool, per_minute, self._store)

    def _fetch_pipeline(self) -> FetchPipeline:
        if self._fetch is None:
            # Imported at the first fetch: the parser, the charset detector and the robots.txt
            # reader cost a search-only process nothing, at start or at exit.
            from rypsok.core.fetch.pipeline import FetchPipeline
            from rypsok.core.fetch.reading import extract
            from rypsok.core.fetch.robots import RobotsCache

            self._robots = RobotsCache(self._config.limits.robots_cache_entries)
            # Built at the first fetch: a process that never fetches never reads the trust
            # store.
            policy, client = build_fetch_egress(
                self._config, self._fetch_network, user_agent=self._http.user_agent
            )
            self._fetch_client = client
            self._fetch = FetchPipeline(
                self._config,
                client=client,
                policy=policy,
                extractor=extract,
                robots=self._robots,
                slots=self._fetch_slots,
                parse_limiter=self._parse_limiter,
                parse_budget=self._parse_budget,
                was_returned=self.was_returned,
            )
        return self._fetch

    async def aclose(self) -> None:
        try:
            await self._http.aclose()
            if self._fetch_client is not None:
                await self._fetch_client.aclose()
        finally:
            if self._store is not None:
                await self._store.__aexit__(None, None, None)

    async def __aenter__(self) -> Rypsok:
        if self._store is not None:
            # A store that cannot be reached does not stop the process: the limiters
            # decide alone until it answers (the configuration page, [coordination]).
            await self._store.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def search(self, request: SearchRequest) -> SearchResponse:
        return await self.search_as(telemetry.LOCAL_CALLER, request)

    async def search_as(
        self, caller: str, request: SearchRequest, *, received_at: float | None = None
    ) -> SearchResponse:
        """One web_search call of `caller`, whose rate limit (LIM-C6) it counts against.
        `received_at` (Trio's clock) is when a transport read the call: its deadlines
        (LIM-S1, LIM-S7) count from then; never later than now."""
        start = _call_start(received_at)
        run_search, margin_s = _pipeline or _load_pipeline()
        with telemetry.call_scope(caller):
            # With [coordination] the caller's limit is decided with the engines' turns, in
            # one round trip to the store (coordination.gate); without it, first, here.
            limit = self._search_limit
            gate = SearchGate(limit, caller) if isinstance(limit, SharedToolLimiter) else None
            try:
                if gate is None:
                    await self._admit(limit, WEB_SEARCH, caller, start)
                search = self._config.search
                hard_stop = start + search.deadline_ms / 1000 + margin_s
                with trio.move_on_at(hard_stop) as scope:
                    run = await run_search(
                        request,
                        config=self._config,
                        slots=self._slots,
                        served=self._served,
                        start=start,
                        caller=caller,
                        cache=self._cache,
                        admission=gate,
                    )
                if scope.cancelled_caught:
                    # LIM-S7 reached: nothing the call holds may outlive it.
                    raise errors.deadline_search()
                if gate is not None and (refusal := await gate.decide_limit_only()) is not None:
                    raise refusal
            except ToolError as exc:
                # A call that ended before its limit was decided: a refusal by the limit
                # wins over the call's own error, as when the limit is checked first.
                if gate is not None and (refusal := await gate.decide_limit_only()) is not None:
                    self._log_error(WEB_SEARCH, refusal, start)
                    raise refusal from None
                self._log_error(WEB_SEARCH, exc, start)
                raise
            except BaseException as exc:
                if _is_cancellation(exc):
                    _log_ended(WEB_SEARCH, "cancelled", start)
                raise
            self._returned.add(run.urls)
            _log_ended(
                WEB_SEARCH, str(run.response.outcome), start, results=len(run.response.results)
            )
            return run.response

    async def fetch(self, request: FetchRequest) -> FetchResponse:
        return await self.fetch_as(telemetry.LOCAL_CALLER, request)

    async def fetch_as(
        self, caller: str, request: FetchRequest, *, received_at: float | None = None
    ) -> FetchResponse:
        """One web_fetch call of `caller` (LIM-C7). One scope ends it at LIM-F5 whatever
        is running: the network part has its own deadline (LIM-F4) inside, and a parse
        still running in its worker thread is abandoned (its permit returns when it ends).
        `received_at` as for `search_as`: LIM-F4 and LIM-F5 count from it."""
        start = _call_start(received_at)
        with telemetry.call_scope(caller):
            try:
                await self._admit(self._fetch_limit, WEB_FETCH, caller, start)
                hard_stop = start + (self._config.fetch.deadline_ms + FETCH_CALL_MARGIN_MS) / 1000
                with trio.move_on_at(hard_stop) as scope:
                    response = await self._fetch_pipeline().run(request, start=start)
                if scope.cancelled_caught:
                    raise errors.deadline_fetch()
            except ToolError as exc:
                self._log_error(WEB_FETCH, exc, start)
                raise
            except BaseException as exc:
                if _is_cancellation(exc):
                    _log_ended(WEB_FETCH, "cancelled", start)
                raise
            _log_ended(WEB_FETCH, str(response.outcome), start, truncated=response.truncated)
            return response

    async def status(self) -> StatusResponse:
        return await self.status_as(telemetry.LOCAL_CALLER)

    async def status_as(self, caller: str) -> StatusResponse:
        """One engine_status call of `caller` (LIM-C8); nothing leaves the host."""
        start = trio.current_time()
        with telemetry.call_scope(caller):
            try:
                await self._admit(self._status_limit, ENGINE_STATUS, caller, start)
            except ToolError as exc:
                self._log_error(ENGINE_STATUS, exc, start)
                raise
            response = StatusResponse(engines=status_entries(self._registry))
            _log_ended(ENGINE_STATUS, str(response.outcome), start)
            return response

    async def _admit(self, limiter: ToolLimit, tool: str, caller: str, now: float) -> None:
        wait_ms = await limiter.admit(caller, now)
        if wait_ms is not None:
            raise errors.rate_limited(tool, wait_ms)

    def _log_error(self, tool: str, exc: ToolError, start: float) -> None:
        reason = exc.detail.reason
        fields: dict[str, object] = {
            "tool": tool,
            "error": str(exc.kind),
            "latency_ms": _ms_since(start),
        }
        if reason is not None:
            fields["reason"] = str(reason)
        if exc.detail.parameter is not None:
            fields["parameter"] = exc.detail.parameter
        telemetry.COUNTERS.call_error(tool, str(exc.kind))
        telemetry.COUNTERS.call_ended(tool, "error", _seconds_since(start))
        if reason is DetailReason.RATE_LIMITED or exc.kind in _REFUSAL_KINDS:
            # A refusal of the call itself (REQ-OBS-007): counted per tool and reason.
            counted = str(reason) if reason is not None else str(exc.kind)
            telemetry.COUNTERS.refused(tool, counted)
            telemetry.info("refused", tool=tool, reason=counted)
        telemetry.info("call", **fields)
