"""An engine's typical latency: the median of its last 20 completed requests (LIM-S11)."""

from __future__ import annotations

from collections import deque
from typing import Final

__all__ = ["WINDOW", "LatencyWindow"]

WINDOW: Final = 20  # LIM-S11, fixed


class LatencyWindow:
    """A request is completed when the provider answered (with results or a classified
    failure); a request ended by a timeout or a cancellation has no latency to record."""

    def __init__(self, size: int = WINDOW) -> None:
        self._samples: deque[float] = deque(maxlen=size)

    def record(self, seconds: float) -> None:
        self._samples.append(max(0.0, seconds) * 1000)

    def median_ms(self) -> int | None:
        """Whole milliseconds (an even window averages its two middle samples, then rounds
        half to even), or None before the first completed request."""
        if not self._samples:
            return None
        import statistics  # on first use: not needed to start serving

        return round(statistics.median(self._samples))

    def __len__(self) -> int:
        return len(self._samples)
