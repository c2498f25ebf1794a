"""A real redis-server (Debian's package) for the coordination tests, on a free loopback port.

Persistence is off, so nothing is written to disk. The server can be stopped and started
again on the same port, which is how the tests take the store away in the middle of a run;
`LateRepliesProxy` puts a slow store in front of it.

Without redis-server on the machine the tests that need it skip, except where
RYPSOK_REQUIRE_REDIS=1 is set (`.ci/run` sets it): there a missing server fails the run.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import socket
import subprocess
import time
from typing import TYPE_CHECKING, Any

import pytest
import trio

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["LateRepliesProxy", "RedisServer", "free_port", "redis_server", "running_redis"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class RedisServer:
    def __init__(self, port: int, password: str | None = None) -> None:
        self.port = port
        self.password = password
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary is not None
        argv = [
            binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--protected-mode", "yes",
            "--loglevel", "warning",
        ]  # fmt: skip
        if self.password is not None:
            argv += ["--requirepass", self.password]
        self._process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._answers():
                return
            if self._process.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("redis-server did not start")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                reply = s.recv(64)
        except OSError:
            return False
        return reply.startswith((b"+PONG", b"-NOAUTH"))

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _available() -> bool:
    if shutil.which("redis-server") is not None:
        return True
    if os.environ.get("RYPSOK_REQUIRE_REDIS") == "1":
        pytest.fail("redis-server is required here (RYPSOK_REQUIRE_REDIS=1) and is not installed")
    return False


def redis_server(password: str | None = None) -> Iterator[RedisServer]:
    """The body of a fixture: a started server, stopped at the end."""
    if not _available():
        pytest.skip("needs Debian's redis-server (apt-get install redis-server)")
    server = RedisServer(free_port(), password)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class LateRepliesProxy:
    """A loopback TCP proxy in front of a redis-server: what the client sends passes at once,
    every reply arrives `delay` late, in order (a store under load, or far away)."""

    def __init__(self, target_port: int, delay: float) -> None:
        self._target = target_port
        self._delay = delay

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(self._carry, listeners)

    async def _carry(self, downstream: trio.SocketStream) -> None:
        async with downstream:
            upstream = await trio.open_tcp_stream("127.0.0.1", self._target)
            send, receive = trio.open_memory_channel[tuple[float, bytes]](math.inf)
            async with upstream, trio.open_nursery() as nursery:
                pair = nursery.cancel_scope
                nursery.start_soon(self._forward, downstream, upstream, pair)
                nursery.start_soon(self._hold, upstream, send, pair)
                nursery.start_soon(self._deliver, receive, downstream, pair)

    @staticmethod
    async def _forward(
        source: trio.SocketStream, sink: trio.SocketStream, pair: trio.CancelScope
    ) -> None:
        try:
            async for chunk in source:
                await sink.send_all(chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        pair.cancel()

    async def _hold(
        self,
        source: trio.SocketStream,
        send: trio.MemorySendChannel[tuple[float, bytes]],
        pair: trio.CancelScope,
    ) -> None:
        async with send:
            try:
                async for chunk in source:
                    send.send_nowait((trio.current_time() + self._delay, chunk))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pair.cancel()

    @staticmethod
    async def _deliver(
        receive: trio.MemoryReceiveChannel[tuple[float, bytes]],
        sink: trio.SocketStream,
        pair: trio.CancelScope,
    ) -> None:
        try:
            async for due, chunk in receive:
                await trio.sleep_until(due)
                await sink.send_all(chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        pair.cancel()


# The same, for a `with` inside a test or an async context manager of its own.
running_redis = contextlib.contextmanager(redis_server)
