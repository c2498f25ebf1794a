"""The HTTP figures: engine_status over HTTP/1.1 keep-alive, against rypsok, a minimal server of
the official MCP Python SDK and a bare hypercorn Trio app, in one run; then the memory of idle
connections and the floods: at the connection cap (idle, trickling and slow-body connections,
renewed as they close: the time to a legitimate caller's first answer), HTTP/2 header blocks in
CONTINUATION frames (the memory during and after), and what a connection without a token can
make the process hold. Loopback only, every loop bounded.

    tools/bench-http [--duration 5] [--rounds 3] [--connections 16] [--skip-memory] [--skip-flood]
    tools/bench-http --only-floods [--flood 300]    (the flood and header-block figures alone)

Throughput and latency come from wrk (Debian package `wrk`) with a Lua script for the POST.
Each server runs in its own process (`python -m benchmarks.bench_http serve-… PORT`).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "engine_status", "arguments": {}, "_meta": META},
    },
    separators=(",", ":"),
)
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "engine_status",
}
# What the bare app answers: a result of the same size and shape as rypsok's.
FIXED = (
    b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[{"type":"text",'
    b'"text":"{\\"engines\\":[{\\"id\\":\\"wikipedia\\",\\"latency_ms\\":null,\\"state\\":'
    b'\\"closed\\"}],\\"notices\\":[],\\"outcome\\":\\"ok\\"}"}],"structuredContent":'
    b'{"outcome":"ok","notices":[],"engines":[{"id":"wikipedia","state":"closed",'
    b'"latency_ms":null}]},"isError":false}}\n'
)
CONFIG = """config_version = 1
[service.http]
bind = "127.0.0.1:{port}"
max_connections = {max_connections}
idle_timeout_s = {idle}
[engines.wikipedia]
type = "wikipedia"
categories = ["general", "science"]
"""


WRK_MISSING = (
    "tools/bench-http: wrk is not on PATH; it measures the throughput.\n"
    "Install it: apt-get install -y wrk (Debian, Ubuntu), or your system's wrk package.\n"
    "tools/bench-http --only-floods runs without it.\n"
)


def _raise_fd_limit(wanted: int = 4096) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(wanted, hard) if hard != resource.RLIM_INFINITY else wanted
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


# -- the three servers ------------------------------------------------------------------------


# Two callers for the floods: the flood's token, and the legitimate caller's.
AUTH = """[[service.http.auth.callers]]
id = "flood"
token_env = "BENCH_TOKEN_FLOOD"
[[service.http.auth.callers]]
id = "caller"
token_env = "BENCH_TOKEN_CALLER"
"""
FLOOD_TOKEN = "flood-token-0123456789abcdef0123456789abc"
CALLER_TOKEN = "caller-token-0123456789abcdef0123456789ab"
AUTH_ENV = {"BENCH_TOKEN_FLOOD": FLOOD_TOKEN, "BENCH_TOKEN_CALLER": CALLER_TOKEN}


def serve_rypsok(port: int, max_connections: int, idle: int, auth: bool = False) -> int:
    # As the console script serves: the collector on, and what start-up made frozen once the
    # core is built (rypsok.mcp.process.startup_done, for a process that claims itself).
    import attrs

    from rypsok.config.load import load_config_text
    from rypsok.core import telemetry
    from rypsok.core.services import Rypsok
    from rypsok.mcp.listener import run_http
    from rypsok.shared import own_process
    from testkit.instant import InstantEngine

    # Serving tunes this process as it tunes the console script's.
    own_process.claim()
    env = AUTH_ENV if auth else {}
    text = CONFIG.format(port=port, max_connections=max_connections, idle=idle)
    config = load_config_text(text + (AUTH if auth else ""), env)
    # Bench only: engine_status's rate limit (LIM-C8, at most 6000 a minute) would turn most of
    # a run into refusals; the run measures served calls.
    limits = attrs.evolve(config.limits, engine_status_per_minute=10**9)
    config = attrs.evolve(config, limits=limits)
    telemetry.configure(config.logging.level)
    return run_http(
        config,
        env,
        service=lambda: Rypsok(config, env=env, engines=[InstantEngine("wikipedia")]),
    )


async def _fixed_answer(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The bare app: the body read, then the fixed answer."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(FIXED))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": FIXED})


def serve_bare_listener(port: int) -> int:
    """The bare app behind rypsok's own listener (its accept loop, bounds and watchdog): what
    rypsok's app costs on top is the difference to rypsok."""
    from typing import cast

    from rypsok.config.load import load_config_text
    from rypsok.mcp.listener import Listener, listening_socket

    config = load_config_text(CONFIG.format(port=port, max_connections=64, idle=60), {})
    listener = Listener(cast("Any", _fixed_answer), config)

    async def run() -> None:
        sock = trio.socket.from_stdlib_socket(listening_socket(config.service.http.bind))
        async with trio.open_nursery() as nursery:
            await listener.accept_loop(sock, nursery)

    trio.run(run)
    return 0


