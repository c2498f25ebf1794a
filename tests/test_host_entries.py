"""The integration guide's host configurations (issue 21): each one parses and works.

Every JSON block of book/integration.md's "Host configurations" section is read as the host
would read it. A stdio entry's command is started (the console script the package installs,
with a test configuration in place of the example path) and answers discovery and
tools/list; an HTTP entry's request, with its Authorization header filled in, reaches a
listener configured as network mode describes.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from http_helpers import modern_body, serving
from mcp_helpers import modern
from stdio_process import ROOT, Child, write_config

from rypsok.config.load import load_config_text

pytestmark = pytest.mark.usefixtures("keep_exception_hooks")

GUIDE = ROOT / "book" / "integration.md"
ENTRY = re.compile(r"<!-- host-entry: ([\w-]+) (stdio|http) -->\n```json\n(.*?)\n```", re.DOTALL)
# The placeholders each host expands for a secret: environment or a prompted input.
PLACEHOLDER = re.compile(r"\$\{(?:env:|input:)?[\w-]+\}")
HOSTS = {"claude-desktop", "claude-code", "vscode", "cursor", "inspector"}


def _entries() -> list[tuple[str, str, dict[str, Any]]]:
    section = GUIDE.read_text(encoding="utf-8").split("## Host configurations", 1)[1]
    return [(host, kind, json.loads(body)) for host, kind, body in ENTRY.findall(section)]


def _server(entry: dict[str, Any]) -> dict[str, Any]:
    servers = entry.get("mcpServers", entry.get("servers"))
    assert isinstance(servers, dict)
    assert list(servers) == ["rypsok"]
    server: dict[str, Any] = servers["rypsok"]
    return server


def _console_script() -> str:
    found = shutil.which("rypsok", path=str(Path(sys.executable).parent))
    assert found is not None, "the package's console script is not installed beside Python"
    return found


def test_req_ops_001_the_guide_has_an_entry_for_every_host() -> None:
    entries = _entries()
    assert {host for host, _, _ in entries} == HOSTS
    assert {host for host, kind, _ in entries if kind == "stdio"} == HOSTS
    assert {host for host, kind, _ in entries if kind == "http"} == {
        "claude-code",
        "vscode",
        "cursor",
    }


@pytest.mark.parametrize(
    ("host", "entry"), [(h, e) for h, k, e in _entries() if k == "stdio"], ids=lambda v: str(v)[:20]
)
async def test_req_ops_001_a_stdio_host_entry_starts_rypsok(
    host: str, entry: dict[str, Any], tmp_path: Path
) -> None:
    server = _server(entry)
    assert server.get("type", "stdio") == "stdio"
    assert server["command"] == "rypsok"
    args = list(server["args"])
    assert args[0] == "serve"
    args[args.index("--config") + 1] = str(write_config(tmp_path))
    async with trio.open_nursery() as nursery:
        child = await Child.start(nursery, [_console_script(), *args])
        await child.send(modern("server/discover", request_id=1), modern("tools/list", 2))
        await child.close_stdin()
        answers = {(await child.line())["id"]: None for _ in range(2)}
        assert await child.wait() == 0
        nursery.cancel_scope.cancel()
    assert set(answers) == {1, 2}, host


def _tokens(tmp_path: Path) -> tuple[str, str]:
    token = "t" * 44
    (tmp_path / "token").write_text(token + "\n")
    (tmp_path / "token").chmod(0o600)
    config = (
        'config_version = 1\n[service.http]\nallowed_hosts = ["rypsok.example"]\n'
        f'[[service.http.auth.callers]]\nid = "agent"\ntoken_file = "{tmp_path}/token"\n'
        '[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general"]\n'
    )
    return config, token


@pytest.mark.parametrize(
    ("host", "entry"), [(h, e) for h, k, e in _entries() if k == "http"], ids=lambda v: str(v)[:20]
)
async def test_req_dep_002_an_http_host_entry_reaches_the_listener(
    host: str, entry: dict[str, Any], tmp_path: Path
) -> None:
    server_entry = _server(entry)
    assert server_entry.get("type", "http") == "http"
    url = httpx.URL(server_entry["url"])
    assert (url.scheme, url.path) == ("https", "/mcp")
    authorization = server_entry["headers"]["Authorization"]
    assert PLACEHOLDER.fullmatch(authorization.removeprefix("Bearer ")), host
    text, token = _tokens(tmp_path)
    async with serving(load_config_text(text, {})) as server, httpx.AsyncClient() as client:
        response = await client.post(
            server.url,
            json=modern_body("server/discover"),
            headers={
                "Authorization": PLACEHOLDER.sub(token, authorization),
                "Host": url.host,
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "server/discover",
            },
        )
    assert response.status_code == 200, host
    assert "2026-07-28" in response.json()["result"]["supportedVersions"]
