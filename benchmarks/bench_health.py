"""`/healthz` while a flood of connections trickles their heads (issue 34: within 50 ms while
300 connections trickle, the flood of issue 18).

rypsok serves with the default limits (64 connections, 60 s idle, 10 s per head); 300
connections, each renewed when the server closes it, send a request head a byte a second.
Once the flood is in place, a probe of its own process (as an orchestrator's is) asks
`GET /healthz` on a fresh connection every 0.2 s and times each from its connect to the whole
answer. The same probes without the flood give the floor; during the flooded probes, the
server's CPU time over the flood's connections (each refused or evicted) is what a flood
connection costs it. Loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import trio

from benchmarks.bench_http import ROOT, _flooder, _raise_fd_limit, _Server

PROBE = b"GET /healthz HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n"


async def _probe_once(port: int) -> tuple[float, bool]:
    """Seconds to the whole 200 answer, and whether the first connection got it."""
    began = trio.current_time()
    first = True
    while True:
        try:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(PROBE)
            data = b""
            with trio.move_on_after(10):
                while b'{"status":"ok"}' not in data:
                    chunk = await stream.receive_some(4096)
                    if not chunk:
                        break
                    data += chunk
            await stream.aclose()
            if data.startswith(b"HTTP/1.1 200") and b'{"status":"ok"}' in data:
                return trio.current_time() - began, first
        except (OSError, trio.BrokenResourceError):
            pass
        first = False
        await trio.sleep(0.01)


async def _probes(port: int, count: int) -> list[tuple[float, bool]]:
    out = []
    for _ in range(count):
        out.append(await _probe_once(port))
        await trio.sleep(0.2)
    return out


def _figures(samples: list[tuple[float, bool]]) -> dict[str, float]:
    ms = sorted(s * 1000 for s, _ in samples)
    return {
        "probes": float(len(ms)),
        "median_ms": statistics.median(ms),
        "p90_ms": ms[int(0.9 * (len(ms) - 1))],
        "max_ms": ms[-1],
        "first_connection": float(sum(1 for _, first in samples if first)),
    }


def _cpu_s(pid: int) -> float:
    """The user and system CPU time of process `pid` so far, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(flood: int, probes: int) -> dict[str, dict[str, float]]:
    server = _Server("rypsok", "64", "60", "auth")
    result: dict[str, dict[str, float]] = {}

    async def probe_process() -> list[tuple[float, bool]]:
        done = await trio.run_process(
            [sys.executable, "-m", "benchmarks.bench_health", "probe", str(server.port),
             str(probes)],
            cwd=ROOT, capture_stdout=True,
        )  # fmt: skip
        return [(s, f) for s, f in json.loads(done.stdout)]

    async def run() -> None:
        result["no flood"] = _figures(await probe_process())
        async with trio.open_nursery() as nursery:
            opened = [0]
            for _ in range(flood):
                nursery.start_soon(_flooder, server.port, "trickling", opened)
            await trio.sleep(3)  # the flood in place, every slot taken
            began, cpu, before = time.monotonic(), _cpu_s(server.process.pid), opened[0]
            row = result[f"{flood} trickling"] = _figures(await probe_process())
            seconds, connections = time.monotonic() - began, opened[0] - before
            spent = _cpu_s(server.process.pid) - cpu
            row["flood_per_s"] = connections / seconds
            row["cpu_share"] = spent / seconds
            row["cpu_us_each"] = spent / connections * 1e6
            nursery.cancel_scope.cancel()

    try:
        trio.run(run)
        alive = server.process.poll() is None
    finally:
        server.stop()
    for row in result.values():
        row["process_alive"] = float(alive)
    return result


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["probe"]:
        samples = trio.run(_probes, int(args_in[1]), int(args_in[2]))
        sys.stdout.write(json.dumps(samples) + "\n")
        return 0
    parser = argparse.ArgumentParser(prog="tools/bench-health")
    parser.add_argument("--flood", type=int, default=300)
    parser.add_argument("--probes", type=int, default=50)
    args = parser.parse_args(args_in)
    _raise_fd_limit()
    for name, row in measure(args.flood, args.probes).items():
        sys.stdout.write(
            f"/healthz, {name}: {row['probes']:.0f} probes, median {row['median_ms']:.1f} ms, "
            f"p90 {row['p90_ms']:.1f} ms, max {row['max_ms']:.1f} ms, answered on the first "
            f"connection {row['first_connection']:.0f}, process alive "
            f"{bool(row['process_alive'])}\n"
        )
        if "flood_per_s" in row:
            sys.stdout.write(
                f"  the flood meanwhile: {row['flood_per_s']:.0f} connections/s, the server's "
                f"CPU {row['cpu_share']:.0%} of a core, {row['cpu_us_each']:.0f} µs a "
                "connection\n"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