def serve_bare(port: int) -> int:
    from typing import cast

    from hypercorn.trio import serve

    from rypsok.config.load import load_config_text
    from rypsok.mcp.listener.stream import hypercorn_config

    # The same hypercorn settings as rypsok's listener (no Date or Server header, the same
    # keep-alive and header bounds): the difference measured is the listener's and the app's.
    config = hypercorn_config(
        load_config_text(CONFIG.format(port=port, max_connections=64, idle=60), {})
    )
    config.bind = [f"127.0.0.1:{port}"]
    trio.run(cast("Any", serve), _fixed_answer, config)
    return 0


def serve_sdk(port: int) -> int:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench", log_level="WARNING")

    @server.tool()
    def engine_status() -> dict[str, Any]:
        """The engines' state (a fixed answer)."""
        return {
            "outcome": "ok",
            "notices": [],
            "engines": [{"id": "wikipedia", "state": "closed", "latency_ms": None}],
        }

    server.run(
        "streamable-http", host="127.0.0.1", port=port, json_response=True, stateless_http=True
    )
    return 0


# -- measuring --------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Server:
    def __init__(self, kind: str, *extra: str) -> None:
        self.kind = kind
        self.port = _free_port()
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 # closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_http", f"serve-{kind}", str(self.port),
             *extra],
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            self.stop()
            raise RuntimeError(f"the {kind} server did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def rss_kib(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def _check_answer(server: _Server) -> str:
    import httpx

    response = httpx.post(server.url, content=BODY, headers=HEADERS, timeout=10, trust_env=False)
    result = response.json().get("result", {})
    if response.status_code != 200 or result.get("isError") is not False:
        return f"unexpected answer {response.status_code}: {response.text[:200]}"
    return ""


def _lua(path: Path) -> None:
    lines = ['wrk.method = "POST"', f"wrk.body = {json.dumps(BODY)}"]
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in HEADERS.items()]
    path.write_text("\n".join(lines) + "\n")


def _wrk(url: str, script: Path, connections: int, duration: int) -> dict[str, float]:
    wrk = shutil.which("wrk")
    assert wrk is not None
    done = subprocess.run(
        [wrk, "-t1", f"-c{connections}", f"-d{duration}s", "--latency", "-s", str(script), url],
        capture_output=True, text=True, timeout=duration + 60, check=True,
    )  # fmt: skip
    out = done.stdout

    def ms(label: str) -> float:
        match = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.MULTILINE)
        if match is None:
            return float("nan")
        value, unit = float(match.group(1)), match.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    total = re.search(r"^\s+(\d+) requests in ", out, re.MULTILINE)
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    return {
        "calls_per_s": float(rate.group(1)) if rate else float("nan"),
        "calls": float(total.group(1)) if total else float("nan"),
        "p50_ms": ms("50"),
        "p99_ms": ms("99"),
        "non_2xx": float(bad.group(1)) if bad else 0.0,
        "socket_errors": 1.0 if errors else 0.0,
    }


def throughput(duration: int, connections: int, rounds: int) -> dict[str, dict[str, float]]:
    """The three servers run side by side; the runs alternate between them, round after
    round, so that a change in the machine's load touches all three alike. The best round
    of each is kept."""
    figures: dict[str, dict[str, float]] = {}
    servers: list[_Server] = []
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "post.lua"
        _lua(script)
        try:
            kinds = (("rypsok", ("64", "60")), ("sdk", ()), ("bare", ()), ("listener", ()))
            for kind, extra in kinds:
                server = _Server(kind, *extra)
                servers.append(server)
                problem = _check_answer(server)
                if problem:
                    raise RuntimeError(f"{kind}: {problem}")
                _wrk(server.url, script, connections, 2)  # warm-up
            for _ in range(rounds):
                for server in servers:
                    row = _wrk(server.url, script, connections, duration)
                    best = figures.get(server.kind)
                    if best is None or row["calls_per_s"] > best["calls_per_s"]:
                        figures[server.kind] = row
        finally:
            for server in servers:
                server.stop()
    return figures


