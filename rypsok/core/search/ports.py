"""What the search pipeline needs from the engines' state, as small protocols.

The registry's circuit, limiter and latency window satisfy them as they are; tests hand in
fakes. Keeping the pipeline on these few methods
keeps it readable alone and lets the engine state change without touching the aggregator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import attrs

from rypsok.core.engines.base import AdmissionRecord, Engine

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractAsyncContextManager

    from rypsok.core.model import Reason

__all__ = [
    "AdmissionPort",
    "CircuitPort",
    "EngineSlot",
    "LatencyPort",
    "LimiterPort",
    "RecentPort",
    "TurnPort",
]


class CircuitPort(Protocol):
    def admit(self, now: float) -> Any:
        """A ticket for a call now (closed, or this call is the probe after a cooldown),
        or None when the engine rests (open during its cooldown, or a probe in flight)."""
        ...

    def resumes_at(self) -> float | None:
        """When a resting engine is admitted again, if the circuit can tell."""
        ...

    def succeeded(self, ticket: Any, now: float) -> None: ...

    def failed(
        self, ticket: Any, failure_class: Reason, now: float, retry_after_s: float | None = None
    ) -> None: ...

    def released(self, ticket: Any) -> None:
        """The call ended without an outcome (skipped after all, or cancelled)."""
        ...


class LimiterPort(Protocol):
    async def admit(self, deadline: float) -> bool:
        """Wait for the provider's rate (LIM-C9) until `deadline`; False when it cannot
        admit the request before it."""
        ...

    def next_turn(self, now: float) -> float:
        """When a call asked at `now` would be admitted by the provider's rate."""
        ...

    def slot(self) -> AbstractAsyncContextManager[None]:
        """Hold one of the engine's in-flight places (LIM-C2 and the record's cap)."""
        ...


class TurnPort(Protocol):
    async def take(self) -> bool:
        """Wait for a turn already decided; False when it was refused (rate_limited)."""
        ...


class AdmissionPort(Protocol):
    """The admissions of one call decided together ([coordination]: one round trip)."""

    async def admit(self, limiters: Sequence[LimiterPort], deadline: float) -> Sequence[TurnPort]:
        """The call's own tool limit, then a turn for each limiter, in order; raises the
        call's ToolError when its tool limit refuses it (no limiter is then charged)."""
        ...


class LatencyPort(Protocol):
    def record(self, seconds: float) -> None: ...


class RecentPort(Protocol):
    def ended(self, failure: Reason | None) -> None:
        """One request made: None when it answered with results, else its failure class."""
        ...


@attrs.frozen(kw_only=True)
class EngineSlot:
    """One active engine as the pipeline sees it; `preference` is its selection rank."""

    id: str
    engine: Engine
    record: AdmissionRecord
    preference: int  # configured preference; ties keep configuration order
    order: int  # position in the configuration, the tie-breaker of preference
    categories: frozenset[str]
    circuit: CircuitPort
    limiter: LimiterPort
    latency: LatencyPort
    recent: RecentPort | None = None
