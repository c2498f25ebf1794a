"""The integration guide's host configurations: each one parses and works.

Every JSON block of book/integration.md's "Host configurations" section is read as the host
would read it. A stdio entry's command is started (the console script the package installs,
with a test configuration in place of the example path) and answers discovery and
tools/list; an HTTP entry's request, with its Authorization header filled in, reaches a
listener configured as network mode describes.
"""

from __future__ import annotations

import json
import os
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
from stdio_process import ROOT, Child

from rypsok.config.load import load_config_text

pytestmark = pytest.mark.usefixtures("keep_exception_hooks")

GUIDE = ROOT / "book" / "integration.md"
ENTRY = re.compile(
    r"<!-- host-entry: ([\w-]+) (stdio|stdio-config|http) -->\n```json\n(.*?)\n```", re.DOTALL
)
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
    assert {host for host, kind, _ in entries if kind == "stdio-config"} == HOSTS
    assert {host for host, kind, _ in entries if kind == "http"} == {
        "claude-code",
        "vscode",
        "cursor",
    }


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment a host gives its server: its own (here the test's, without a
    configuration path or a Brave key), plus the entry's `env`."""
    env = {k: v for k, v in os.environ.items() if k not in ("RYPSOK_CONFIG", "BRAVE_API_KEY")}
    env.update(extra)
    return env


async def _engines_of(argv: list[str], env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Start the entry's command as the host does, list the tools and ask engine_status."""
    async with trio.open_nursery() as nursery:
        child = await Child.start(nursery, argv, env)
        await child.send(
            modern("server/discover", request_id=1),
            modern("tools/list", 2),
            modern("tools/call", 3, name="engine_status", arguments={}),
        )
        await child.close_stdin()
        answers = {}
        for _ in range(3):
            answer = await child.line()
            answers[answer["id"]] = answer
        assert await child.wait() == 0
        nursery.cancel_scope.cancel()
    assert set(answers) == {1, 2, 3}
    tools = [tool["name"] for tool in answers[2]["result"]["tools"]]
    assert tools == ["web_search", "web_fetch", "engine_status"]
    engines = answers[3]["result"]["structuredContent"]["engines"]
    return {engine["id"]: engine for engine in engines}


@pytest.mark.parametrize(
    ("host", "entry"), [(h, e) for h, k, e in _entries() if k == "stdio"], ids=lambda v: str(v)[:20]
)
async def test_req_ops_001_a_stdio_host_entry_works_as_pasted_with_no_file(
    host: str, entry: dict[str, Any]
) -> None:
    server = _server(entry)
    assert server.get("type", "stdio") == "stdio"
    assert server["command"] == "rypsok"
    assert server["args"] == ["serve"], host  # no file: the book's defaults
    assert "env" not in server
    engines = await _engines_of([_console_script(), *server["args"]], _child_env({}))
    assert engines["wikipedia"]["state"] == "closed"
    assert (engines["brave"]["state"], engines["brave"]["reason"]) == ("disabled", "no_credential")


KEYED_CONFIG = (
    "config_version = 1\n"
    '[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general"]\n'
    '[engines.brave]\ntype = "brave"\ncategories = ["general", "news"]\n'
    'api_key_env = "BRAVE_API_KEY"\n'
)
TEST_KEY = "BSA" + "k" * 29


@pytest.mark.parametrize(
    ("host", "entry"),
    [(h, e) for h, k, e in _entries() if k == "stdio-config"],
    ids=lambda v: str(v)[:20],
)
async def test_req_ops_001_a_stdio_host_entry_with_a_file_gives_the_key_by_env(
    host: str, entry: dict[str, Any], tmp_path: Path
) -> None:
    server = _server(entry)
    assert server.get("type", "stdio") == "stdio"
    assert server["command"] == "rypsok"
    args = list(server["args"])
    assert args[0] == "serve"
    config = tmp_path / "rypsok.toml"
    config.write_text(KEYED_CONFIG, encoding="utf-8")
    args[args.index("--config") + 1] = str(config)
    assert list(server["env"]) == ["BRAVE_API_KEY"], host
    given = server["env"]["BRAVE_API_KEY"]
    # The host puts the key where the entry says: its own expansion, or the value written.
    assert PLACEHOLDER.fullmatch(given) or given == "your key", host
    engines = await _engines_of([_console_script(), *args], _child_env({"BRAVE_API_KEY": TEST_KEY}))
    assert engines["brave"]["state"] == "closed", host  # the key reached rypsok
    assert engines["wikipedia"]["state"] == "closed"


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