def _request_bytes() -> bytes:
    head = [b"POST /mcp HTTP/1.1", b"Host: 127.0.0.1"]
    head += [f"{k}: {v}".encode() for k, v in HEADERS.items()]
    head.append(b"Content-Length: %d" % len(BODY))
    return b"\r\n".join(head) + b"\r\n\r\n" + BODY.encode()


async def _open_answered(port: int, count: int) -> list[trio.SocketStream]:
    streams = []
    for _ in range(count):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(_request_bytes())
        data = b""
        with trio.fail_after(10):
            while not data.endswith(b"}\n"):
                data += await stream.receive_some(65536)
        streams.append(stream)
    return streams


def idle_memory(count: int) -> dict[str, float]:
    """RSS of rypsok before and after `count` keep-alive connections that each made one call."""
    server = _Server("rypsok", "1024", "600")
    try:
        before = server.rss_kib()

        async def hold() -> int:
            streams = await _open_answered(server.port, count)
            await trio.sleep(1)
            rss = server.rss_kib()
            for stream in streams:
                await stream.aclose()
            return rss

        after = trio.run(hold)
    finally:
        server.stop()
    return {"rss_before_mib": before / 1024, "rss_after_mib": after / 1024,
            "kib_per_connection": (after - before) / count}  # fmt: skip


def flood(count: int, limit_s: float) -> dict[str, float]:
    """`count` connections trickling a header byte a second against the default limits, and a
    caller trying one call every 0.5 s until answered."""
    server = _Server("rypsok", "64", "60")
    closed_after: list[float] = []
    answered_after: list[float] = []

    async def trickler(start: float) -> None:
        try:
            stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        except OSError:
            closed_after.append(trio.current_time() - start)
            return
        try:
            await stream.send_all(b"POST /mcp HTTP/1.1\r\n")
            while True:
                with trio.move_on_after(1):
                    if await stream.receive_some(65536) == b"":
                        break
                await stream.send_all(b"X")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        closed_after.append(trio.current_time() - start)
        await stream.aclose()

    async def caller(start: float) -> None:
        while True:
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", server.port)
                await stream.send_all(_request_bytes())
                with trio.move_on_after(2):
                    data = await stream.receive_some(65536)
                    if data.startswith(b"HTTP/1.1 200"):
                        answered_after.append(trio.current_time() - start)
                        await stream.aclose()
                        return
                await stream.aclose()
            except (OSError, trio.BrokenResourceError):
                pass
            await trio.sleep(0.5)

    async def run() -> None:
        start = trio.current_time()
        with trio.move_on_after(limit_s):
            async with trio.open_nursery() as nursery:
                for _ in range(count):
                    nursery.start_soon(trickler, start)
                await trio.sleep(1)  # the flood is in place before the caller tries
                nursery.start_soon(caller, start)

    try:
        trio.run(run)
        alive = server.process.poll() is None
    finally:
        server.stop()
    return {
        "process_alive": float(alive),
        "closed": float(len(closed_after)),
        "last_closed_s": max(closed_after, default=float("nan")),
        "legit_answered_after_s": answered_after[0] if answered_after else float("nan"),
    }


# -- floods at the cap: the first legitimate answer --------------------------------------------

FLOOD_KINDS = ("idle", "trickling", "slow-body")


def _request_head(token: str | None, length: int) -> bytes:
    head = [b"POST /mcp HTTP/1.1", b"Host: 127.0.0.1"]
    head += [f"{k}: {v}".encode() for k, v in HEADERS.items()]
    if token is not None:
        head.append(f"Authorization: Bearer {token}".encode())
    head.append(b"Content-Length: %d" % length)
    return b"\r\n".join(head) + b"\r\n\r\n"


