"""`rypsok serve --transport http` as a real process: the listening line, SIGTERM with a call in
flight (answered within service.shutdown_ms, new connections refused, exit 0)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from functools import partial
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import trio
from http_helpers import CALLERS, TOKEN_A, TOKEN_B, call_body, modern_headers
from stdio_process import ROOT

from testkit.mediawiki import FixtureWiki

if TYPE_CHECKING:
    from pathlib import Path

ENGINES = '\n[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general", "science"]\n'


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Process:
    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.stderr = b""
        self.grew = trio.Event()

    async def drain(self) -> None:
        assert self.process.stderr is not None
        while data := await self.process.stderr.receive_some(65536):
            self.stderr += data
            self.grew.set()
            self.grew = trio.Event()

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stderr.decode().splitlines() if line]

    async def wait_for(self, event: str, timeout_s: float = 20, after: int = 0) -> dict[str, Any]:
        """The first line of this event among the lines after the first `after` ones."""
        with trio.fail_after(timeout_s):
            while True:
                found = [e for e in self.events()[after:] if e["event"] == event]
                if found:
                    return found[0]
                await self.grew.wait()


async def _start(nursery: trio.Nursery, argv: list[str], env: dict[str, str]) -> _Process:
    process = await trio.lowlevel.open_process(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=ROOT, env=env,
    )  # fmt: skip
    child = _Process(process)
    nursery.start_soon(child.drain)
    nursery.start_soon(_reap, process)
    return child


async def _reap(process: trio.Process) -> None:
    """Kill the child when the test's nursery ends first (a failed assertion, a timeout):
    a server left running would outlive the test run and hold its port."""
    try:
        await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            await process.wait()


def _env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RYPSOK_", "BRAVE_"))}
    env.update(more)
    return env


async def test_req_dep_002_serve_http_logs_listening_with_the_callers_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    port = _free_port()
    config = tmp_path / "rypsok.toml"
    config.write_text(
        f'config_version = 1\n[service.http]\nbind = "127.0.0.1:{port}"\n' + CALLERS + ENGINES
    )
    env = _env(RYPSOK_TOKEN_A=TOKEN_A, RYPSOK_TOKEN_B=TOKEN_B)
    argv = [sys.executable, "-m", "rypsok", "serve", "--transport", "http", "--config", str(config)]
    async with trio.open_nursery() as nursery:
        child = await _start(nursery, argv, env)
        listening = await child.wait_for("listening")
        assert (listening["address"], listening["callers"]) == (f"127.0.0.1:{port}", 2)
        async with httpx.AsyncClient() as client:
            response = await client.post(
                f"http://127.0.0.1:{port}/mcp",
                content=json.dumps(call_body("engine_status")),
                headers=modern_headers("tools/call", "engine_status", TOKEN_B),
            )
        assert response.status_code == 200
        child.process.send_signal(signal.SIGTERM)
        with trio.fail_after(10):
            code = await child.process.wait()
    assert code == 0
    assert child.events()[0]["event"] == "listening"
    assert TOKEN_B not in child.stderr.decode()
    assert [e["caller"] for e in child.events() if e["event"] == "call"] == ["beta"]


async def test_req_ops_002_sigterm_with_calls_in_flight_answers_them_and_exits_0(
    tmp_path: Path,
) -> None:
    port = _free_port()
    config = tmp_path / "rypsok.toml"
    # Calls that stay in flight for about 4 s, and a shutdown budget that outlasts them.
    config.write_text(
        "config_version = 1\n[service]\nshutdown_ms = 6000\n"
        f'[service.http]\nbind = "127.0.0.1:{port}"\n'
        "[search]\ndeadline_ms = 4000\nengine_timeout_ms = 3500\n" + ENGINES
    )
    url = f"http://127.0.0.1:{port}/mcp"
    answers: list[httpx.Response] = []
    async with trio.open_nursery() as nursery:
        wiki = FixtureWiki()
        wiki_port = await nursery.start(wiki.serve)
        argv = [
            sys.executable, "-m", "conformance.launch", "--config", str(config),
            "--route", f"en.wikipedia.org={wiki_port}", "--transport", "http",
        ]  # fmt: skip
        child = await _start(nursery, argv, _env())
        await child.wait_for("listening")
        async with httpx.AsyncClient(timeout=20) as client:

            async def call(query: str) -> None:
                answers.append(
                    await client.post(
                        url,
                        content=json.dumps(call_body("web_search", {"query": query})),
                        headers=modern_headers("tools/call", "web_search"),
                    )
                )

            async with trio.open_nursery() as calls:
                calls.start_soon(call, "hang one")
                calls.start_soon(call, "hang two")
                with trio.fail_after(10):
                    await wiki.hung.wait()
                # The engine serves one request at a time: the second call waits for it,
                # in flight at the listener all the same.
                await trio.sleep(0.5)
                stopped = trio.current_time()
                child.process.send_signal(signal.SIGTERM)
                await child.wait_for("shutdown_started")
                # From here a new connection is refused.
                try:
                    late = await client.post(url, content=b"{}", headers={"Connection": "close"})
                except httpx.TransportError:
                    late = None
                assert late is None
        with trio.fail_after(10):
            code = await child.process.wait()
        elapsed = trio.current_time() - stopped
        nursery.cancel_scope.cancel()
    assert code == 0
    assert elapsed < 6.0 + 1.0  # service.shutdown_ms and the interpreter's exit
    # Both calls were answered: their end (4 s at most) came before the shutdown's.
    assert [a.status_code for a in answers] == [200, 200]
    for answer in answers:
        error = answer.json()["result"]["structuredContent"]["error"]
        assert (error["kind"], error["detail"]["reason"]) == ("unavailable", "deadline")
    started = [e for e in child.events() if e["event"] == "shutdown_started"]
    assert started[0]["in_flight"] == 2


async def _hold_connections(task_status: trio.TaskStatus[int]) -> None:
    """A loopback site that accepts every connection and never answers: an engine's call
    stays in flight until its own deadline."""
    (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
    held: list[trio.SocketStream] = []
    try:
        task_status.started(listener.socket.getsockname()[1])
        while True:
            held.append(await listener.accept())
    finally:
        for stream in held:
            stream.socket.close()
        listener.socket.close()


async def test_req_ops_002_over_h2_a_probe_after_sigterm_leaves_the_call_in_flight_answered(
    tmp_path: Path,
) -> None:
    """Over one h2c connection: a web_search whose engine never answers, SIGTERM, then GET
    /readyz on the same connection. The probe's stream is refused (REFUSED_STREAM); the search
    is still answered (its deadline's error, within the shutdown's budget), and the process
    exits 0."""
    port = _free_port()
    config = tmp_path / "rypsok.toml"
    url = f"http://127.0.0.1:{port}"
    async with trio.open_nursery() as nursery:
        hung_port = await nursery.start(_hold_connections)
        config.write_text(
            "config_version = 1\n[service]\nshutdown_ms = 8000\n"
            f'[service.http]\nbind = "127.0.0.1:{port}"\n'
            "[search]\ndeadline_ms = 2500\nengine_timeout_ms = 2000\n"
            '[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general"]\n'
            f'base_url = "http://127.0.0.1:{hung_port}/w"\n'
            '[egress]\nallow = ["127.0.0.1"]\nallow_http = true\n'
        )
        argv = [sys.executable, "-m", "rypsok", "serve", "--transport", "http",
                "--config", str(config)]  # fmt: skip
        child = await _start(nursery, argv, _env())
        await child.wait_for("listening")
        found: dict[str, Any] = {}
        async with httpx.AsyncClient(http1=False, http2=True, timeout=20) as client:
            ready = await client.get(f"{url}/readyz")
            assert (ready.http_version, ready.status_code) == ("HTTP/2", 200)

            async def search() -> None:
                try:
                    found["search"] = await client.post(
                        f"{url}/mcp",
                        content=json.dumps(call_body("web_search", {"query": "rust"})),
                        headers=modern_headers("tools/call", "web_search"),
                    )
                except httpx.RemoteProtocolError as lost:
                    found["search"] = lost  # the answer lost: the assertion below says so

            async with trio.open_nursery() as calls:
                calls.start_soon(search)
                await trio.sleep(0.5)
                child.process.send_signal(signal.SIGTERM)
                await child.wait_for("shutdown_started")
                try:
                    found["probe"] = await client.get(f"{url}/readyz")
                except httpx.RemoteProtocolError as refused:
                    found["probe"] = refused
        with trio.fail_after(10):
            code = await child.process.wait()
        nursery.cancel_scope.cancel()
    assert code == 0
    answer = found["search"]
    assert isinstance(answer, httpx.Response), answer
    assert (answer.http_version, answer.status_code) == ("HTTP/2", 200)
    error = answer.json()["result"]["structuredContent"]["error"]
    assert (error["kind"], error["detail"]["reason"]) == ("unavailable", "deadline")
    assert isinstance(found["probe"], httpx.RemoteProtocolError)
    assert "error_code:7" in str(found["probe"])  # REFUSED_STREAM


@pytest.mark.parametrize("own_process", [True, False])
async def test_lim_m5_serving_over_http_runs_the_collector_with_start_up_frozen(
    own_process: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the console script's own process, serving (over either transport:
    `rypsok.mcp.process.serving`) freezes what start-up made out of the collector's passes;
    the collector stays on (a closed connection leaves reference cycles behind). A program
    that embeds rypsok has its heap left as it is: nothing frozen."""
    import gc

    from rypsok.config.load import load_config_text
    from rypsok.core.services import Rypsok
    from rypsok.mcp.caller_tokens import Callers
    from rypsok.mcp.listener import listening_socket
    from rypsok.mcp.listener.serve import _serve_process
    from rypsok.shared import own_process as own_process_module
    from testkit.instant import InstantEngine

    port = _free_port()
    config = load_config_text(
        f'config_version = 1\n[service.http]\nbind = "127.0.0.1:{port}"\n' + ENGINES, {}
    )
    sock = listening_socket(config.service.http.bind)
    frozen_before = gc.get_freeze_count()
    interval_before = sys.getswitchinterval()  # serving tunes the console script's process
    monkeypatch.setattr(own_process_module, "_own", own_process)  # as the console script sets it
    try:
        async with trio.open_nursery() as nursery:
            service = partial(Rypsok, config, env={}, engines=[InstantEngine("wikipedia")])
            nursery.start_soon(_serve_process, config, {}, Callers(), sock, (None, None), service)
            async with httpx.AsyncClient() as client:
                with trio.fail_after(10):
                    while True:
                        try:
                            response = await client.post(
                                f"http://127.0.0.1:{port}/mcp",
                                content=json.dumps(call_body("engine_status")),
                                headers=modern_headers("tools/call", "engine_status"),
                            )
                            break
                        except httpx.ConnectError:
                            await trio.sleep(0.05)
            assert response.status_code == 200
            assert gc.isenabled()
            if own_process:
                assert gc.get_freeze_count() > frozen_before
            else:
                assert gc.get_freeze_count() == frozen_before
            nursery.cancel_scope.cancel()
    finally:
        if own_process:
            gc.unfreeze()
            sys.setswitchinterval(interval_before)
        sock.close()
