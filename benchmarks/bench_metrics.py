"""What serving `/metrics` costs the MCP listener: `tools/bench-http`'s throughput run
(engine_status over HTTP/1.1 keep-alive with wrk, InstantEngine behind it) against two rypsok
servers, one without `[service.metrics]` and one with it, scraped every second as a Prometheus
would. Loopback only.

Two processes differ by a few per cent for reasons of their own (where the loader and the
allocator put things), and on a shared host the CPU a process gets drifts by tens of per cent
from one run to the next: two runs one after the other cannot resolve a 2 % target. So by
default each round runs both servers at once, both pinned to the same core and wrk to the
others: whatever the host does to that core in those seconds it does to both. A round gives
two paired figures, the cost of the second server against the first by calls a second and by
the CPU a call takes it (the scheduler's own account of the process, scrapes included). The
pair of servers is started afresh for each block of rounds, and the block (its rounds'
mean) is the unit the 95 % confidence interval is taken over (Student's t): a pair's own
difference then counts as spread, not as cost. The verdict says whether the interval lies at
or below the target, above it, or across it.

`--control` gives neither server the table (an A/A run: its interval is the method's own
resolution); `--unscraped` gives it to one and never scrapes it (the table's standing cost,
apart from the scrapes'); `--apart` runs the two one after the other, unpinned, in alternating
order, as bench-http runs its servers (its absolute figures, and its spread).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Final

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
TARGET: Final = 0.02
# Student's t at 97.5 % for 1 to 30 degrees of freedom (a two-sided 95 % interval).
_T975: Final = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
    2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
    2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
# What each comparison gives the second server, and whether it is scraped.
MODES: Final = {
    "scraped": ("on", True),
    "unscraped": ("on", False),
    "control": ("off", False),
}


def serve(port: int, metrics_port: int | None) -> int:
    """A server as the console script runs one (its process claimed: tuned for serving,
    start-up frozen, the collector on), serving InstantEngine, with or without the table."""
    import attrs

    from rypsok.config.load import load_config_text
    from rypsok.core import telemetry
    from rypsok.core.services import Rypsok
    from rypsok.mcp.listener import run_http
    from rypsok.shared import own_process
    from testkit.instant import InstantEngine

    own_process.claim()
    text = CONFIG.format(port=port, max_connections=64, idle=60)
    if metrics_port is not None:
        text = text.replace("[engines.", METRICS.format(port=metrics_port) + "[engines.", 1)
    config = load_config_text(text, {})
    # Bench only, as in bench_http: engine_status's rate limit would refuse most of a run.
    limits = attrs.evolve(config.limits, engine_status_per_minute=10**9)
    config = attrs.evolve(config, limits=limits)
    telemetry.configure(config.logging.level)
    return run_http(
        config, {}, service=lambda: Rypsok(config, env={}, engines=[InstantEngine("wikipedia")])
    )


class _MetricsServer(_Server):
    """bench_http's server process (not its constructor: another command), started from this
    module with or without the table, on `cpus` when given, hashing with `seed`."""

    def __init__(self, metrics_port: int | None, cpus: set[int] | None, seed: int) -> None:
        self.kind = "metrics " + ("off" if metrics_port is None else "on")
        self.port = _free_port()
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 # closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_metrics", "serve-metrics", str(self.port),
             "off" if metrics_port is None else str(metrics_port)],
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        )  # fmt: skip
        if cpus:
            os.sched_setaffinity(self.process.pid, cpus)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the server did not start")

    def cpu_s(self) -> float:
        """The CPU time the server's threads have run, in seconds (the scheduler's own
        nanosecond account, `/proc/PID/task/*/schedstat`)."""
        total = 0
        for task in Path(f"/proc/{self.process.pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue  # a thread that ended meanwhile
        return total / 1e9


def scrape(port: int) -> int:
    """One `GET /metrics` as a Prometheus sends it, over a plain socket (an HTTP client
    library would cost this process more CPU than the scrape costs the server); the size of
    the exposition's answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/plain\r\n\r\n")
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    answer = b"".join(chunks)
    if not answer.startswith(b"HTTP/1.1 200 "):
        raise RuntimeError(f"the scrape was answered {answer[:40]!r}")
    return len(answer.partition(b"\r\n\r\n")[2])


