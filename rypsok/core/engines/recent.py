"""An engine's recent failures: the outcomes of its last 20 requests (LIM-S14).

The window counts requests, not time, like the latency window (LIM-S11), so that what
engine_status shows does not depend on when it is read. Unlike the latency window it keeps
every request the engine made, those no answer ended included (a timeout, a refused
connection): an engine that fails every request shows it here while its latency stays
`null`. A call skipped (cooldown, rate) or cancelled by its caller made no request.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import Final

from rypsok.core.model import Reason, RecentFailures

__all__ = ["RECENT_WINDOW", "RecentRequests"]

RECENT_WINDOW: Final = 20  # LIM-S14, fixed


class RecentRequests:
    """The outcome of each of an engine's last requests: None for an answer with results,
    else its failure class. Used from the Trio thread only."""

    def __init__(self, size: int = RECENT_WINDOW) -> None:
        self._outcomes: deque[Reason | None] = deque(maxlen=size)

    def ended(self, failure: Reason | None) -> None:
        self._outcomes.append(failure)

    def failures(self) -> RecentFailures:
        counts = Counter(o for o in self._outcomes if o is not None)
        return RecentFailures(
            requests=len(self._outcomes),
            count=sum(counts.values()),
            classes=tuple(sorted(counts.items(), key=lambda item: str(item[0]))),
        )
