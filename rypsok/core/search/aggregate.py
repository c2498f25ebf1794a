"""The fan-out: every selected engine asked at once, under one absolute deadline.

One nursery per call (REQ-AGG-001). The nursery sits in a cancel scope whose deadline is
absolute, set once from the start of the call; each engine is a child task with its own
LIM-S5 scope, opened when its request starts (REQ-AGG-002). A child never raises into the
nursery: a driver's EngineFailure, any other exception or a malformed answer ends that
engine's part only (REQ-AGG-007); only trio.Cancelled passes. The nursery closes when the
last child ends, which is early completion (REQ-AGG-009). Nothing is retried (REQ-AGG-008)
and nothing outlives the call (REQ-AGG-006).

Implements REQ-SEC-014 and REQ-PERF-002.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import trio

from rypsok.core import telemetry
from rypsok.core.engines.base import EngineAnswer, EngineFailure, EngineQuery, RawResult
from rypsok.core.model import FAILURE_CLASSES, Reason
from rypsok.core.search.cache import CachedAnswer, Derived
from rypsok.core.search.ports import EngineSlot

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rypsok.core.search.cache import CacheUse
    from rypsok.core.search.ports import AdmissionPort, TurnPort


__all__ = ["EngineOutcome", "run_engines"]


@attrs.frozen(kw_only=True)
class EngineOutcome:
    """How one selected engine ended: exactly one of results, failure or skip."""

    slot: EngineSlot
    results: tuple[RawResult, ...] | None = None
    failure: Reason | None = None  # a failure class (REQ-ENG-006)
    skipped: Reason | None = None  # rate_limited: the limiter could not admit in time
    retry_after_s: float | None = None
    from_cache: bool = False  # the results are a cached answer; no request was made
    derived: Derived | None = None  # what was derived from that cached answer, kept with it
    unresponsive: int = 0  # a meta-search engine's own sources that did not answer it

    @property
    def answered(self) -> bool:
        return self.results is not None


def _well_formed(answer: object) -> tuple[RawResult, ...] | None:
    if not isinstance(answer, EngineAnswer) or not isinstance(answer.results, tuple):
        return None
    for item in answer.results:
        if not isinstance(item, RawResult):
            return None
        if not (
            isinstance(item.title, str)
            and isinstance(item.url, str)
            and isinstance(item.snippet, str)
            and (item.date is None or isinstance(item.date, str))
        ):
            return None
    return answer.results


def _count_failure(engine: str, failure: Reason) -> None:
    """Log and count one engine failure by its class (REQ-OBS-003)."""
    telemetry.COUNTERS.engine_failed(engine, str(failure))
    telemetry.info("engine_failed", engine=engine, **{"class": str(failure)})


class _Child:
    """One engine's part of the call; its outcome stays None until the engine ends."""

    def __init__(self, slot: EngineSlot, ticket: Any) -> None:
        self.slot = slot
        self.ticket = ticket
        self.outcome: EngineOutcome | None = None
        self.requested = False
        self.turn: TurnPort | None = None  # decided with the other engines ([coordination])

    def look_up(self, query: EngineQuery, cache: CacheUse | None) -> bool:
        """Answer from the cache when the engine allows it; True when answered."""
        slot = self.slot
        # A probe must reach the provider to tell whether it recovered (LIM-B5).
        if cache is not None and slot.record.cacheable and not self.ticket.probe:
            hit = cache.lookup(slot.id, query, trio.current_time())
            telemetry.COUNTERS.cache_lookup(hit is not None)
            if hit is not None:
                # Answered without a request: neither the provider's rate nor the
                # circuit is charged (REQ-CACHE-001).
                derived = hit.derived if isinstance(hit, CachedAnswer) else None
                self.outcome = EngineOutcome(
                    slot=slot, results=hit, from_cache=True, derived=derived
                )
                return True
        return False

    async def run(
        self, query: EngineQuery, deadline: float, timeout_s: float, cache: CacheUse | None
    ) -> None:
        slot = self.slot
        try:
            if self.turn is not None:
                # Looked up and admitted with the call's other engines (`_admit_together`).
                admitted = await self.turn.take()
            elif self.look_up(query, cache):
                return
            else:
                admitted = await slot.limiter.admit(deadline)
            if not admitted:
                self.outcome = EngineOutcome(slot=slot, skipped=Reason.RATE_LIMITED)
                return
            async with slot.limiter.slot():
                await self._request(query, timeout_s)
            outcome = self.outcome
            if (
                cache is not None
                and slot.record.cacheable  # REQ-CMP-007: never store what the record forbids
                and outcome is not None
                and outcome.results is not None
            ):
                cache.store(slot.id, query, outcome.results, trio.current_time())
        finally:
            self.settle(deadline)

    def settle(self, deadline: float) -> None:
        """Give the engine an outcome if it has none; runs however the child ends."""
        slot = self.slot
        now = trio.current_time()
        if self.outcome is not None:
            if self.outcome.skipped is not None or self.outcome.from_cache:
                slot.circuit.released(self.ticket)  # a ticket never used is handed back
            return
        if now < deadline:
            # The caller cancelled the call: not the engine's failure. A probe it
            # carried is handed back; the call itself ends with trio.Cancelled.
            slot.circuit.released(self.ticket)
            return
        if self.requested:
            self._fail(now, Reason.TIMEOUT, None)
            return
        # Cut while waiting for an in-flight place: no request was made, so the circuit
        # is not charged, but the engine did not answer in time.
        slot.circuit.released(self.ticket)
        _count_failure(slot.id, Reason.TIMEOUT)
        self.outcome = EngineOutcome(slot=slot, failure=Reason.TIMEOUT)

    async def _request(self, query: EngineQuery, timeout_s: float) -> None:
        slot = self.slot
        self.requested = True
        started = trio.current_time()
        answer: object = None
        failure: Reason | None = None
        retry_after: float | None = None
        heard = True
        with trio.move_on_at(started + timeout_s) as scope:
            try:
                answer = await slot.engine.search(query)
            except EngineFailure as exc:
                known = exc.failure_class in FAILURE_CLASSES
                failure = exc.failure_class if known else Reason.REQUEST_FAILURE
                retry_after = exc.retry_after_s
                heard = exc.heard is not False
            except Exception as exc:
                # A driver bug ends this engine's part only; the log names the type,
                # never the message, which may hold provider text.
                failure = Reason.REQUEST_FAILURE
                telemetry.log_exception("engine_exception", exc, level="warn", engine=slot.id)
        now = trio.current_time()
        if scope.cancelled_caught:
            failure = Reason.TIMEOUT
        results = _well_formed(answer) if failure is None else None
        if failure is None and results is None:
            failure = Reason.PARSE_FAILURE
        if failure is not Reason.TIMEOUT and heard:
            # A completed request: the provider answered, with results or a failure.
            slot.latency.record(now - started)
            telemetry.COUNTERS.engine_answered(slot.id, now - started)
        if failure is None and results is not None:
            slot.circuit.succeeded(self.ticket, now)
            telemetry.COUNTERS.engine_request(slot.id, None)
            if slot.recent is not None:
                slot.recent.ended(None)
            assert isinstance(answer, EngineAnswer)  # _well_formed checked it
            unresponsive = answer.unresponsive
            if isinstance(unresponsive, bool) or not isinstance(unresponsive, int):
                unresponsive = 0
            self.outcome = EngineOutcome(
                slot=slot, results=results, unresponsive=max(unresponsive, 0)
            )
            return
        assert failure is not None
        self._fail(now, failure, retry_after)

    def _fail(self, now: float, failure: Reason, retry_after: float | None) -> None:
        """A request made that ended in `failure` (its own, or the deadline's timeout)."""
        self.slot.circuit.failed(self.ticket, failure, now, retry_after)
        telemetry.COUNTERS.engine_request(self.slot.id, str(failure))
        if self.slot.recent is not None:
            self.slot.recent.ended(failure)
        _count_failure(self.slot.id, failure)
        self.outcome = EngineOutcome(slot=self.slot, failure=failure, retry_after_s=retry_after)


