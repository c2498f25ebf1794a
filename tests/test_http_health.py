"""GET /healthz and GET /readyz on the listener, and the systemd notifications.

/healthz: alive, no token, no detail. /readyz: the listener accepting, an engine able to
serve, the coordination store reachable when configured; the reasons when not. Under systemd:
READY=1 once the listener accepts, WATCHDOG=1 from the loop, STOPPING=1 at the stop, each a
datagram to the AF_UNIX socket the test binds.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import trio
from http_helpers import (
    CALLERS,
    CALLERS_ENV,
    closed_by_server,
    http_counts,
    make_config,
    serving,
)
from redis_server import free_port, running_redis
from search_fakes import FakeEngine
from stdio_process import ROOT

from rypsok.config.load import load_config_text
from rypsok.core.model import Reason
from rypsok.core.readiness import NotReady
from rypsok.core.telemetry import COUNTERS
from rypsok.mcp.health import Health

ENGINES = '[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general"]\n'
GUARDED = (
    'config_version = 1\n[service.http]\nallowed_hosts = ["rypsok.example"]\n' + CALLERS + ENGINES
)


def _config(text: str = GUARDED) -> Any:
    return load_config_text(text, CALLERS_ENV)


async def test_req_dep_002_healthz_answers_without_a_token_and_says_nothing_more() -> None:
    COUNTERS.reset()
    async with serving(_config(), CALLERS_ENV) as server, httpx.AsyncClient() as client:
        # Neither a token nor an allowed Host: a probe dials the address.
        alive = await client.get(f"http://127.0.0.1:{server.port}/healthz")
        head = await client.head(f"http://127.0.0.1:{server.port}/healthz")
        post = await client.post(f"http://127.0.0.1:{server.port}/healthz")
        mcp = await client.get(f"http://127.0.0.1:{server.port}/mcp")
    assert (alive.status_code, alive.content) == (200, b'{"status":"ok"}')
    assert alive.headers["content-type"] == "application/json"
    assert alive.headers["cache-control"] == "no-store"
    assert (head.status_code, head.content) == (200, b"")
    assert (post.status_code, post.headers["allow"]) == (405, "GET, HEAD")
    assert mcp.status_code == 401  # the rest of the listener still asks for a token
    assert COUNTERS.snapshot()["http"] == {"unauthorized": 1}  # the probes are no refusals


async def test_req_dep_002_readyz_is_ready_with_an_engine_able_to_serve() -> None:
    async with serving(_config(), CALLERS_ENV) as server, httpx.AsyncClient() as client:
        ready = await client.get(f"http://127.0.0.1:{server.port}/readyz")
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})


async def test_req_dep_002_readyz_names_no_engine_when_every_engine_rests() -> None:
    text = GUARDED + "[resilience]\nfailures_to_open = 1\n"
    failing = FakeEngine("wikipedia", failure=Reason.TIMEOUT)
    async with (
        serving(_config(text), CALLERS_ENV, engine=failing) as server,  # type: ignore[arg-type]
        httpx.AsyncClient() as client,
    ):
        url = f"http://127.0.0.1:{server.port}"
        before = await client.get(url + "/readyz")
        await _search(client, server.port)  # one timeout opens the circuit
        after = await client.get(url + "/readyz")
    assert before.status_code == 200
    assert after.status_code == 503
    assert after.json() == {"status": "not_ready", "reasons": ["no_engine"]}


async def _search(client: httpx.AsyncClient, port: int) -> None:
    from http_helpers import TOKEN_A, call_body, modern_headers

    response = await client.post(
        f"http://127.0.0.1:{port}/mcp",
        json=call_body("web_search", {"query": "rust"}),
        headers={**modern_headers("tools/call", "web_search", TOKEN_A), "Host": "rypsok.example"},
    )
    assert response.status_code == 200


async def test_req_dep_002_readyz_names_the_coordination_store_when_it_is_away() -> None:
    with running_redis() as redis:
        reachable = GUARDED + f'[coordination]\nurl = "{redis.url}"\nreplicas = 1\n'
        async with (
            serving(_config(reachable), CALLERS_ENV) as server,
            httpx.AsyncClient() as client,
        ):
            ready = await client.get(f"http://127.0.0.1:{server.port}/readyz")
    assert ready.status_code == 200
    away = GUARDED + f'[coordination]\nurl = "redis://127.0.0.1:{free_port()}"\nreplicas = 1\n'
    async with serving(_config(away), CALLERS_ENV) as server, httpx.AsyncClient() as client:
        not_ready = await client.get(f"http://127.0.0.1:{server.port}/readyz")
    assert not_ready.status_code == 503
    assert not_ready.json()["reasons"] == ["coordination_unreachable"]


def test_req_dep_002_readyz_before_accepting_and_while_stopping() -> None:
    health = Health(None)
    assert health.answer("GET", "/readyz")[0:2] == (
        503,
        b'{"status":"not_ready","reasons":["starting"]}',
    )
    health.accepting = True
    assert health.answer("GET", "/readyz")[0] == 200
    health.stopping = True
    assert json.loads(health.answer("GET", "/readyz")[1])["reasons"] == [str(NotReady.STOPPING)]
    assert health.answer("GET", "/healthz")[0] == 200  # alive while it stops


# -- the real process under a service manager ---------------------------------------------


def _console_script() -> str:
    import shutil

    found = shutil.which("rypsok", path=str(Path(sys.executable).parent))
    assert found is not None
    return found


def _write(tmp_path: Path, port: int) -> Path:
    path = tmp_path / "rypsok.toml"
    path.write_text(
        f'config_version = 1\n[service.http]\nbind = "127.0.0.1:{port}"\n' + ENGINES,
        encoding="utf-8",
    )
    return path


async def _datagram(sock: trio.socket.SocketType, timeout_s: float = 20) -> bytes:
    with trio.fail_after(timeout_s):
        return await sock.recv(4096)


async def test_req_ops_002_systemd_notifications_through_a_real_socket(tmp_path: Path) -> None:
    port = free_port()
    config = _write(tmp_path, port)
    notify_path = str(tmp_path / "notify")
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    await sock.bind(notify_path)
    env = {k: v for k, v in os.environ.items() if k != "RYPSOK_CONFIG"}
    env.update({"NOTIFY_SOCKET": notify_path, "WATCHDOG_USEC": "300000"})
    async with trio.open_nursery() as nursery:
        process = await trio.lowlevel.open_process(
            [_console_script(), "serve", "--transport", "http", "--config", str(config)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd=ROOT, env=env,
        )  # fmt: skip
        try:
            got = [await _datagram(sock)]
            while got[-1] != b"READY=1":
                got.append(await _datagram(sock))
            # Ready means accepting: the first probe after READY=1 is answered.
            async with httpx.AsyncClient() as client:
                alive = await client.get(f"http://127.0.0.1:{port}/healthz")
            assert alive.status_code == 200
            watchdogs = 0
            while watchdogs < 3:  # every 100 ms: a third of WATCHDOG_USEC
                if await _datagram(sock) == b"WATCHDOG=1":
                    watchdogs += 1
            process.send_signal(signal.SIGTERM)
            while await _datagram(sock) != b"STOPPING=1":
                pass
            with trio.fail_after(20):
                assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
            nursery.cancel_scope.cancel()
    sock.close()


async def test_req_dep_004_the_images_healthcheck_asks_healthz(tmp_path: Path) -> None:
    # The Containerfile's HEALTHCHECK, run as written but with this Python and a free port.
    containerfile = (ROOT / "containers" / "Containerfile").read_text(encoding="utf-8")
    found = re.search(r"^HEALTHCHECK .*?CMD (\[.*?\])$", containerfile, re.MULTILINE | re.DOTALL)
    assert found is not None
    argv = json.loads(found.group(1))
    assert argv[0] == "/opt/rypsok/bin/python"  # the venv's own: the image has no curl
    port = free_port()
    check = [sys.executable, *argv[1:-1], argv[-1].replace(":8737/", f":{port}/")]
    assert check[-1] != argv[-1]
    config = _write(tmp_path, port)
    down = await trio.run_process(check, capture_stderr=True, check=False)
    assert down.returncode != 0  # nothing listens yet: unhealthy
    env = {k: v for k, v in os.environ.items() if k != "RYPSOK_CONFIG"}
    async with trio.open_nursery() as nursery:
        process = await trio.lowlevel.open_process(
            [_console_script(), "serve", "--transport", "http", "--config", str(config)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            cwd=ROOT, env=env,
        )  # fmt: skip
        try:
            with trio.fail_after(20):
                while True:
                    up = await trio.run_process(check, capture_stderr=True, check=False)
                    if up.returncode == 0:
                        break
                    await trio.sleep(0.2)
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(20):
                await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
            nursery.cancel_scope.cancel()


# -- /healthz behind a flood's newcomers in the listen backlog (issue 34) ----------------------

_PROBE = b"GET /healthz HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n"
# Newcomers queued in the backlog ahead of the probe, each closed unanswered at its accept.
_QUEUED_AHEAD = 900


async def test_req_dep_002_healthz_behind_900_refused_newcomers_is_answered_within_250_ms() -> None:
    """At the cap, with every slot younger than the grace, 900 newcomers that have begun a
    head and not ended it wait in the listen backlog ahead of a health probe: each is closed
    unanswered at its accept, and the probe behind them makes room and is answered within
    250 ms. The backlog is first in, first out: the listener reaches the probe only after
    taking the 900. A fixed 20 ms pause after every 65 accepts would hold it at least 13
    pauses (260 ms) before its accept; the pause that scales with the CPU the refusals took
    reaches it in a fraction of that (tens of milliseconds on a quiet host)."""
    config = make_config(max_connections=2, idle_timeout_s=60)
    refused_before = http_counts().get("too_many_connections", 0)
    async with serving(config) as server:
        holders = []
        for _ in range(2):  # the cap, held by heads begun (no request yet, not settled)
            holder = await trio.open_tcp_stream("127.0.0.1", server.port)
            await holder.send_all(b"POST /mcp HTTP/1.1\r\n")
            holders.append(holder)
        with trio.fail_after(5):
            while server.listener.connections < 2:  # noqa: ASYNC110 # no event to wait on
                await trio.sleep(0.01)
        # Blocking connects: the listener (this thread's loop) takes none of them until the
        # probe is queued behind them all.
        queued = []
        try:
            for _ in range(_QUEUED_AHEAD):
                newcomer = socket.create_connection(("127.0.0.1", server.port))
                queued.append(newcomer)
                newcomer.sendall(b"POST /mcp HTTP/1.1\r\n")
            probe = socket.create_connection(("127.0.0.1", server.port))
            probe.sendall(_PROBE)
            start = trio.current_time()
            stream = trio.SocketStream(trio.socket.from_stdlib_socket(probe))
            async with stream:
                answer = await closed_by_server(stream, 10)
            took = trio.current_time() - start
        finally:
            for newcomer in queued:
                newcomer.close()
            for holder in holders:
                await holder.aclose()
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert answer.endswith(b'{"status":"ok"}')
    assert http_counts()["too_many_connections"] - refused_before >= _QUEUED_AHEAD
    assert took < 0.25, f"the probe behind {_QUEUED_AHEAD} newcomers took {took:.3f} s"
