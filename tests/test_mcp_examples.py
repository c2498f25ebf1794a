"""The examples/ files of the MCP layer: Tutorial 1's two lines and the stdio host entry."""

from __future__ import annotations

import json
import sys
import tomllib
from typing import TYPE_CHECKING

import trio
from mcp_helpers import dispatcher, modern
from stdio_process import ROOT, Child, write_config

from rypsok.mcp.protocol import Call, Reply, jsonrpc

if TYPE_CHECKING:
    from pathlib import Path

EXAMPLES = ROOT / "examples"


def test_req_mcp_006_first_search_jsonl_holds_a_discovery_and_a_search() -> None:
    lines = (EXAMPLES / "first-search.jsonl").read_bytes().splitlines()
    assert len(lines) == 2
    d = dispatcher()
    discover = d.handle(jsonrpc.parse(lines[0]))
    assert isinstance(discover, Reply)
    assert discover.payload["id"] == 1
    assert discover.payload["result"]["resultType"] == "complete"
    search = d.handle(jsonrpc.parse(lines[1]))
    assert isinstance(search, Call)
    assert search.tool == "web_search"
    assert search.request_id == 2


async def test_req_ops_001_stdio_host_entry_starts_rypsok_through_the_real_cli(
    tmp_path: Path,
) -> None:
    entry = json.loads((EXAMPLES / "host-entry-stdio.json").read_text(encoding="utf-8"))
    server = entry["mcpServers"]["rypsok"]
    # The command is the console script the package installs.
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert scripts["project"]["scripts"][server["command"]] == "rypsok._entry:main"
    args = list(server["args"])
    assert args[:1] == ["serve"]
    args[args.index("--config") + 1] = str(write_config(tmp_path))
    async with trio.open_nursery() as nursery:
        child = await Child.start(nursery, [sys.executable, "-m", "rypsok", *args])
        await child.send(modern("server/discover", request_id=1), modern("tools/list", 2))
        await child.close_stdin()
        first, second = await child.line(), await child.line()
        assert await child.wait() == 0
        nursery.cancel_scope.cancel()
    assert {first["id"], second["id"]} == {1, 2}
    listed = first if first["id"] == 2 else second
    assert [t["name"] for t in listed["result"]["tools"]] == [
        "web_search",
        "web_fetch",
        "engine_status",
    ]
