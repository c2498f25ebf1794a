"""`tools/bench-stdio`: what stdio costs a host, measured the way a host sees it.

The benchmark starts the installed console script, `.venv/bin/rypsok serve --config FILE`,
exactly as a host would, with a configuration whose one engine (a private MediaWiki through
`base_url`) points at a MediaWiki-shaped HTTP server on 127.0.0.1 that this process runs.

- cold start: from spawning the process to reading the answer of a `server/discover` line
  written to its stdin at once; repeated `--runs` times. Then a first `web_search` is
  written, and the time from spawning to its answer is the first call's latency.
- own share: the time from writing a `web_search` line to reading its answer, minus the
  engine's own time for that same call, measured inside the fixture server from the arrival
  of the request's first byte to the last byte of its answer handed to the socket; over
  `--calls` sequential calls to one warm process, after a warm-up, paced to stay within the
  engine's own rate limit (so a run of 200 calls takes about a minute).
- the floor: the same figures of `benchmarks.stdio_floor`, a minimal Trio program doing
  the same exchange with nothing else, called in turns with rypsok under the same pace: what
  this machine charges any Python process for one round trip, in the same run. rypsok's
  figures divided by the floor's are printed too: the host's speed moves both together.
- the peer: the same figures of `benchmarks.stdio_peer`, a search server on the official
  MCP SDK (stdio, one web_search tool asking the same engine through httpx, its hits
  returned as they came), called in the same turns; its starts alternate with rypsok's.

Figures are printed, never asserted. The guard is three ratios of medians measured in this
one run, which no change may push past: rypsok's own share at most 3.6 times the floor's
and at most 0.8 times the peer's, and its cold start (to the discover answer) at most 0.4
times the peer's. The last lines print each ratio against its bound, with "holds" or
"exceeded".
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

from testkit import messages
from testkit.mediawiki import first_search_sample

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".venv" / "bin" / "rypsok"

CONFIG = """\
config_version = 1
[limits]
web_search_per_minute = 6000
[engines.wikipedia]
type = "wikipedia"
categories = ["general"]
base_url = "http://127.0.0.1:{port}/w"
[engines.wikiscience]
type = "wikipedia"
categories = ["science"]
base_url = "http://127.0.0.1:{port}/w"
"""
# The wikipedia driver admits 100 requests a minute per engine (its admission record, which a
# configuration cannot raise); two engines, one per category, asked in turn, and calls paced
# to stay under both, so that every call reaches the engine instead of being rate-skipped.
_ENGINES = 2
_PACE_S = 60 / 100 / _ENGINES * 1.05
_CATEGORIES = ("general", "science")


def _line(message: dict[str, object]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _discover(request_id: int) -> bytes:
    return _line(messages.discover(request_id))


def _search(request_id: int) -> bytes:
    arguments = {
        "query": f"rust programming language {request_id}",
        "category": _CATEGORIES[request_id % _ENGINES],
    }
    return _line(messages.modern("tools/call", request_id, name="web_search", arguments=arguments))


class _TimedWiki:
    """A MediaWiki-shaped HTTP/1.1 server with keep-alive that times its own answers.

    `spans` holds, per answered request, the seconds from the arrival of its first byte to
    the moment its whole answer was handed to the socket: the engine's own time.
    """

    def __init__(self) -> None:
        self.body = first_search_sample()
        self.head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\n"
            + f"Content-Length: {len(self.body)}\r\n\r\n".encode()
        )
        self.spans: list[float] = []
        # Connections by the client that opened them: the User-Agent of their first request.
        self.connections: collections.Counter[str] = collections.Counter()
        self.noted = trio.Event()  # set when an answer's span is noted

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._connection, listeners)
            task_status.started(port)

    async def _connection(self, stream: trio.SocketStream) -> None:
        buffer = b""
        counted = False
        try:
            while True:
                arrived = None
                while b"\r\n\r\n" not in buffer:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    if arrived is None:
                        arrived = time.perf_counter()
                    buffer += data
                if arrived is None:  # a pipelined request already in the buffer
                    arrived = time.perf_counter()
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                if not counted:
                    self.connections[_client_of(head)] += 1
                    counted = True
                await stream.send_all(self.head + self.body)
                self.spans.append(time.perf_counter() - arrived)
                self.noted.set()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        finally:
            await stream.aclose()


def _client_of(head: bytes) -> str:
    """`rypsok`, `stdio-floor`, `python-httpx` (the peer) or `other`, from the User-Agent."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"user-agent":
            return value.strip().split(b"/")[0].decode("latin-1") or "other"
    return "other"


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


# Another checkout's `rypsok` package to run under the same console script and installed
# dependencies (`--pythonpath`), for comparing two versions on the same machine at once.
_PYTHONPATH: list[str] = []


