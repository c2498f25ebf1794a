"""What serving `/metrics` costs the MCP listener: `tools/bench-http`'s throughput run
(engine_status over HTTP/1.1 keep-alive with wrk) against two rypsok servers side by side, one
without `[service.metrics]` and one with it, scraped every second during its runs as a
Prometheus would. The runs alternate between the two, round after round, so that a change in
the machine's load touches both alike; the best round of each is kept, and the median too.
Loopback only.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.bench_http import (
    CONFIG,
    ROOT,
    WRK_MISSING,
    _check_answer,
    _free_port,
    _lua,
    _raise_fd_limit,
    _Server,
    _wrk,
)

METRICS = '[service.metrics]\nbind = "127.0.0.1:{port}"\n'


def serve(port: int, metrics_port: int | None) -> int:
    """As bench_http's serve-rypsok (the collector off during imports), with the table."""
    gc.disable()
    import attrs

    from rypsok.config.load import load_config_text
    from rypsok.core import telemetry
    from rypsok.core.services import Rypsok
    from rypsok.mcp.listener import run_http
    from testkit.instant import InstantEngine

    text = CONFIG.format(port=port, max_connections=64, idle=60)
    if metrics_port is not None:
        text = text.replace("[engines.", METRICS.format(port=metrics_port) + "[engines.", 1)
    config = load_config_text(text, {})
    limits = attrs.evolve(config.limits, engine_status_per_minute=10**9)
    config = attrs.evolve(config, limits=limits)
    telemetry.configure(config.logging.level)
    return run_http(
        config, {}, service=lambda: Rypsok(config, env={}, engines=[InstantEngine("wikipedia")])
    )


class _MetricsServer(_Server):
    """bench_http's server process, started from this module (with or without the table)."""

    def __init__(self, metrics: str) -> None:  # the parent's, another command
        import socket

        self.kind = f"metrics {metrics}"
        self.port = _free_port()
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 # closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_metrics", "serve-metrics", str(self.port),
             metrics],
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the server did not start")


class _Scraper:
    """GET /metrics once a second in a thread of this process until stopped."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.scrapes = 0
        self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import httpx

        while not self._stop.wait(1.0):
            response = httpx.get(self.url, timeout=5, trust_env=False)
            response.raise_for_status()
            self.scrapes += 1
            self.bytes = len(response.content)

    def __enter__(self) -> _Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def measure(duration: int, connections: int, rounds: int) -> dict[str, dict[str, float]]:
    metrics_port = _free_port()
    rows: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
    scrapes = 0
    size = 0
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "post.lua"
        _lua(script)
        off = _MetricsServer("off")
        on = _MetricsServer(str(metrics_port))
        try:
            for server in (off, on):
                problem = _check_answer(server)
                if problem:
                    raise RuntimeError(problem)
                _wrk(server.url, script, connections, 2)  # warm-up
            for _ in range(rounds):
                rows["off"].append(_wrk(off.url, script, connections, duration))
                with _Scraper(metrics_port) as scraper:
                    rows["on"].append(_wrk(on.url, script, connections, duration))
                scrapes += scraper.scrapes
                size = scraper.bytes
        finally:
            off.stop()
            on.stop()
    out: dict[str, dict[str, float]] = {}
    for name, runs in rows.items():
        best = max(runs, key=lambda row: row["calls_per_s"])
        out[name] = {
            "best_calls_per_s": best["calls_per_s"],
            "median_calls_per_s": statistics.median(r["calls_per_s"] for r in runs),
            "best_p99_ms": min(r["p99_ms"] for r in runs),
            "non_2xx": sum(r["non_2xx"] for r in runs),
        }
    out["on"]["scrapes"] = float(scrapes)
    out["on"]["exposition_bytes"] = float(size)
    return out


def costs(samples: int = 300) -> dict[str, float]:
    """In-process figures that the machine's load does not blur: the CPU time of one scrape
    (the exposition of 8 engines' and 3 tools' families, and the process collector), and of
    the bookkeeping one call adds whether metrics are on or not."""
    from prometheus_client import generate_latest

    from rypsok.core.model import EngineState, EngineStatus
    from rypsok.core.telemetry import COUNTERS
    from rypsok.mcp.metrics import metrics_registry

    engines = [f"engine{i}" for i in range(8)]
    for tool in ("web_search", "web_fetch", "engine_status"):
        for outcome in ("ok", "partial", "empty", "error", "cancelled"):
            COUNTERS.call_ended(tool, outcome, 0.3)
    for engine in engines:
        for failure in (None, "timeout", "rate_limited", "request_failure"):
            COUNTERS.engine_request(engine, failure)
        COUNTERS.engine_answered(engine, 0.2)
    states = [EngineStatus(id=e, state=EngineState.CLOSED) for e in engines]
    registry = metrics_registry(lambda: states, lambda: 3)
    times = []
    for _ in range(samples):
        began = time.process_time()
        generate_latest(registry)
        times.append(time.process_time() - began)
    per_call = []
    for _ in range(samples):
        began = time.perf_counter()
        for _ in range(100):
            COUNTERS.call_ended("web_search", "ok", 0.3)
            COUNTERS.engine_request("engine0", None)
            COUNTERS.engine_answered("engine0", 0.2)
        per_call.append((time.perf_counter() - began) / 100)
    return {
        "scrape_ms": statistics.median(times) * 1000,
        "exposition_bytes": float(len(generate_latest(registry))),
        "per_call_us": statistics.median(per_call) * 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["serve-metrics"]:
        _raise_fd_limit()
        port = int(args_in[1])
        return serve(port, None if args_in[2] == "off" else int(args_in[2]))
    parser = argparse.ArgumentParser(prog="tools/bench-metrics")
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(args_in)
    cost = costs()
    sys.stdout.write(
        f"one scrape: {cost['scrape_ms']:.2f} ms of CPU ({cost['exposition_bytes']:.0f} bytes, "
        f"8 engines, 3 tools), {cost['scrape_ms'] / 10:.3f} % of one core at one scrape a "
        f"second; the bookkeeping of one call (a search with one engine): "
        f"{cost['per_call_us']:.1f} us\n"
    )
    if shutil.which("wrk") is None:
        sys.stderr.write(WRK_MISSING)
        return 1
    _raise_fd_limit()
    started = time.monotonic()
    figures = measure(args.duration, args.connections, args.rounds)
    for name, row in figures.items():
        sys.stdout.write(
            f"metrics {name:3}: best {row['best_calls_per_s']:8.0f} calls/s, median "
            f"{row['median_calls_per_s']:8.0f} calls/s, best p99 {row['best_p99_ms']:6.2f} ms, "
            f"non-2xx {row['non_2xx']:.0f}\n"
        )
    on, off = figures["on"], figures["off"]
    sys.stdout.write(
        f"scraped {on['scrapes']:.0f} times ({on['exposition_bytes']:.0f} bytes each); "
        f"cost of /metrics: best {1 - on['best_calls_per_s'] / off['best_calls_per_s']:+.1%}, "
        f"median {1 - on['median_calls_per_s'] / off['median_calls_per_s']:+.1%} "
        f"(target <= 2 %); {time.monotonic() - started:.0f} s\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
