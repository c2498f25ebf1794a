"""The Prometheus metrics of a serving process (`[service.metrics]`, REQ-OBS-008).

Read at each scrape from what the process already keeps: the telemetry counters (calls by
tool and outcome, refusals by tool and reason, call errors, engine requests and failures by
engine and class, the durations of calls and of completed engine requests, the result
cache's lookups, the bytes web_fetch read), the engines' circuits and the listener's calls
in flight; the process's memory and CPU come from prometheus_client's own process collector.
The exposition itself is prometheus_client's.

Every label value comes from a closed vocabulary (tools, outcomes, reasons, classes, kinds,
circuit states) or from the configuration (engine identifiers): never a caller, a token, a
query, a URL or a secret. prometheus_client is imported here only, by a process whose
configuration has the table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from rypsok.core import telemetry
from rypsok.core.model import EngineState

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from prometheus_client.metrics_core import Metric

    from rypsok.core.model import EngineStatus
    from rypsok.core.telemetry import Durations

__all__ = ["RypsokCollector", "metrics_registry"]

_PREFIX: Final = "rypsok_"


def _counter(
    name: str, doc: str, labels: list[str], rows: Iterable[tuple[tuple[str, ...], float]]
) -> CounterMetricFamily:
    family = CounterMetricFamily(_PREFIX + name, doc, labels=labels)
    for values, count in rows:
        family.add_metric(list(values), count)
    return family


def _histogram(
    name: str, doc: str, label: str, rows: Iterable[tuple[str, Durations]]
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(_PREFIX + name, doc, labels=[label])
    for value, durations in rows:
        cumulative = 0
        buckets: list[tuple[str, float]] = []
        for bound, count in zip(durations.buckets, durations.counts, strict=False):
            cumulative += count
            buckets.append((repr(float(bound)), float(cumulative)))
        buckets.append(("+Inf", float(durations.count)))
        family.add_metric([value], buckets, durations.total_s)
    return family


def _pairs(nested: dict[str, dict[str, int]]) -> Iterator[tuple[tuple[str, str], float]]:
    for outer, inner in nested.items():
        for key, count in inner.items():
            yield (outer, key), float(count)


class RypsokCollector(Collector):
    """The families of one process, made afresh at each scrape; `engine_states` is the
    facade's (None for a service without engines' state, a test's fake: no circuit rows)."""

    def __init__(
        self,
        engine_states: Callable[[], Iterable[EngineStatus]] | None,
        in_flight: Callable[[], int],
        counters: telemetry.Counters = telemetry.COUNTERS,
    ) -> None:
        self._engine_states = engine_states
        self._in_flight = in_flight
        self._counters = counters

    def collect(self) -> Iterator[Metric]:
        snapshot = self._counters.snapshot()
        activity = self._counters.activity()
        yield _counter(
            "calls", "Tool calls ended, by tool and outcome (the response's, cancelled or "
            "error).", ["tool", "outcome"], activity.calls,
        )  # fmt: skip
        yield _counter(
            "refusals", "Tool calls refused, by tool and reason (REQ-OBS-007).",
            ["tool", "reason"], _pairs(snapshot["tools"]),
        )  # fmt: skip
        yield _counter(
            "http_refusals", "Requests or connections the HTTP gate refused, by reason.",
            ["reason"], (((reason,), float(n)) for reason, n in snapshot["http"].items()),
        )  # fmt: skip
        yield _counter(
            "call_errors", "Tool calls that ended with an error object, by tool and kind.",
            ["tool", "kind"], _pairs(snapshot["errors"]),
        )  # fmt: skip
        yield _counter(
            "engine_requests", "Engine requests made, by engine and class (ok: answered "
            "with results; else the failure class).", ["engine", "class"],
            activity.engine_requests,
        )  # fmt: skip
        yield _counter(
            "engine_failures", "An engine's part of a search that failed, by engine and "
            "class (REQ-OBS-003; the counters log event's engine_failures).",
            ["engine", "class"], _pairs(snapshot["engines"]),
        )  # fmt: skip
        yield _histogram(
            "call_duration_seconds", "Duration of tool calls, by tool.", "tool",
            activity.call_durations,
        )  # fmt: skip
        yield _histogram(
            "engine_request_duration_seconds", "Duration of completed engine requests (the "
            "provider answered; LIM-S11), by engine.", "engine", activity.engine_durations,
        )  # fmt: skip
        yield self._circuits()
        yield _counter(
            "cache_lookups", "Result cache lookups, by result (hit or miss).", ["result"],
            (((result,), float(n)) for result, n in activity.cache),
        )  # fmt: skip
        yield _counter(
            "fetch_bytes", "Bytes of pages web_fetch read, after decompression.", [],
            [((), float(activity.fetched_bytes))],
        )  # fmt: skip
        yield _counter(
            "coordination_unavailable", "Limiter decisions made without the shared store.",
            [], [((), float(snapshot["coordination_unavailable"]))],
        )  # fmt: skip
        yield _counter(
            "log_lines_dropped", "Log lines lost because standard error was not read.", [],
            [((), float(snapshot["log_lines_dropped"]))],
        )  # fmt: skip
        in_flight = GaugeMetricFamily(
            _PREFIX + "calls_in_flight", "HTTP requests running on the MCP listener."
        )
        in_flight.add_metric([], float(self._in_flight()))
        yield in_flight

    def _circuits(self) -> GaugeMetricFamily:
        family = GaugeMetricFamily(
            _PREFIX + "engine_circuit_state",
            "1 for each engine's state (closed, open, half_open, disabled), 0 for the others.",
            labels=["engine", "state"],
        )
        entries = () if self._engine_states is None else self._engine_states()
        for entry in entries:
            for state in EngineState:
                family.add_metric([entry.id, str(state)], 1.0 if entry.state is state else 0.0)
        return family


def metrics_registry(
    engine_states: Callable[[], Iterable[EngineStatus]] | None, in_flight: Callable[[], int]
) -> CollectorRegistry:
    """A registry of this process's families and its process collector (memory, CPU, open
    files), apart from prometheus_client's global one."""
    out = CollectorRegistry(auto_describe=False)
    out.register(RypsokCollector(engine_states, in_flight))
    ProcessCollector(registry=out)
    return out