async def _start(config: Path) -> trio.Process:
    # The environment a host gives: no PYTHON* switches inherited from whoever runs this.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    if _PYTHONPATH:
        env["PYTHONPATH"] = _PYTHONPATH[0]
    return await trio.lowlevel.open_process(
        [str(SCRIPT), "serve", "--config", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=tempfile.gettempdir(),
        env=env,
    )


async def _start_helper(module: str, port: int) -> trio.Process:
    """The floor or the peer, under the same interpreter and installed packages."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(ROOT)
    return await trio.lowlevel.open_process(
        [str(SCRIPT.parent / "python"), "-m", module, str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=tempfile.gettempdir(),
        env=env,
    )


async def _stop(process: trio.Process) -> None:
    assert process.stdin is not None
    await process.stdin.aclose()
    with trio.fail_after(10):
        await process.wait()


class _Starts:
    """Per start: seconds to the discover answer, CPU seconds of the main thread and of the
    whole process by then, and seconds to the answer of a first web_search written right
    after that answer (REQ-PERF-005)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.cpu: list[float] = []
        self.process_cpu: list[float] = []
        self.first_calls: list[float] = []

    async def start(self, spawn: Callable[[], Awaitable[trio.Process]]) -> None:
        start = time.perf_counter()
        process = await spawn()
        assert process.stdin is not None
        assert process.stdout is not None
        lines = _Lines(process.stdout)
        await process.stdin.send_all(_discover(1))
        answer = await lines.next()
        self.times.append(time.perf_counter() - start)
        self.cpu.append(_cpu_s(process.pid))
        self.process_cpu.append(_process_cpu_s(process.pid))
        if "result" not in answer:
            raise RuntimeError("server/discover was not answered with a result")
        await process.stdin.send_all(_search(2))
        answer = await lines.next()
        self.first_calls.append(time.perf_counter() - start)
        result = answer.get("result")
        if not isinstance(result, dict) or result.get("isError") is not False:
            raise RuntimeError(f"the first web_search failed: {json.dumps(answer)[:300]}")
        await _stop(process)


async def cold_starts(config: Path, port: int, runs: int) -> tuple[_Starts, _Starts]:
    """rypsok's starts and the peer's, in turns."""
    rypsok = _Starts()
    peer = _Starts()
    for _ in range(runs):
        await rypsok.start(lambda: _start(config))
        await peer.start(lambda: _start_helper("benchmarks.stdio_peer", port))
    return rypsok, peer


class _Measured:
    """One process the benchmark writes web_search lines to, with what it measured."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.lines = _Lines(process.stdout)
        self.shares: list[float] = []
        self.engine: list[float] = []  # the engine's own time of each kept call
        self.cpu_before = _cpu_s(process.pid)
        self.cpu_per_call = 0.0

    async def call(self, wiki: _TimedWiki, request_id: int, *, keep: bool) -> None:
        before = len(wiki.spans)
        wiki.noted = trio.Event()
        start = time.perf_counter()
        await self.stdin.send_all(_search(request_id))
        answer = await self.lines.next()
        elapsed = time.perf_counter() - start
        result = answer.get("result")
        if not isinstance(result, dict) or result.get("isError") is not False:
            raise RuntimeError(f"a bench call failed: {json.dumps(answer)[:300]}")
        with trio.move_on_after(1):  # the fixture's task may not have noted it yet
            await wiki.noted.wait()
        if len(wiki.spans) != before + 1:
            raise RuntimeError(f"the engine was not asked exactly once for call {request_id}")
        if keep:
            self.shares.append(elapsed - wiki.spans[-1])
            self.engine.append(wiki.spans[-1])


async def own_shares(
    config: Path, wiki: _TimedWiki, port: int, calls: int, warmup: int
) -> tuple[_Measured, _Measured, _Measured]:
    """rypsok, the floor (`benchmarks.stdio_floor`) and the peer (`benchmarks.stdio_peer`),
    called in turns: each call is followed by a third of the pace before the next one's, so
    all three find the machine as idle between their own calls as a host's pace leaves it."""
    rypsok = _Measured(await _start(config))
    floor = _Measured(await _start_helper("benchmarks.stdio_floor", port))
    peer = _Measured(await _start_helper("benchmarks.stdio_peer", port))
    measured = (rypsok, floor, peer)
    for request_id in range(warmup + calls):
        keep = request_id >= warmup
        for one in measured:
            if request_id >= 8:  # after the limiters' bursts
                await trio.sleep(_PACE_S / len(measured))
            await one.call(wiki, request_id, keep=keep)
        if request_id == warmup - 1:
            for one in measured:
                one.cpu_before = _cpu_s(one.process.pid)
    for one in measured:
        one.cpu_per_call = (_cpu_s(one.process.pid) - one.cpu_before) / calls
        await _stop(one.process)
    return rypsok, floor, peer


def _cpu_s(pid: int) -> float:
    """CPU seconds a process's main thread has used so far (Linux /proc).

    The machine the figures are taken on is shared: wall times wait for the CPU as well,
    CPU times do not, so both are printed. The scheduler's own count (nanoseconds) where the
    kernel keeps it, else user plus system time in clock ticks (10 ms, too coarse to tell
    a change of a tenth of a millisecond per call apart).
    """
    schedstat = Path(f"/proc/{pid}/schedstat")
    if schedstat.exists():
        return int(schedstat.read_text().split()[0]) / 1e9
    return _process_cpu_s(pid)


def _process_cpu_s(pid: int) -> float:
    """CPU seconds of the whole process, every thread (ended ones too), in clock ticks.

    The start reads the trust store in a thread of its own, which the main thread's count
    leaves out; this one holds it, at the kernel's tick resolution (10 ms).
    """
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def _p90(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.9)]