class _Scraper:
    """`scrape` once a second in a thread of this process until stopped (nothing when
    `port` is None)."""

    def __init__(self, port: int | None) -> None:
        self.port = port
        self.scrapes = 0
        self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while self.port is not None and not self._stop.wait(1.0):
            self.bytes = scrape(self.port)
            self.scrapes += 1

    def __enter__(self) -> _Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def interval(values: list[float]) -> tuple[float, float]:
    """The mean of `values` and the half-width of its 95 % confidence interval."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, float("inf")
    t = _T975[min(len(values) - 1, len(_T975)) - 1]
    return mean, t * statistics.stdev(values) / len(values) ** 0.5


def verdict(mean: float, half: float, target: float = TARGET) -> str:
    """Whether the interval lies at or below the target, above it, or across it."""
    if mean + half <= target:
        return "the target holds"
    if mean - half > target:
        return "the target is missed"
    return "cannot tell at this spread"


def measure(
    mode: str,
    duration: int,
    connections: int,
    blocks: int,
    rounds: int,
    together: bool,
) -> dict[str, object]:
    """`blocks` fresh pairs of servers, `rounds` paired runs each (at once, or apart in
    alternating order); each block's mean paired costs."""
    second, scraped = MODES[mode]
    server_cpus, client_cpus = _placement(together)
    if client_cpus:
        os.sched_setaffinity(0, client_cpus)  # wrk inherits it
    rows: dict[str, list[dict[str, float]]] = {"first": [], "second": []}
    paired: list[float] = []
    paired_cpu: list[float] = []
    scrapes = 0
    size = 0
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "post.lua"
        _lua(script)
        for block in range(blocks):
            metrics_port = _free_port() if second == "on" else None
            # Which of the two starts first alternates too (it warms up first, and its
            # memory and ports are the older); the two hash strings alike (the same seed, a
            # block's own), so that where their dictionaries collide is no difference.
            starts = [("first", None), ("second", metrics_port)]
            servers: dict[str, _MetricsServer] = {}
            try:
                for name, port in starts if block % 2 == 0 else starts[::-1]:
                    servers[name] = _MetricsServer(port, server_cpus, seed=block + 1)
                for server in servers.values():
                    problem = _check_answer(server)
                    if problem:
                        raise RuntimeError(problem)
                    _wrk(server.url, script, connections, 2)  # warm-up
                costs: list[tuple[float, float]] = []
                for index in range(rounds):
                    order = ["first", "second"] if (block + index) % 2 == 0 else ["second", "first"]
                    scraped_port = metrics_port if scraped else None
                    got, count, size = _round(
                        servers, order, together, scraped_port, (script, connections, duration)
                    )
                    scrapes += count
                    for name, row in got.items():
                        rows[name].append(row)
                    first, other = got["first"], got["second"]
                    # Both read as throughput: the CPU a call costs as the calls a core serves.
                    costs.append(
                        (
                            1 - other["calls_per_s"] / first["calls_per_s"],
                            1 - first["cpu_per_call_us"] / other["cpu_per_call_us"],
                        )
                    )
                paired.append(statistics.fmean(cost for cost, _ in costs))
                paired_cpu.append(statistics.fmean(cost for _, cost in costs))
            finally:
                for server in servers.values():
                    server.stop()
    return {"rows": rows, "paired": paired, "paired_cpu": paired_cpu, "scrapes": scrapes,
            "bytes": size}  # fmt: skip


