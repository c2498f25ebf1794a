"""The network-mode examples: the configuration passes `check` and serves the HTTP host entry."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from http_helpers import modern_body, serving

from rypsok import cli
from rypsok.config.load import load_config_text

pytestmark = pytest.mark.usefixtures("keep_exception_hooks")

REPO = Path(__file__).resolve().parent.parent
NETWORK = REPO / "containers" / "network-mode.toml"
CREDENTIALS = "/run/credentials/rypsok.service/"


def _with_credentials(tmp_path: Path) -> tuple[str, dict[str, str]]:
    tokens = {"rypsok-mimlys": "m" * 44, "rypsok-ops": "o" * 44}
    for name, token in tokens.items():
        (tmp_path / name).write_text(token + "\n")
        (tmp_path / name).chmod(0o600)
    return NETWORK.read_text().replace(CREDENTIALS, f"{tmp_path}/"), tokens


def test_req_dep_002_the_network_mode_example_passes_check(capsys, tmp_path: Path) -> None:
    text, _ = _with_credentials(tmp_path)
    copy = tmp_path / "network-mode.toml"
    copy.write_text(text)
    assert cli.main(["check", "--config", str(copy)]) == 0
    err = capsys.readouterr().err
    assert "warning" not in err
    assert "callers=2" in err


async def test_req_dep_002_the_http_host_entry_reaches_the_example_listener(
    tmp_path: Path,
) -> None:
    text, tokens = _with_credentials(tmp_path)
    config = load_config_text(text, {})
    entry = json.loads((REPO / "examples" / "host-entry-http.json").read_text())
    server_entry = entry["mcpServers"]["rypsok"]
    headers = {
        k: v.replace("${RYPSOK_TOKEN_MIMLYS}", tokens["rypsok-mimlys"])
        for k, v in server_entry["headers"].items()
    }
    async with serving(config) as server, httpx.AsyncClient() as client:
        response = await client.post(
            server.url,
            json=modern_body("server/discover"),
            headers={
                **headers,
                "Host": httpx.URL(server_entry["url"]).host,
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "server/discover",
            },
        )
    assert response.status_code == 200
    assert "2026-07-28" in response.json()["result"]["supportedVersions"]
