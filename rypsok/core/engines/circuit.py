"""The circuit of one engine (REQ-RES-004, REQ-RES-005, LIM-B1 to LIM-B5, REQ-OBS-004).

closed: every call is admitted. LIM-B1 consecutive failures of a counted class (timeout,
rate_limited, blocked, parse_failure) open it for the current cooldown, which starts at
LIM-B2 and doubles at every opening up to LIM-B3. A rate_limited failure that carries the
provider's wait (Retry-After, X-RateLimit-Reset) opens it at once: for the provider's wait
alone when the count is below LIM-B1, and for the longer of the wait and the current cooldown
when it opens the circuit anyway; either way at most LIM-B3 (LIM-B4).

open: calls are skipped (reason cooldown). After the cooldown it stays open until a call
comes; that call takes the one probe (LIM-B5) and the state is half_open while the probe is
in flight, other calls still being skipped. The probe's success closes the circuit and resets
the cooldown to LIM-B2; a counted failure reopens it with the next, longer cooldown. A probe
that ends without a verdict (auth_failure, request_failure, or cancelled) leaves the circuit
open with its cooldown over, so the next call probes again.

auth_failure and request_failure neither count nor reset the count: a refused key or a
provider's error status says nothing about whether the engine is overloaded or blocking us.
Outcomes of calls admitted before the latest transition are ignored, so a slow answer from
before an opening cannot close the circuit behind the probe's back.

Implements REQ-RES-009: the circuit lives in memory and is lost at restart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from rypsok.core.model import EngineState, Reason
from rypsok.core.telemetry import log

if TYPE_CHECKING:
    from rypsok.config.schema import ResilienceConfig

__all__ = ["COUNTED_CLASSES", "Circuit", "CircuitStatistics", "CircuitTicket"]

COUNTED_CLASSES: Final = frozenset(
    {Reason.TIMEOUT, Reason.RATE_LIMITED, Reason.BLOCKED, Reason.PARSE_FAILURE}
)


@attrs.frozen(kw_only=True)
class CircuitTicket:
    """Permission for one call; hand it back with the call's outcome."""

    probe: bool
    generation: int


@attrs.frozen(kw_only=True)
class CircuitStatistics:
    state: EngineState
    consecutive_failures: int
    next_cooldown_s: float
    open_until: float | None
    openings: int


def _seconds(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 3)


class Circuit:
    """The health state of one engine; not thread-safe, used from the Trio thread only."""

    def __init__(
        self,
        engine_id: str,
        *,
        failures_to_open: int = 3,
        first_cooldown_s: float = 60,
        max_cooldown_s: float = 900,
    ) -> None:
        if failures_to_open < 1 or first_cooldown_s <= 0 or max_cooldown_s < first_cooldown_s:
            raise ValueError("resilience: invalid circuit settings")
        self._engine = engine_id
        self._threshold = failures_to_open
        self._first = float(first_cooldown_s)
        self._max = float(max_cooldown_s)
        self._state = EngineState.CLOSED
        self._failures = 0
        self._next_cooldown = self._first
        self._open_until: float | None = None
        self._generation = 0
        self._openings = 0

    @classmethod
    def from_config(cls, engine_id: str, resilience: ResilienceConfig) -> Circuit:
        return cls(
            engine_id,
            failures_to_open=resilience.failures_to_open,
            first_cooldown_s=resilience.first_cooldown_s,
            max_cooldown_s=resilience.max_cooldown_s,
        )

    def state(self) -> EngineState:
        """closed, open or half_open; an open circuit stays open until a call probes it."""
        return self._state

    def resumes_at(self) -> float | None:
        """When an open circuit admits its probe (its cooldown's end); None when closed, or
        half_open with the probe in flight, whose end no clock can tell."""
        return self._open_until if self._state is EngineState.OPEN else None

    def admit(self, now: float) -> CircuitTicket | None:
        """A ticket for a call now, or None when the engine is to be skipped (cooldown)."""
        if self._state is EngineState.CLOSED:
            return CircuitTicket(probe=False, generation=self._generation)
        if self._state is EngineState.OPEN:
            assert self._open_until is not None
            if now < self._open_until:
                return None
            self._state = EngineState.HALF_OPEN
            return CircuitTicket(probe=True, generation=self._generation)
        return None  # half_open: the one probe is in flight

    def succeeded(self, ticket: CircuitTicket, now: float) -> None:
        if ticket.generation != self._generation:
            return
        if ticket.probe:
            self._close()
        else:
            self._failures = 0

    def failed(
        self,
        ticket: CircuitTicket,
        failure_class: Reason,
        now: float,
        retry_after_s: float | None = None,
    ) -> None:
        if ticket.generation != self._generation:
            return
        if failure_class not in COUNTED_CLASSES:
            if ticket.probe:
                self._state = EngineState.OPEN  # no verdict: the next call probes again
            return
        wait = None
        if failure_class is Reason.RATE_LIMITED and retry_after_s is not None and retry_after_s > 0:
            wait = float(retry_after_s)
        if ticket.probe:
            self._open(failure_class, now, escalate=True, wait=wait)
            return
        self._failures += 1
        if self._failures >= self._threshold:
            self._open(failure_class, now, escalate=True, wait=wait)
        elif wait is not None:
            self._open(failure_class, now, escalate=False, wait=wait)

    def released(self, ticket: CircuitTicket) -> None:
        """The call ended without an outcome (cancelled, or not made after all)."""
        if ticket.generation == self._generation and ticket.probe:
            self._state = EngineState.OPEN

    def _open(
        self, failure_class: Reason, now: float, *, escalate: bool, wait: float | None
    ) -> None:
        if escalate:
            cooldown = self._next_cooldown
            self._next_cooldown = min(self._next_cooldown * 2, self._max)  # LIM-B3
            if wait is not None:
                cooldown = max(cooldown, wait)
        else:
            assert wait is not None
            cooldown = wait
        cooldown = min(cooldown, self._max)  # LIM-B4: the provider's wait, up to the maximum
        self._state = EngineState.OPEN
        self._open_until = now + cooldown
        self._generation += 1
        self._openings += 1
        log(
            "warn",
            "circuit_opened",
            engine=self._engine,
            **{"class": str(failure_class)},
            cooldown_s=_seconds(cooldown),
        )

    def _close(self) -> None:
        self._state = EngineState.CLOSED
        self._failures = 0
        self._next_cooldown = self._first
        self._open_until = None
        self._generation += 1
        log("info", "circuit_closed", engine=self._engine)

    def statistics(self) -> CircuitStatistics:
        return CircuitStatistics(
            state=self._state,
            consecutive_failures=self._failures,
            next_cooldown_s=self._next_cooldown,
            open_until=self._open_until,
            openings=self._openings,
        )
