"""Refusal counters (REQ-OBS-007) and the task that writes them to the log once a minute.

The counts are cumulative since the process started, so a count that keeps rising from one
`counters` line to the next is visible by comparing two lines.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Final, TypedDict

import trio

from ._log import info

__all__ = ["COUNTERS", "Counters", "CountersSnapshot", "run_counters_reporter"]


class CountersSnapshot(TypedDict):
    tools: dict[str, dict[str, int]]  # tool -> reason -> refused calls
    http: dict[str, int]  # reason -> refused requests or connections


class Counters:
    """Process-wide counts of refused tool calls (per tool and reason) and HTTP refusals."""

    def __init__(self) -> None:
        # Tools are a fixed set and reasons come from the model's vocabularies, so the keys
        # are bounded by the code, never by what callers send.
        self._tools: Counter[tuple[str, str]] = Counter()
        self._http: Counter[str] = Counter()
        # Increments may come from worker threads as well as from Trio tasks.
        self._lock = threading.Lock()

    def refused(self, tool: str, reason: str) -> None:
        with self._lock:
            self._tools[(tool, reason)] += 1

    def http_refused(self, reason: str) -> None:
        with self._lock:
            self._http[reason] += 1

    def snapshot(self) -> CountersSnapshot:
        """A fresh copy, keys sorted; changing it changes nothing here."""
        with self._lock:
            tools = sorted(self._tools.items())
            http = sorted(self._http.items())
        by_tool: dict[str, dict[str, int]] = {}
        for (tool, reason), count in tools:
            by_tool.setdefault(tool, {})[reason] = count
        return {"tools": by_tool, "http": dict(http)}

    def reset(self) -> None:
        """Back to zero; for tests, since a process's counters otherwise only grow."""
        with self._lock:
            self._tools.clear()
            self._http.clear()


COUNTERS: Final = Counters()


async def run_counters_reporter(
    interval_s: float = 60.0,
    *,
    counters: Counters = COUNTERS,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Log a `counters` event every `interval_s` seconds until cancelled.

    The transport starts it in its own nursery. The beats are on a fixed schedule from the
    start, so a slow write does not make the minute drift.
    """
    if not interval_s > 0:
        raise ValueError("interval_s must be positive")
    task_status.started()
    due = trio.current_time() + interval_s
    while True:
        await trio.sleep_until(due)
        info("counters", refusals=counters.snapshot())
        due += interval_s
