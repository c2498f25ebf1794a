"""Whether the process can serve a search now: what `GET /readyz` reports.

Ready means at least one active engine whose circuit admits a call now (closed, or open
with its cooldown over so that the next call probes it) and, with `[coordination]`, the
shared store answering. The listener's own part (accepting, or stopping) is the transport's
to add. Nothing here makes a request: it reads the state the calls left.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

import attrs

from rypsok.core.model import EngineState

if TYPE_CHECKING:
    from rypsok.core.coordination.store import Store
    from rypsok.core.engines.registry import Registry

__all__ = ["NotReady", "Readiness", "readiness"]


class NotReady(StrEnum):
    """Why the process is not ready; the words `/readyz` shows (book: Deployment)."""

    STARTING = "starting"  # the listener does not accept yet
    STOPPING = "stopping"  # a graceful stop has begun
    NO_ENGINE = "no_engine"  # no active engine, or every one resting after failures
    COORDINATION_UNREACHABLE = "coordination_unreachable"  # [coordination]'s store is away


@attrs.frozen(kw_only=True)
class Readiness:
    reasons: tuple[NotReady, ...] = ()
    engines_able: int = 0

    @property
    def ready(self) -> bool:
        return not self.reasons


def readiness(registry: Registry, store: Store | None, now: float) -> Readiness:
    """The core's part of readiness at `now` (the Trio clock)."""
    able = 0
    for entry in registry.active():
        circuit = entry.circuit
        if circuit is None:
            continue
        state = circuit.state()
        resumes = circuit.resumes_at()
        if state is EngineState.CLOSED or (resumes is not None and resumes <= now):
            able += 1
    reasons: list[NotReady] = []
    if able == 0:
        reasons.append(NotReady.NO_ENGINE)
    if store is not None and not store.reachable():
        reasons.append(NotReady.COORDINATION_UNREACHABLE)
    return Readiness(reasons=tuple(reasons), engines_able=able)