async def _admit_together(
    children: Sequence[_Child],
    admission: AdmissionPort,
    query: EngineQuery,
    deadline: float,
    cache: CacheUse | None,
) -> list[_Child]:
    """Look every engine up in the cache, then ask `admission` once for the others' turns;
    returns the children left to run. The others are settled here, and all of them when
    the admission ends the call (its refusal, the caller's cancellation, the deadline)."""
    waiting = [child for child in children if not child.look_up(query, cache)]
    try:
        turns = await admission.admit([child.slot.limiter for child in waiting], deadline)
    except BaseException:
        for child in children:
            child.settle(deadline)
        raise
    for child, turn in zip(waiting, turns, strict=True):
        child.turn = turn
    for child in children:
        if child.turn is None:
            child.settle(deadline)  # answered from the cache: its ticket is handed back
    return waiting


async def run_engines(
    asked: Sequence[tuple[EngineSlot, Any]],
    query: EngineQuery,
    *,
    deadline: float,
    timeout_s: float,
    cache: CacheUse | None = None,
    admission: AdmissionPort | None = None,
) -> list[EngineOutcome]:
    """Ask every engine with its circuit ticket; returns the outcomes in the order of
    `asked`. An engine the deadline cut ends as a timeout.

    `deadline` is absolute (trio.current_time() scale). `cache`, when given, answers the
    engines whose record allows storage and keeps their fresh answers. `admission`, when
    given, decides the call's tool limit and every engine's turn together, before any
    engine starts; its refusal of the call ends it here. The caller's
    cancellation passes through as trio.Cancelled, with every engine request aborted and no
    task left.
    """
    children = [_Child(slot, ticket) for slot, ticket in asked]
    with trio.CancelScope(deadline=deadline):
        running = children
        if admission is not None:
            running = await _admit_together(children, admission, query, deadline, cache)
        if len(running) == 1:
            # One engine asked (one category, say): awaited in this task. A task and a
            # nursery for it would add a scheduling round and nothing else; the deadline's
            # scope ends it the same way, and a child settles itself however it ends.
            await running[0].run(query, deadline, timeout_s, cache)
        elif running:
            async with trio.open_nursery() as nursery:
                for child in running:
                    nursery.start_soon(child.run, query, deadline, timeout_s, cache)
    outcomes = [child.outcome for child in children]
    # Every child settles in its `finally`; only the caller's cancellation leaves one
    # without an outcome, and that never reaches this line.
    assert all(o is not None for o in outcomes)
    return [o for o in outcomes if o is not None]
