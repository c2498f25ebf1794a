"""Running rypsok as a child process over stdio, with its engines routed to a local fixture."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent

TUTORIAL = """\
[engines.wikipedia]
type = "wikipedia"
categories = ["general", "science"]
"""


def write_config(tmp_path: Path, extra: str = "") -> Path:
    # `extra` holds whole tables; the engine table stays last so that it closes nothing.
    path = tmp_path / "rypsok.toml"
    path.write_text("config_version = 1\n" + extra + "\n" + TUTORIAL, encoding="utf-8")
    return path


def launch_argv(config: Path, port: int) -> list[str]:
    return [
        sys.executable, "-m", "conformance.launch",
        "--config", str(config), "--route", f"en.wikipedia.org={port}",
    ]  # fmt: skip


class Child:
    """A rypsok child process: write lines to it, read its stdout lines, keep its stderr."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.stdout_buffer = b""
        self.stdout_lines: list[bytes] = []
        self.stderr = b""
        self._stderr_grew = trio.Event()

    @classmethod
    async def start(
        cls, nursery: trio.Nursery, argv: list[str], env: dict[str, str] | None = None
    ) -> Child:
        process = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=env,
        )
        child = cls(process)
        nursery.start_soon(child._drain_stderr)
        return child

    async def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        while data := await self.process.stderr.receive_some(65536):
            self.stderr += data
            self._stderr_grew.set()
            self._stderr_grew = trio.Event()

    async def send(self, *messages: dict[str, Any] | bytes) -> None:
        assert self.process.stdin is not None
        for m in messages:
            data = m if isinstance(m, bytes) else json.dumps(m).encode() + b"\n"
            await self.process.stdin.send_all(data)

    async def close_stdin(self) -> float:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()
        return time.monotonic()

    async def line(self, timeout_s: float = 10) -> dict[str, Any]:
        assert self.process.stdout is not None
        with trio.fail_after(timeout_s):
            while b"\n" not in self.stdout_buffer:
                data = await self.process.stdout.receive_some(65536)
                if not data:
                    raise EOFError("stdout closed")
                self.stdout_buffer += data
        raw, self.stdout_buffer = self.stdout_buffer.split(b"\n", 1)
        self.stdout_lines.append(raw)
        answer: dict[str, Any] = json.loads(raw)
        return answer

    async def rest_of_stdout(self, timeout_s: float = 10) -> bytes:
        assert self.process.stdout is not None
        with trio.fail_after(timeout_s):
            while data := await self.process.stdout.receive_some(65536):
                self.stdout_buffer += data
        return self.stdout_buffer

    async def wait(self, timeout_s: float = 10) -> int:
        with trio.fail_after(timeout_s):
            return await self.process.wait()

    async def wait_for_log(self, event: str, timeout_s: float = 10) -> None:
        needle = f'"event":"{event}"'.encode()
        with trio.fail_after(timeout_s):
            while needle not in self.stderr.replace(b": ", b":"):
                await self._stderr_grew.wait()

    def log_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stderr.splitlines() if line.strip()]