async def _flooder(port: int, kind: str, opened: list[int]) -> None:
    """One connection of the flood, opened again each time the server closes it."""
    while True:
        try:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
        except OSError:
            await trio.sleep(0.1)
            continue
        opened[0] += 1
        try:
            if kind == "trickling":
                await stream.send_all(b"POST /mcp HTTP/1.1\r\n")
            elif kind == "slow-body":
                await stream.send_all(_request_head(FLOOD_TOKEN, len(BODY)))
            while True:
                with trio.move_on_after(1):
                    if await stream.receive_some(65536) == b"":
                        break
                if kind == "trickling":
                    await stream.send_all(b"X")
                elif kind == "slow-body":
                    await stream.send_all(b" ")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await stream.aclose()


async def _first_answer(port: int, limit_s: float) -> tuple[float, list[str]]:
    """Seconds from the first try to the first 200, and how each try ended: a try waits
    up to 10 s for its answer (queued behind the flood's connections in the listen backlog,
    it is still answered), and is made again at once when its connection is closed."""
    start = trio.current_time()
    tries: list[str] = []
    request = _request_head(CALLER_TOKEN, len(BODY)) + BODY.encode()
    while trio.current_time() - start < limit_s:
        began = trio.current_time()
        try:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            connected = trio.current_time() - began
            await stream.send_all(request)
            data = b""
            with trio.move_on_after(10):
                data = await stream.receive_some(65536)
                if data.startswith(b"HTTP/1.1 200"):
                    await stream.aclose()
                    tries.append(f"answered (connect {connected:.2f} s)")
                    return trio.current_time() - start, tries
            await stream.aclose()
            ended = data.partition(b"\r\n")[0].decode("latin-1") or "closed unanswered"
            tries.append(f"{ended} after {trio.current_time() - began:.2f} s")
        except (OSError, trio.BrokenResourceError) as exc:
            tries.append(f"{type(exc).__name__} after {trio.current_time() - began:.2f} s")
        await trio.sleep(0.1)
    return float("nan"), tries


async def _callers(port: int, limit_s: float, count: int) -> list[dict[str, Any]]:
    """`count` callers in turn, each `_first_answer` on connections of its own."""
    figures = []
    for _ in range(count):
        seconds, tries = await _first_answer(port, limit_s)
        figures.append({"first_answer_s": seconds, "tries": tries})
        await trio.sleep(0.1)
    return figures


def cap_flood(kind: str, count: int, limit_s: float, callers: int = 20) -> dict[str, Any]:
    """`count` connections of one kind, renewed as they close, against the default limits
    (64 connections, 60 s idle, 10 s per head, 30 s per request) with two callers: the flood
    holds one token; the time to the other caller's first answer."""
    server = _Server("rypsok", "64", "60", "auth")
    opened = [0]
    answer: list[tuple[float, list[str]]] = []

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(count):
                nursery.start_soon(_flooder, server.port, kind, opened)
            await trio.sleep(3)  # the flood in place, every slot taken
            # The caller is a process of its own, as a real one is: in this one it would
            # wait behind the flood's own tasks between its connect and its request.
            # Then more callers in turn, each a fresh one: how many were answered on their
            # first connection (a caller that never retries sees a reset).
            done = await trio.run_process(
                [sys.executable, "-m", "benchmarks.bench_http", "legit", str(server.port),
                 str(limit_s), str(callers)],
                cwd=ROOT, capture_stdout=True,
            )  # fmt: skip
            for figures in json.loads(done.stdout):
                answer.append((figures["first_answer_s"], figures["tries"]))
            nursery.cancel_scope.cancel()

    try:
        trio.run(run)
        alive = server.process.poll() is None
    finally:
        server.stop()
    seconds, tries = answer[0]
    # A caller's tries end with its answer: one try, answered on its first connection.
    first_try = sum(1 for s, each in answer if len(each) == 1 and not math.isnan(s))
    return {"first_answer_s": seconds, "tries": float(len(tries)), "opened": float(opened[0]),
            "process_alive": float(alive), "ends": tries, "callers": float(len(answer)),
            "first_try_answered": float(first_try),
            "most_tries": float(max(len(each) for _, each in answer)),
            "slowest_ends": max(answer, key=lambda figures: figures[0])[1],
            "median_s": statistics.median(s for s, _ in answer),
            "slowest_s": max(s for s, _ in answer)}  # fmt: skip


# -- memory a tokenless peer can make the process hold ------------------------------------------


