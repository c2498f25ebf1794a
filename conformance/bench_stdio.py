"""`tools/bench-stdio`: what the stdio transport costs, measured, not asserted.

- round trip: the median time from writing a web_search line to reading its answer, over
  sequential calls to one warm process whose engine answers from memory (conformance.instant),
  minus the median time of that engine's own answer; target at most 3 ms.
- cold start: the median time from starting the process to reading the answer of the first
  web_search, written to its stdin at once; target at most 400 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from conformance.instant import InstantEngine
from rypsok.core.engines.base import EngineQuery
from rypsok.core.model import Category, SafeSearch

ROOT = Path(__file__).resolve().parent.parent

CONFIG = """\
config_version = 1
[limits]
web_search_per_minute = 6000
[engines.wikipedia]
type = "wikipedia"
categories = ["general", "science"]
"""


def _request(request_id: int) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {
            "name": "web_search",
            "arguments": {"query": f"rust programming language {request_id}"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    return json.dumps(message).encode() + b"\n"


def _argv(config: Path) -> list[str]:
    return [
        sys.executable, "-m", "conformance.launch",
        "--config", str(config), "--instant-engine", "wikipedia",
    ]  # fmt: skip


class _Lines:
    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = b""

    async def next(self) -> dict[str, object]:
        while b"\n" not in self._buffer:
            data = await self._stream.receive_some(1 << 20)
            if not data:
                raise EOFError("rypsok closed its stdout")
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        answer: dict[str, object] = json.loads(line)
        return answer


async def _start(config: Path) -> trio.Process:
    return await trio.lowlevel.open_process(
        _argv(config),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )


async def _stop(process: trio.Process) -> None:
    assert process.stdin is not None
    await process.stdin.aclose()
    with trio.fail_after(10):
        await process.wait()


async def cold_start(config: Path, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        process = await _start(config)
        assert process.stdin is not None
        assert process.stdout is not None
        await process.stdin.send_all(_request(1))
        answer = await _Lines(process.stdout).next()
        times.append(time.perf_counter() - start)
        if "result" not in answer:
            raise RuntimeError("the first call was not answered with a result")
        await _stop(process)
    return times


async def round_trips(config: Path, calls: int, warmup: int) -> list[float]:
    process = await _start(config)
    assert process.stdin is not None
    assert process.stdout is not None
    lines = _Lines(process.stdout)
    times = []
    for request_id in range(warmup + calls):
        start = time.perf_counter()
        await process.stdin.send_all(_request(request_id))
        answer = await lines.next()
        elapsed = time.perf_counter() - start
        result = answer.get("result")
        if not isinstance(result, dict) or result.get("isError") is not False:
            raise RuntimeError("a bench call failed; is the rate limit high enough?")
        if request_id >= warmup:
            times.append(elapsed)
    await _stop(process)
    return times


async def engine_time(calls: int) -> float:
    engine = InstantEngine("wikipedia")
    query = EngineQuery(
        query="rust programming language",
        category=Category.GENERAL,
        language="en",
        region="US",
        safe_search=SafeSearch.MODERATE,
        time_range=None,
        count=10,
    )
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        await engine.search(query)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


async def main(calls: int, runs: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "bench.toml"
        config.write_text(CONFIG, encoding="utf-8")
        cold = await cold_start(config, runs)
        trips = await round_trips(config, calls, warmup=min(50, calls))
    engine = await engine_time(1000)
    trip = statistics.median(trips) - engine
    start = statistics.median(cold)
    out = sys.stdout
    out.write(f"stdio web_search round trip, median of {len(trips)} calls: {_ms(trip)}")
    out.write(f" (measured {_ms(statistics.median(trips))} minus engine {_ms(engine)};")
    out.write(f" p90 {_ms(sorted(trips)[int(len(trips) * 0.9)])}; target <= 3 ms)\n")
    out.write(f"stdio cold start to first answer, median of {runs} runs: {_ms(start)}")
    out.write(f" (min {_ms(min(cold))}, max {_ms(max(cold))}; target <= 400 ms)\n")
    return 0


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/bench-stdio")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    return trio.run(main, args.calls, args.runs)


if __name__ == "__main__":
    sys.exit(run())
