"""The systemd notifications with the watchdog's variables as the environment gives them
(REQ-OPS-002), through the real console script.

`WATCHDOG_USEC` and `WATCHDOG_PID` are a service manager's decimal numbers; a value that is
not one (a digit of another script, a number no manager writes) asks for no watchdog. It
never stops the process: it still tells `READY=1`, serves and stops with 0 at SIGTERM.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio
from redis_server import free_port
from stdio_process import ROOT

from rypsok.mcp.sd_notify import Notifier

ENGINES = '[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general"]\n'


def _console_script() -> str:
    found = shutil.which("rypsok", path=str(Path(sys.executable).parent))
    assert found is not None
    return found


async def _datagram(sock: trio.socket.SocketType) -> bytes:
    with trio.fail_after(20):
        return await sock.recv(4096)


@pytest.mark.parametrize(
    "watchdog",
    [
        {"WATCHDOG_USEC": "\u00b2"},  # a superscript two: str.isdigit, not a decimal number
        {"WATCHDOG_USEC": "9" * 400},  # past a float, and past any manager's uint64
    ],
    ids=["superscript", "huge"],
)
async def test_req_ops_002_a_watchdog_variable_that_is_no_number_never_stops_serving(
    tmp_path: Path, watchdog: dict[str, str]
) -> None:
    port = free_port()
    config = tmp_path / "rypsok.toml"
    config.write_text(
        f'config_version = 1\n[service.http]\nbind = "127.0.0.1:{port}"\n' + ENGINES,
        encoding="utf-8",
    )
    notify_path = str(tmp_path / "notify")
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    await sock.bind(notify_path)
    env = {k: v for k, v in os.environ.items() if k != "RYPSOK_CONFIG"}
    env.update({"NOTIFY_SOCKET": notify_path, **watchdog})
    process = await trio.lowlevel.open_process(
        [_console_script(), "serve", "--transport", "http", "--config", str(config)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        cwd=ROOT, env=env,
    )  # fmt: skip
    try:
        while await _datagram(sock) != b"READY=1":
            pass
        async with httpx.AsyncClient() as client:
            alive = await client.get(f"http://127.0.0.1:{port}/healthz")
        assert alive.status_code == 200
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(20):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
        sock.close()
    assert process.stderr is not None
    logged = await process.stderr.receive_some(1 << 20)
    assert b"uncaught_exception" not in logged


async def _watchdogs(tmp_path: Path, env: dict[str, str]) -> int:
    """How many WATCHDOG=1 a notifier with `env` sends in 25 s (of the mock clock)."""
    path = str(tmp_path / "watchdog")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.setblocking(False)
        notifier = Notifier({"NOTIFY_SOCKET": path, **env})
        with trio.move_on_after(25):
            await notifier.run_watchdog()
        count = 0
        while True:
            try:
                assert sock.recv(64) == b"WATCHDOG=1"
            except BlockingIOError:
                break
            count += 1
        os.unlink(path)
    return count


async def test_req_ops_002_only_a_managers_decimal_numbers_ask_for_a_watchdog(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    here = str(os.getpid())
    # Every 10 s, a third of 30 s: at 0, 10 and 20.
    assert await _watchdogs(tmp_path, {"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": here}) == 3
    for usec in ("\u00b2", "9" * 400, "-3", "+30", " 30", "0", ""):
        assert await _watchdogs(tmp_path, {"WATCHDOG_USEC": usec}) == 0, usec
    for pid in ("\u0663", "1", "x"):
        assert await _watchdogs(tmp_path, {"WATCHDOG_USEC": "300", "WATCHDOG_PID": pid}) == 0, pid