def _h2_opening() -> bytes:
    import h2.config
    import h2.connection

    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    return bytes(conn.data_to_send())


def _frame(kind: str, data: bytes, end: bool) -> bytes:
    import hyperframe.frame

    frame = (
        hyperframe.frame.HeadersFrame(1)
        if kind == "headers"
        else hyperframe.frame.ContinuationFrame(1)
    )
    frame.data = data
    if end:
        frame.flags.add("END_HEADERS")
    return bytes(frame.serialize())


async def _continuation_flooder(port: int) -> None:
    """HEADERS without END_HEADERS, then 63 CONTINUATION frames of 16 KiB."""
    try:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
    except OSError:
        return
    try:
        await stream.send_all(_h2_opening() + _frame("headers", b"\x82" * 16384, False))
        for _ in range(63):
            await stream.send_all(_frame("continuation", b"\x82" * 16384, False))
        with trio.move_on_after(5):
            while await stream.receive_some(65536):
                pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await stream.aclose()


def continuation_memory(count: int, max_connections: int, rounds: int = 2) -> dict[str, float]:
    """RSS before, at the peak of and 2 s after each of `rounds` floods, one after the other
    on the same process, of `count` connections each sending a header block of 64 frames of
    16 KiB: what a flood leaves is reused by the next, not added to."""
    server = _Server("rypsok", str(max_connections), "60")
    peak = [0]

    async def sample(stop: trio.Event) -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], server.rss_kib())
            await trio.sleep(0.02)

    async def run() -> None:
        stop = trio.Event()
        async with trio.open_nursery() as outer:
            outer.start_soon(sample, stop)
            async with trio.open_nursery() as nursery:
                for _ in range(count):
                    nursery.start_soon(_continuation_flooder, server.port)
            await trio.sleep(0.5)
            stop.set()

    figures: dict[str, float] = {}
    try:
        figures["before_mib"] = server.rss_kib() / 1024
        for round_ in range(1, rounds + 1):
            peak[0] = 0
            trio.run(run)
            time.sleep(2)
            figures[f"peak{round_}_mib"] = peak[0] / 1024
            figures[f"after{round_}_mib"] = server.rss_kib() / 1024
        figures["process_alive"] = float(server.process.poll() is None)
    finally:
        server.stop()
    return figures


def held_memory(kind: str, count: int) -> dict[str, float]:
    """RSS per connection while `count` tokenless connections each hold the most the
    listener keeps of an unfinished request: a header block just under LIM-H7, sent over
    HTTP/2 (HEADERS without END_HEADERS) or as an HTTP/1 head without its end."""
    server = _Server("rypsok", str(count + 16), "600")

    async def run() -> int:
        streams = []
        for _ in range(count):
            stream = await trio.open_tcp_stream("127.0.0.1", server.port)
            if kind == "h2":
                await stream.send_all(_h2_opening() + _frame("headers", b"\x82" * 16000, False))
            else:
                head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 16000
                await stream.send_all(head)
            streams.append(stream)
        await trio.sleep(2)
        rss = server.rss_kib()
        for stream in streams:
            await stream.aclose()
        return rss

    try:
        before = server.rss_kib()
        held = trio.run(run)
    finally:
        server.stop()
    return {"before_mib": before / 1024, "held_mib": held / 1024,
            "kib_per_connection": (held - before) / count}  # fmt: skip


