"""A host that never reads standard error costs log lines, counted, never a call.

The real console script serves over stdio with its standard error on a pipe; the engine is a
loopback port that refuses connections, and only `engine_status` is called, so nothing leaves
the machine. The writer thread and its bounded buffer are also tested alone, on a pipe.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import httpx
import trio
from http_helpers import CALLERS, CALLERS_ENV, TOKEN_A, call_body, modern_headers
from mcp_helpers import modern
from stdio_process import ROOT

from rypsok.core import telemetry
from rypsok.core.telemetry._writer import BackgroundWriter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

CALLS = 2000
# The console script itself, as a host starts it.
RYPSOK = os.path.join(os.path.dirname(sys.executable), "rypsok")


@contextlib.contextmanager
def _engine_port() -> Iterator[int]:
    """A loopback port bound but never listening: the engine's connections are refused."""
    with socket.socket() as refusing:
        refusing.bind(("127.0.0.1", 0))
        yield refusing.getsockname()[1]


def _config(tmp_path: Path, engine_port: int, http_port: int | None = None) -> Path:
    path = tmp_path / "rypsok.toml"
    http = f'[service.http]\nbind = "127.0.0.1:{http_port}"\n{CALLERS}' if http_port else ""
    path.write_text(
        # Every call served, each with its own `call` line: refused ones would be written
        # in aggregate, and the flood of lines is what these tests need.
        f'config_version = 1\n{http}[logging]\nlevel = "debug"\n'
        "[limits]\nengine_status_per_minute = 6000\n"
        f'[engines.wiki]\ntype = "wikipedia"\ncategories = ["general"]\n'
        f'base_url = "http://127.0.0.1:{engine_port}/w"\n',
        encoding="utf-8",
    )
    return path


