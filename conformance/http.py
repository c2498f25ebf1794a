"""The book's calls over Streamable HTTP: Tutorial 4's configuration, its curl call, the HTTP
host entry, and every example call, against `conformance.launch --transport http`.

The listener is bound to a free loopback port instead of 0.0.0.0:8737, the second caller's
token file is a temporary file, and each request carries `Host: rypsok.example` as the
tutorial's proxy forwards it; everything else is the tutorial's file as shipped.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import trio

from testkit import messages

__all__ = ["TUTORIAL_4", "http_cases"]

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL_4 = ROOT / "examples" / "configs" / "tutorial-4.toml"
HOST_ENTRY = ROOT / "examples" / "host-entry-http.json"
PUBLIC_HOST = "rypsok.example"
START_TIMEOUT_S = 20
CALL_TIMEOUT_S = 20


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _headers(request: dict[str, Any], token: str) -> dict[str, str]:
    headers = {
        "Host": PUBLIC_HOST,
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": request["method"],
    }
    if request["method"] == "tools/call":
        headers["Mcp-Name"] = request["params"]["name"]
    return headers


class _Listener:
    def __init__(self, port: int, token: str, process: trio.Process) -> None:
        self.port = port
        self.token = token
        self.process = process
        self.url = f"http://127.0.0.1:{port}/mcp"


async def _wait_listening(log: Path, process: trio.Process) -> None:
    with trio.fail_after(START_TIMEOUT_S):
        while b'"listening"' not in await trio.Path(log).read_bytes():
            if process.returncode is not None:
                raise RuntimeError("the listener exited before listening")
            await trio.sleep(0.05)


class _Run:
    """One listener process with Tutorial 4's configuration, engines routed to the wiki."""

    def __init__(self, wiki_port: int, workdir: Path) -> None:
        self._wiki_port = wiki_port
        self._workdir = workdir

    async def __aenter__(self) -> _Listener:
        port = _free_port()
        token = secrets.token_urlsafe(32)
        ops = self._workdir / "rypsok-ops"
        ops.write_text(secrets.token_urlsafe(32), encoding="utf-8")
        ops.chmod(0o600)
        text = TUTORIAL_4.read_text(encoding="utf-8")
        text = re.sub(r'bind = "[^"]*"', f'bind = "127.0.0.1:{port}"', text, count=1)
        text = text.replace("/run/secrets/rypsok-ops", str(ops))
        config = self._workdir / "tutorial-4.toml"
        config.write_text(text, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RYPSOK_", "BRAVE_"))}
        env["RYPSOK_TOKEN_MIMLYS"] = token
        log = self._workdir / "rypsok.log"
        with log.open("wb") as stderr:
            self._process = await trio.lowlevel.open_process(
                [sys.executable, "-m", "conformance.launch", "--config", str(config),
                 "--route", f"en.wikipedia.org={self._wiki_port}", "--transport", "http"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                cwd=ROOT, env=env,
            )  # fmt: skip
        await _wait_listening(log, self._process)
        return _Listener(port, token, self._process)

    async def __aexit__(self, *exc: object) -> None:
        self._process.send_signal(signal.SIGTERM)
        with trio.move_on_after(10) as late:
            await self._process.wait()
        if late.cancelled_caught:
            self._process.kill()
            await self._process.wait()


async def _post(listener: _Listener, request: dict[str, Any]) -> tuple[int, Any]:
    async with httpx.AsyncClient(timeout=CALL_TIMEOUT_S, trust_env=False) as client:
        response = await client.post(
            listener.url,
            content=json.dumps(request).encode(),
            headers=_headers(request, listener.token),
        )
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, None


def _compare(answer: Any, expected: dict[str, Any]) -> str:
    if answer != expected:
        return "response differs: " + json.dumps(answer, ensure_ascii=False)[:2000]
    return ""


async def _call_case(listener: _Listener, case: dict[str, Any]) -> str:
    status, answer = await _post(listener, case["request"])
    if status != 200:
        return f"HTTP {status}"
    return _compare(answer, case["response"])


async def _curl_case(listener: _Listener, expected: dict[str, Any]) -> str:
    """Tutorial 4's curl command, its URL pointed at the local listener."""
    curl = shutil.which("curl")
    if curl is None:
        return "curl is not installed"
    body = (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"engine_status",'
        '"arguments":{},\n"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",\n'
        '"io.modelcontextprotocol/clientInfo":{"name":"probe","version":"0"},\n'
        '"io.modelcontextprotocol/clientCapabilities":{}}}}'
    )
    argv = [
        curl, "-sS", listener.url,
        "-H", f"Host: {PUBLIC_HOST}",
        "-H", f"Authorization: Bearer {listener.token}",
        "-H", "Content-Type: application/json",
        "-H", "Accept: application/json, text/event-stream",
        "-H", "MCP-Protocol-Version: 2026-07-28", "-H", "Mcp-Method: tools/call",
        "-H", "Mcp-Name: engine_status",
        "-d", body,
    ]  # fmt: skip
    with trio.fail_after(CALL_TIMEOUT_S):
        done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
    if done.returncode != 0:
        return f"curl exit code {done.returncode}"
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        return "curl's answer is not JSON"
    return _compare(answer, {**expected, "id": 1})


async def _host_entry_case(listener: _Listener) -> str:
    """The HTTP host entry as written: its URL's path, its headers with the token expanded."""
    entry = json.loads(HOST_ENTRY.read_text(encoding="utf-8"))
    server = next(iter(entry["mcpServers"].values()))
    if httpx.URL(server["url"]).path != "/mcp":
        return "the host entry's URL is not /mcp"
    headers = {
        name: value.replace("${RYPSOK_TOKEN_MIMLYS}", listener.token)
        for name, value in server["headers"].items()
    }
    discover = messages.discover()
    base = _headers(discover, listener.token)
    base.pop("Authorization")
    async with httpx.AsyncClient(timeout=CALL_TIMEOUT_S, trust_env=False) as client:
        response = await client.post(
            listener.url, content=json.dumps(discover).encode(), headers={**base, **headers}
        )
    if response.status_code != 200:
        return f"HTTP {response.status_code}"
    if messages.REVISION not in response.json()["result"].get("supportedVersions", []):
        return "server/discover did not list 2026-07-28"
    return ""


async def http_cases(
    calls: list[tuple[str, dict[str, Any]]], wiki_port: int
) -> list[tuple[str, str]]:
    """(name, why) for each case over HTTP; `why` is empty when the case passed."""
    status_case = dict(calls)["engine-status"]
    outcomes: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        async with _Run(wiki_port, workdir) as listener:
            outcomes.append(("http: host-entry-http", await _host_entry_case(listener)))
            curl = await _curl_case(listener, status_case["response"])
            outcomes.append(("http: tutorial-4 curl", curl))
        for name, case in calls:
            # A fresh process per call, as over stdio: one call's state stays out of the next.
            async with _Run(wiki_port, workdir) as listener:
                outcomes.append((f"http: {name}", await _call_case(listener, case)))
    return outcomes