def floods(count: int, *, memory: bool = True, kinds: tuple[str, ...] = FLOOD_KINDS) -> None:
    for kind in kinds:
        out = cap_flood(kind, count, 30)
        _say(f"cap flood: {count} {kind} connections (renewed as closed, {out['opened']:.0f} "
             f"opened), 64 slots: first legitimate answer after {out['first_answer_s']:.2f} s "
             f"({out['tries']:.0f} tries), process alive {bool(out['process_alive'])}; "
             f"{out['callers']:.0f} callers in turn: {out['first_try_answered']:.0f} answered "
             f"on their first connection, most tries {out['most_tries']:.0f}, answered after "
             f"{out['median_s']:.2f} s (median), {out['slowest_s']:.2f} s at most")  # fmt: skip
        if out["tries"] > 1:
            _say("  the tries: " + "; ".join(out["ends"]))
        _say("  the slowest caller's tries: " + "; ".join(out["slowest_ends"]))
    if not memory:
        return
    for connections, cap in ((64, 64), (256, 256)):
        mem = continuation_memory(connections, cap, rounds=5)
        after = ", ".join(f"{mem[f'after{r}_mib']:.1f}" for r in range(1, 6))
        peak = max(mem[f"peak{r}_mib"] for r in range(1, 6))
        per_connection = (peak - mem["before_mib"]) * 1024 / connections
        _say(f"continuation flood: {connections} h2 connections x 64 frames of 16 KiB "
             f"(max_connections {cap}), five floods in turn: RSS {mem['before_mib']:.1f} "
             f"MiB before, 2 s after each: {after} MiB; highest during them {peak:.1f} MiB "
             f"({per_connection:.0f} KiB a connection); alive "
             f"{bool(mem['process_alive'])}")  # fmt: skip
    for kind in ("h2", "http1"):
        held = held_memory(kind, 1000)
        _say(f"held: 1000 {kind} connections each with a 16000-byte header block unfinished: "
             f"RSS {held['before_mib']:.1f} -> {held['held_mib']:.1f} MiB "
             f"({held['kib_per_connection']:.1f} KiB each)")  # fmt: skip


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["legit"]:
        _say(json.dumps(trio.run(_callers, int(args_in[1]), float(args_in[2]), int(args_in[3]))))
        return 0
    if args_in and args_in[0].startswith("serve-"):
        _raise_fd_limit()
        kind, port = args_in[0], int(args_in[1])
        if kind == "serve-rypsok":
            auth = args_in[4:5] == ["auth"]
            return serve_rypsok(port, int(args_in[2]), int(args_in[3]), auth)
        if kind == "serve-listener":
            return serve_bare_listener(port)
        return serve_bare(port) if kind == "serve-bare" else serve_sdk(port)
    parser = argparse.ArgumentParser(prog="tools/bench-http")
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--flood", type=int, default=1000)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--skip-flood", action="store_true")
    parser.add_argument("--only-floods", action="store_true")
    parser.add_argument("--skip-flood-memory", action="store_true")
    parser.add_argument("--flood-kinds", help="of idle,trickling,slow-body (all by default)")
    args = parser.parse_args(args_in)
    _raise_fd_limit()
    if args.only_floods:
        kinds = tuple(args.flood_kinds.split(",")) if args.flood_kinds else FLOOD_KINDS
        floods(args.flood, memory=not args.skip_flood_memory, kinds=kinds)
        return 0
    if shutil.which("wrk") is None:
        sys.stderr.write(WRK_MISSING)
        return 1
    figures = throughput(args.duration, args.connections, args.rounds)
    for kind, row in figures.items():
        _say(f"{kind:8} {row['calls_per_s']:9.0f} calls/s  p50 {row['p50_ms']:6.2f} ms  "
              f"p99 {row['p99_ms']:6.2f} ms  non-2xx {row['non_2xx']:.0f}")  # fmt: skip
    r, s, b = figures["rypsok"], figures["sdk"], figures["bare"]
    _say(f"rypsok / bare: {r['calls_per_s'] / b['calls_per_s']:.0%} (target >= 85%)")
    _say(f"rypsok / sdk:  {r['calls_per_s'] / s['calls_per_s']:.2f}x (target >= 1.5x)")
    _say(f"p99 rypsok / sdk: {r['p99_ms'] / s['p99_ms']:.2f} (target < 0.25)")
    bl = figures["listener"]
    _say(f"rypsok / bare behind rypsok's listener: {r['calls_per_s'] / bl['calls_per_s']:.0%} "
         "(no target: the app's own share)")  # fmt: skip
    if not args.skip_memory:
        mem = idle_memory(args.idle)
        _say(
            f"idle: {args.idle} keep-alive connections: RSS {mem['rss_before_mib']:.1f} -> "
            f"{mem['rss_after_mib']:.1f} MiB ({mem['kib_per_connection']:.1f} KiB each)"
        )
    if not args.skip_flood:
        floods(300)
        out = flood(args.flood, 100)
        _say(f"flood: {args.flood} tricklers, default limits: process alive "
              f"{bool(out['process_alive'])}, closed {out['closed']:.0f}, last closed after "
              f"{out['last_closed_s']:.1f} s, a caller answered after "
              f"{out['legit_answered_after_s']:.1f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