def _round(
    servers: dict[str, _MetricsServer],
    order: list[str],
    together: bool,
    scraped_port: int | None,
    load: tuple[Path, int, int],
) -> tuple[dict[str, dict[str, float]], int, int]:
    """One run on each server, one after the other in `order` or both at once; each run's
    wrk figures and the CPU a call cost the server; the scrapes made and their size."""
    script, connections, duration = load
    got: dict[str, dict[str, float]] = {}
    began: dict[str, float] = {}

    def run(name: str) -> None:
        began[name] = servers[name].cpu_s()
        got[name] = _wrk(servers[name].url, script, connections, duration)
        used = servers[name].cpu_s() - began[name]
        got[name]["cpu_per_call_us"] = used / got[name]["calls"] * 1e6

    scrapes = size = 0
    if together:
        with _Scraper(scraped_port) as scraper:
            threads = [threading.Thread(target=run, args=(name,)) for name in order]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        scrapes, size = scraper.scrapes, scraper.bytes
    else:
        for name in order:
            with _Scraper(scraped_port if name == "second" else None) as scraper:
                run(name)
            scrapes += scraper.scrapes
            size = scraper.bytes or size
    if set(got) != set(order):
        raise RuntimeError("a wrk run failed")
    return got, scrapes, size


def _placement(together: bool) -> tuple[set[int] | None, set[int] | None]:
    """Both servers at once, on two cores or more: the servers on the last core, wrk (and
    this process) on the others, so that the two servers share one core's conditions."""
    cpus = sorted(os.sched_getaffinity(0))
    if not together or len(cpus) < 2:
        return None, None
    return {cpus[-1]}, set(cpus[:-1])


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
    parser.add_argument("--duration", type=int, default=5, help="seconds a run (5)")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--blocks", type=int, default=8, help="fresh pairs of servers (8)")
    parser.add_argument("--rounds", type=int, default=2, help="paired rounds a block (2)")
    parser.add_argument(
        "--apart", action="store_true", help="the two runs one after the other, unpinned"
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--control", action="store_true", help="A/A: neither server has the table")
    group.add_argument("--unscraped", action="store_true", help="the table, never scraped")
    args = parser.parse_args(args_in)
    mode = "control" if args.control else "unscraped" if args.unscraped else "scraped"
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
    got = measure(mode, args.duration, args.connections, args.blocks, args.rounds, not args.apart)
    _report(mode, got, time.monotonic() - started)
    return 0


def _report(mode: str, got: dict[str, object], elapsed: float) -> None:
    second = {"scraped": "on, scraped", "unscraped": "on, unscraped", "control": "off (again)"}
    names = {"first": "metrics off", "second": "metrics " + second[mode]}
    rows: dict[str, list[dict[str, float]]] = got["rows"]  # type: ignore[assignment]
    for key, runs in rows.items():
        rates = [row["calls_per_s"] for row in runs]
        sys.stdout.write(
            f"{names[key]:26}: best {max(rates):6.0f} calls/s, median "
            f"{statistics.median(rates):6.0f} calls/s, best p99 "
            f"{min(row['p99_ms'] for row in runs):6.2f} ms, CPU a call: median "
            f"{statistics.median(row['cpu_per_call_us'] for row in runs):5.0f} us, non-2xx "
            f"{sum(row['non_2xx'] for row in runs):.0f}\n"
        )
    if mode == "scraped":
        sys.stdout.write(f"scraped {got['scrapes']} times ({got['bytes']} bytes each)\n")
    for label, key in (("calls/s", "paired"), ("CPU a call", "paired_cpu")):
        paired: list[float] = got[key]  # type: ignore[assignment]
        mean, half = interval(paired)
        sys.stdout.write(
            f"cost by {label}, each block's mean of its paired rounds: "
            + " ".join(f"{value:+.1%}" for value in paired)
            + f"\n  mean of {len(paired)} blocks {mean:+.2%} +- {half:.2%} (95 %), median "
            f"{statistics.median(paired):+.2%}; "
            + (
                "the method's own resolution (no difference to find)\n"
                if mode == "control"
                else f"target <= {TARGET:.0%}: {verdict(mean, half)}\n"
            )
        )
    sys.stdout.write(f"{names['second']} against {names['first']}; {elapsed:.0f} s\n")


if __name__ == "__main__":
    sys.exit(main())