@contextlib.asynccontextmanager
async def _rypsok(argv: list[str], **pipes: int) -> AsyncIterator[trio.Process]:
    """The console script with standard error on a pipe; killed if the test failed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RYPSOK_", "BRAVE_"))}
    process = await trio.lowlevel.open_process(
        [RYPSOK, "serve", *argv],
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**env, **CALLERS_ENV},
        **pipes,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def _drain(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
    while data := await stream.receive_some(65536):
        into.extend(data)


async def _serve_calls(tmp_path: Path, *, read_stderr: bool) -> tuple[list[Any], bytes]:
    """Send CALLS engine_status calls over stdio; the answers, and standard error once it is
    read (at the end, after every answer, when `read_stderr` is False)."""
    answers: list[Any] = []
    stderr = bytearray()
    pending = bytearray()
    call_lines = [
        json.dumps(modern("tools/call", request_id=n, name="engine_status", arguments={})).encode()
        + b"\n"
        for n in range(1, CALLS + 1)
    ]
    lines = b"".join(call_lines)
    with _engine_port() as engine_port:
        config = _config(tmp_path, engine_port)
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE}
        async with _rypsok(["--config", str(config)], **pipes) as process:
            assert process.stdin is not None
            assert process.stdout is not None
            assert process.stderr is not None
            out = process.stdout

            async def read_answers() -> None:
                buffer = b""
                while len(answers) < CALLS:
                    data = await out.receive_some(65536)
                    assert data, "stdout closed before every call was answered"
                    buffer += data
                    *whole, buffer = buffer.split(b"\n")
                    answers.extend(json.loads(line) for line in whole)

            async with trio.open_nursery() as nursery:
                if read_stderr:
                    nursery.start_soon(_drain, process.stderr, stderr)
                # A log writer that blocks on a full stderr pipe stops the answers after about
                # 112 calls: the bound makes that a failure, not a hang.
                with trio.fail_after(60):
                    if read_stderr:
                        # A host that reads as it goes: the calls in steps, each answered
                        # before the next, so the reader keeps pace on a loaded machine
                        # (the writer's buffer is bounded by design; what it keeps for a
                        # reader that lags by more is counted, not held up).
                        step = 100
                        for start in range(0, CALLS, step):
                            await process.stdin.send_all(b"".join(call_lines[start : start + step]))
                            while len(answers) < min(CALLS, start + step):
                                buffer = await out.receive_some(65536)
                                assert buffer, "stdout closed before every call was answered"
                                pending.extend(buffer)
                                *whole, rest = bytes(pending).split(b"\n")
                                pending[:] = rest
                                answers.extend(json.loads(line) for line in whole)
                    else:
                        async with trio.open_nursery() as calls:
                            calls.start_soon(read_answers)
                            await process.stdin.send_all(lines)
                if not read_stderr:
                    nursery.start_soon(_drain, process.stderr, stderr)  # drains from now on
                await process.stdin.aclose()
                with trio.fail_after(20):
                    assert await process.wait() == 0
    return answers, bytes(stderr)


def _log(stderr: bytes) -> list[dict[str, Any]]:
    # Every line whole and JSON, the notices included.
    assert stderr.endswith(b"\n")
    return [json.loads(line) for line in stderr.splitlines()]


def _loss_reported(log: list[dict[str, Any]]) -> None:
    notices = [line for line in log if line["event"] == "log_lines_dropped"]
    assert notices, "lines were lost without a line saying so"
    assert all(n["level"] == "warn" and n["count"] > 0 for n in notices)
    # `total` is the process's counter (the `counters` event's `log_lines_dropped`).
    assert notices[-1]["total"] == sum(n["count"] for n in notices) > 0


async def test_req_obs_005_a_host_that_never_reads_stderr_gets_every_answer(
    tmp_path: Path,
) -> None:
    answers, stderr = await _serve_calls(tmp_path, read_stderr=False)
    assert sorted(answer["id"] for answer in answers) == list(range(1, CALLS + 1))
    assert all("result" in answer for answer in answers)
    log = _log(stderr)
    _loss_reported(log)
    # What was written is what was not dropped: the end of the calls is missing, not a mix.
    calls = [line for line in log if line["event"] == "call"]
    assert 0 < len(calls) < CALLS


async def test_req_obs_005_a_host_that_reads_stderr_loses_no_line(tmp_path: Path) -> None:
    answers, stderr = await _serve_calls(tmp_path, read_stderr=True)
    assert len(answers) == CALLS
    log = _log(stderr)
    assert [line for line in log if line["event"] == "log_lines_dropped"] == []
    assert len([line for line in log if line["event"] == "call"]) == CALLS


async def test_req_obs_005_over_http_a_stalled_log_reader_holds_up_no_call(
    tmp_path: Path,
) -> None:
    # The journal under systemd can stall like an unread pipe: the same writer serves HTTP.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    stderr = bytearray()
    answered = 0
    with _engine_port() as engine_port:
        config = _config(tmp_path, engine_port, port)
        argv = ["--transport", "http", "--config", str(config)]
        pipes = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL}
        async with _rypsok(argv, **pipes) as process:
            assert process.stderr is not None
            # Read up to the listening line, then not a byte more until every call is answered.
            with trio.fail_after(20):
                while b'"listening"' not in stderr:
                    stderr.extend(await process.stderr.receive_some(1))
            url = f"http://127.0.0.1:{port}/mcp"
            headers = modern_headers("tools/call", "engine_status", TOKEN_A)
            body = json.dumps(call_body("engine_status"))
            with trio.fail_after(60):
                async with httpx.AsyncClient() as client:
                    for _ in range(CALLS):
                        response = await client.post(url, content=body, headers=headers)
                        assert response.status_code == 200
                        answered += 1
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_drain, process.stderr, stderr)
                process.send_signal(signal.SIGTERM)
                with trio.fail_after(20):
                    assert await process.wait() == 0
    assert answered == CALLS
    _loss_reported(_log(bytes(stderr)))
    assert TOKEN_A.encode() not in stderr


def test_req_obs_005_the_writer_drops_counts_and_reports_once_the_pipe_drains() -> None:
    read_fd, write_fd = os.pipe()
    # The pipe full before the first line, as a host's that stopped reading: the test's own
    # pipe, so its flag harms nobody.
    os.set_blocking(write_fd, False)
    filler = 0
    try:
        while True:
            filler += os.write(write_fd, b"\n" * 4096)
    except BlockingIOError:
        pass
    # A write of up to PIPE_BUF bytes is all or nothing: up to 4095 bytes may still be free.
    # Fill them a byte at a time, so that the writer's first line already waits for a reader
    # (otherwise it writes into the rest while lines are dropped, and reports twice).
    try:
        while True:
            filler += os.write(write_fd, b"\n")
    except BlockingIOError:
        pass
    os.set_blocking(write_fd, True)
    reader = os.fdopen(read_fd, "rb", buffering=0)
    stream = os.fdopen(write_fd, "w", encoding="ascii")
    dropped: list[int] = []
    writer = BackgroundWriter(
        lambda: stream,
        lambda count, total: json.dumps({"event": "lost", "count": count, "total": total}) + "\n",
        dropped.append,
        max_bytes=4096,
    )
    try:
        line = json.dumps({"event": "x", "pad": "p" * 90}) + "\n"  # 115 bytes
        start = time.monotonic()
        for _ in range(5000):  # ~575 KB: several times the pipe and the buffer
            writer.put(line)
        # No put waited for the pipe nobody reads.
        assert time.monotonic() - start < 2
        assert not writer.flush(0.05)
        assert dropped
        assert set(dropped) == {1}
        assert writer.total_lost == len(dropped)
        received = bytearray()

        def drain() -> None:
            while data := reader.read(65536):
                received.extend(data)

        draining = threading.Thread(target=drain, daemon=True)
        draining.start()
        assert writer.flush(5)
        stream.close()
        draining.join(5)
    finally:
        reader.close()
        if not stream.closed:
            stream.close()
    assert received[:filler] == b"\n" * filler
    lines = [json.loads(raw) for raw in bytes(received[filler:]).splitlines()]
    kept = [x for x in lines if x["event"] == "x"]
    notices = [x for x in lines if x["event"] == "lost"]
    # A notice follows the batch it was taken with: once if the writer was waiting on the
    # pipe before the first loss, twice if it took a batch between two runs of losses. Each
    # counts its own gap, and the last one the whole total.
    assert 1 <= len(notices) <= 2
    assert lines[-1] == notices[-1]  # after the last line kept, before nothing
    assert sum(notice["count"] for notice in notices) == len(dropped)
    assert notices[-1]["total"] == len(dropped)
    assert len(kept) + len(dropped) == 5000


def test_req_obs_007_dropped_log_lines_are_in_the_counters() -> None:
    counters = telemetry.Counters()
    counters.log_lines_dropped(3)
    counters.log_lines_dropped(1)
    assert counters.snapshot()["log_lines_dropped"] == 4
    counters.reset()
    assert counters.snapshot()["log_lines_dropped"] == 0