async def main(calls: int, runs: int) -> int:
    if not SCRIPT.exists():
        sys.stderr.write(f"bench-stdio: {SCRIPT} is missing; run tools/setup first\n")
        return 1
    wiki = _TimedWiki()
    async with trio.open_nursery() as nursery:
        port = await nursery.start(wiki.serve)
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "bench.toml"
            config.write_text(CONFIG.format(port=port), encoding="utf-8")
            cold, peer_cold = await cold_starts(config, port, runs)
            before = wiki.connections["rypsok"]
            rypsok, floor, peer = await own_shares(config, wiki, port, calls, warmup=20)
            connections = wiki.connections["rypsok"] - before
        nursery.cancel_scope.cancel()
    out = sys.stdout
    out.write(
        f"stdio web_search own share (round trip minus the engine's time), {calls} calls:"
        f" median {_ms(statistics.median(rypsok.shares))}, p90 {_ms(_p90(rypsok.shares))};"
        f" engine median {_ms(statistics.median(rypsok.engine))};"
        f" {connections} engine connection(s); rypsok's CPU time per call"
        f" {_ms(rypsok.cpu_per_call)}\n"
    )
    out.write(
        f"the floor, a minimal Trio program doing the same exchange (benchmarks.stdio_floor),"
        f" in turns with it: own share median {_ms(statistics.median(floor.shares))},"
        f" p90 {_ms(_p90(floor.shares))}; its CPU time per call {_ms(floor.cpu_per_call)}\n"
    )
    # The host's speed moves both figures together: their ratio is what rypsok's code sets.
    out.write(
        f"rypsok against the floor in the same turns: own share"
        f" {statistics.median(rypsok.shares) / statistics.median(floor.shares):.2f} times,"
        f" CPU per call {rypsok.cpu_per_call / floor.cpu_per_call:.2f} times\n"
    )
    out.write(
        f"the peer, the official MCP SDK's stdio server with a web_search tool on httpx"
        f" (benchmarks.stdio_peer), in turns with it: own share median"
        f" {_ms(statistics.median(peer.shares))}, p90 {_ms(_p90(peer.shares))};"
        f" its CPU time per call {_ms(peer.cpu_per_call)}\n"
    )
    out.write(
        f"stdio cold start to the first answer (server/discover), {runs} runs:"
        f" median {_ms(statistics.median(cold.times))}, p90 {_ms(_p90(cold.times))}"
        f" (min {_ms(min(cold.times))}, max {_ms(max(cold.times))}); CPU time to the answer"
        f" median {_ms(statistics.median(cold.cpu))} (main thread),"
        f" {_ms(statistics.median(cold.process_cpu))} (all threads, 10 ms ticks)\n"
    )
    out.write(
        f"stdio cold start to the answer of the first web_search (after discover), {runs} runs:"
        f" median {_ms(statistics.median(cold.first_calls))},"
        f" p90 {_ms(_p90(cold.first_calls))}\n"
    )
    out.write(
        f"the peer's cold start, in turns: to the discover answer median"
        f" {_ms(statistics.median(peer_cold.times))}, CPU"
        f" {_ms(statistics.median(peer_cold.process_cpu))} (all threads); to the first"
        f" web_search answer median {_ms(statistics.median(peer_cold.first_calls))}\n"
    )
    share = statistics.median(rypsok.shares)
    start = statistics.median(cold.times)
    for line in _guard(
        share / statistics.median(floor.shares),
        share / statistics.median(peer.shares),
        start / statistics.median(peer_cold.times),
    ):
        out.write(line + "\n")
    return 0


# The guard: each ratio of medians taken in the same run, and the bound no change may pass.
_GUARD = (
    ("own share against the floor's", 3.6),
    ("own share against the peer's", 0.8),
    ("cold start against the peer's", 0.4),
)


def _guard(*ratios: float) -> list[str]:
    """One line per guarded ratio: the ratio measured, its bound, and whether it holds."""
    return [
        f"guard: {name} {ratio:.3f} times (at most {bound}): "
        + ("holds" if ratio <= bound else "exceeded")
        for (name, bound), ratio in zip(_GUARD, ratios, strict=True)
    ]


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/bench-stdio")
    parser.add_argument("--calls", type=int, default=200, help="web_search calls (own share)")
    parser.add_argument("--runs", type=int, default=15, help="process starts (cold start)")
    parser.add_argument(
        "--pythonpath",
        metavar="DIR",
        help="import rypsok from DIR (another checkout) instead of this one",
    )
    args = parser.parse_args(argv)
    if args.pythonpath:
        _PYTHONPATH.append(str(Path(args.pythonpath).resolve()))
    return trio.run(main, args.calls, args.runs)


if __name__ == "__main__":
    sys.exit(run())
