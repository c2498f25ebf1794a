"""Process-wide counters and the task that writes them to the log once a minute.

Refused calls per tool and reason (REQ-OBS-007), engine failures per engine and class, and
call errors per tool and kind (REQ-OBS-003). The counts are cumulative since the process
started, so a count that keeps rising from one `counters` line to the next is visible by
comparing two lines.

Beside them, what the metrics exposition shows and the log line does not: calls by tool and
outcome, engine requests by engine and class (`ok` for an answer), the durations of calls and
of completed engine requests in fixed buckets, the result cache's hits and misses and the
bytes web_fetch read (`Activity`, `activity()`).

Implements REQ-OBS-008.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Final, TypedDict

import attrs
import trio

from ._log import TOOL_REFUSALS, info
from ._refusals import TOOL_REFUSAL_LOG_INTERVAL_S

__all__ = [
    "CALL_BUCKETS_S",
    "COUNTERS",
    "ENGINE_BUCKETS_S",
    "Activity",
    "Counters",
    "CountersSnapshot",
    "Durations",
    "run_counters_reporter",
]


class CountersSnapshot(TypedDict):
    tools: dict[str, dict[str, int]]  # tool -> reason -> refused calls
    http: dict[str, int]  # reason -> refused requests or connections
    engines: dict[str, dict[str, int]]  # engine -> failure class -> failed requests
    errors: dict[str, dict[str, int]]  # tool -> error kind -> calls that ended in it
    coordination_unavailable: int  # limiter decisions made without the shared store
    log_lines_dropped: int  # log lines lost because standard error was not read


def _nest(items: list[tuple[tuple[str, str], int]]) -> dict[str, dict[str, int]]:
    nested: dict[str, dict[str, int]] = {}
    for (outer, inner), count in items:
        nested.setdefault(outer, {})[inner] = count
    return nested


# Upper bounds of the duration buckets, in seconds: a call's (LIM-S7 2.8 s, LIM-F5 11 s) and
# an engine request's (LIM-S5 2 s). The last bucket (+Inf) is implied.
CALL_BUCKETS_S: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0)
ENGINE_BUCKETS_S: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0)


class Durations:
    """Observations of one key in fixed buckets: counts per bucket (not cumulative), the
    count and the sum; not thread-safe by itself (Counters holds the lock)."""

    __slots__ = ("buckets", "count", "counts", "total_s")

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.count = 0
        self.total_s = 0.0

    def observe(self, seconds: float) -> None:
        seconds = max(0.0, seconds)
        index = next((i for i, bound in enumerate(self.buckets) if seconds <= bound), -1)
        self.counts[index] += 1
        self.count += 1
        self.total_s += seconds

    def copy(self) -> Durations:
        out = Durations(self.buckets)
        out.counts = list(self.counts)
        out.count = self.count
        out.total_s = self.total_s
        return out


@attrs.frozen(kw_only=True)
class Activity:
    """A copy of what the metrics show beside the snapshot; keys sorted."""

    calls: tuple[tuple[tuple[str, str], int], ...]  # (tool, outcome) -> calls
    engine_requests: tuple[tuple[tuple[str, str], int], ...]  # (engine, class or ok)
    call_durations: tuple[tuple[str, Durations], ...]  # tool
    engine_durations: tuple[tuple[str, Durations], ...]  # engine
    cache: tuple[tuple[str, int], ...]  # hit or miss -> lookups
    fetched_bytes: int


class Counters:
    """Process-wide counts: refusals, engine failures and call errors, and the activity the
    metrics show."""

    def __init__(self) -> None:
        # Tools are a fixed set, engines are the configured ones, and reasons, classes and
        # kinds come from the model's vocabularies: the keys are bounded by the code and the
        # configuration, never by what callers or providers send.
        self._tools: Counter[tuple[str, str]] = Counter()
        self._http: Counter[str] = Counter()
        self._engines: Counter[tuple[str, str]] = Counter()
        self._errors: Counter[tuple[str, str]] = Counter()
        self._coordination = 0  # limiter decisions made without the shared store
        self._log_dropped = 0
        self._calls: Counter[tuple[str, str]] = Counter()
        self._engine_requests: Counter[tuple[str, str]] = Counter()
        self._call_durations: dict[str, Durations] = {}
        self._engine_durations: dict[str, Durations] = {}
        self._cache: Counter[str] = Counter()
        self._fetched_bytes = 0
        # Increments may come from worker threads as well as from Trio tasks.
        self._lock = threading.Lock()

    def call_ended(self, tool: str, outcome: str, seconds: float) -> None:
        """One tool call ended with `outcome` (the response's, `cancelled` or `error`)."""
        with self._lock:
            self._calls[(tool, str(outcome))] += 1
            durations = self._call_durations.get(tool)
            if durations is None:
                durations = self._call_durations[tool] = Durations(CALL_BUCKETS_S)
            durations.observe(seconds)

    def engine_request(self, engine: str, failure_class: str | None) -> None:
        """One engine request made: None (`ok`) when it answered with results."""
        with self._lock:
            self._engine_requests[
                (engine, "ok" if failure_class is None else str(failure_class))
            ] += 1

    def engine_answered(self, engine: str, seconds: float) -> None:
        """The duration of one completed engine request (the provider answered, LIM-S11)."""
        with self._lock:
            durations = self._engine_durations.get(engine)
            if durations is None:
                durations = self._engine_durations[engine] = Durations(ENGINE_BUCKETS_S)
            durations.observe(seconds)

    def cache_lookup(self, hit: bool) -> None:
        with self._lock:
            self._cache["hit" if hit else "miss"] += 1

    def fetched(self, size: int) -> None:
        """Bytes of one page web_fetch read (after decompression)."""
        with self._lock:
            self._fetched_bytes += size

    def activity(self) -> Activity:
        with self._lock:
            return Activity(
                calls=tuple(sorted(self._calls.items())),
                engine_requests=tuple(sorted(self._engine_requests.items())),
                call_durations=tuple(
                    (k, v.copy()) for k, v in sorted(self._call_durations.items())
                ),
                engine_durations=tuple(
                    (k, v.copy()) for k, v in sorted(self._engine_durations.items())
                ),
                cache=tuple(sorted(self._cache.items())),
                fetched_bytes=self._fetched_bytes,
            )

    def refused(self, tool: str, reason: str) -> None:
        with self._lock:
            self._tools[(tool, str(reason))] += 1

    def http_refused(self, reason: str) -> None:
        with self._lock:
            self._http[str(reason)] += 1

    def engine_failed(self, engine: str, failure_class: str) -> None:
        """One engine request that ended in a failure class (REQ-ENG-006)."""
        with self._lock:
            self._engines[(engine, str(failure_class))] += 1

    def call_error(self, tool: str, kind: str) -> None:
        """One tool call that ended with an error of `kind` (REQ-ERR-002)."""
        with self._lock:
            self._errors[(tool, str(kind))] += 1

    def coordination_unavailable(self) -> None:
        """One limiter decision made in-process because the shared store could not decide."""
        with self._lock:
            self._coordination += 1

    def log_lines_dropped(self, count: int) -> None:
        """`count` log lines lost because the log's reader did not keep up."""
        with self._lock:
            self._log_dropped += count

    def snapshot(self) -> CountersSnapshot:
        """A fresh copy, keys sorted; changing it changes nothing here."""
        with self._lock:
            tools = sorted(self._tools.items())
            http = sorted(self._http.items())
            engines = sorted(self._engines.items())
            errors = sorted(self._errors.items())
            coordination = self._coordination
            log_dropped = self._log_dropped
        return {
            "coordination_unavailable": coordination,
            "log_lines_dropped": log_dropped,
            "tools": _nest(tools),
            "http": dict(http),
            "engines": _nest(engines),
            "errors": _nest(errors),
        }

    def reset(self) -> None:
        """Back to zero; for tests, since a process's counters otherwise only grow."""
        with self._lock:
            self._tools.clear()
            self._http.clear()
            self._engines.clear()
            self._errors.clear()
            self._coordination = 0
            self._log_dropped = 0
            self._calls.clear()
            self._engine_requests.clear()
            self._call_durations.clear()
            self._engine_durations.clear()
            self._cache.clear()
            self._fetched_bytes = 0


COUNTERS: Final = Counters()


async def run_counters_reporter(
    interval_s: float = 60.0,
    *,
    counters: Counters = COUNTERS,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Log a `counters` event every `interval_s` seconds until cancelled, and the tool
    refusals written in aggregate (`TOOL_REFUSALS`) as their intervals end, the rest of
    them when it is cancelled (at the shutdown).

    The transport starts it in its own nursery. The beats are on a fixed schedule from the
    start, so a slow write does not make the minute drift.
    """
    if not interval_s > 0:
        raise ValueError("interval_s must be positive")
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_flush_tool_refusals)
            task_status.started()
            await _report(interval_s, counters)
    finally:
        TOOL_REFUSALS.flush(final=True)


async def _report(interval_s: float, counters: Counters) -> None:
    due = trio.current_time() + interval_s
    while True:
        await trio.sleep_until(due)
        snapshot = counters.snapshot()
        info(
            "counters",
            refusals={"tools": snapshot["tools"], "http": snapshot["http"]},
            engine_failures=snapshot["engines"],
            call_errors=snapshot["errors"],
            coordination_unavailable=snapshot["coordination_unavailable"],
            log_lines_dropped=snapshot["log_lines_dropped"],
        )
        due += interval_s


async def _flush_tool_refusals() -> None:
    while True:
        await trio.sleep(TOOL_REFUSAL_LOG_INTERVAL_S)
        TOOL_REFUSALS.flush()
