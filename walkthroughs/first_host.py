"""The first five minutes with a host: `tools/first-host`.

Plugs rypsok into the official MCP client (the Python SDK's, which starts a stdio server the
way a host does: the entry's command, its arguments, its `env`, and otherwise only the
client's default environment) in the three ways Getting Started and the integration guide
give, and prints what the host sees:

1. the Inspector's entry as pasted, with no file (the book's defaults);
2. the same entry's second form, `--config` with Tutorial 2's file and `env` giving
   `BRAVE_API_KEY` (a made-up key: nothing is searched, the key only has to reach rypsok);
3. `rypsok init PATH`, then the entry it prints.

Each form lists the tools and asks `engine_status`, which makes no request: the walkthrough
needs no network. It exits 1 when a form does not work as the book says.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "book" / "integration.md"
TUTORIAL_2 = ROOT / "examples" / "configs" / "tutorial-2.toml"
ENTRY = re.compile(
    r"<!-- host-entry: inspector (stdio|stdio-config) -->\n```json\n(.*?)\n```", re.S
)
DEMO_KEY = "BSA-first-host-walkthrough-not-a-real-key"
TOOLS = ["web_search", "web_fetch", "engine_status"]


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _inspector_entries() -> dict[str, dict[str, Any]]:
    section = GUIDE.read_text(encoding="utf-8").split("## Host configurations", 1)[1]
    found = {
        kind: json.loads(body)["mcpServers"]["rypsok"] for kind, body in ENTRY.findall(section)
    }
    if set(found) != {"stdio", "stdio-config"}:
        raise SystemExit("first-host: the guide lacks the Inspector's two stdio entries")
    return found


async def _plug(command: str, server: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What a host sees of the entry `server`: its tools, then engine_status's engines."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import get_default_environment

    env = {**get_default_environment(), **server.get("env", {})}
    params = StdioServerParameters(command=command, args=list(server["args"]), env=env)
    async with Client(params) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        _say(f"  tools: {', '.join(listed)}")
        if listed != TOOLS:
            raise SystemExit(f"first-host: expected the tools {TOOLS}")
        status = await client.call_tool("engine_status", {})
    content = status.structured_content
    if status.is_error or content is None:
        raise SystemExit("first-host: engine_status failed")
    engines = {engine["id"]: engine for engine in content["engines"]}
    for engine_id, engine in engines.items():
        why = f" ({engine['reason']})" if "reason" in engine else ""
        _say(f"  engine {engine_id}: {engine['state']}{why}")
    return engines


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"first-host: {what}")


async def _walk(command: str) -> int:
    entries = _inspector_entries()
    _say("1. The Inspector's entry as pasted, no file (the book's defaults):")
    _say("  " + json.dumps(entries["stdio"]))
    engines = await _plug(command, entries["stdio"])
    _expect(engines["wikipedia"]["state"] == "closed", "Wikipedia is not in use")
    _expect(engines["brave"].get("reason") == "no_credential", "Brave is not waiting for its key")

    _say("2. The second form: --config (Tutorial 2's file) and env with BRAVE_API_KEY:")
    keyed = dict(entries["stdio-config"])
    args = list(keyed["args"])
    args[args.index("--config") + 1] = str(TUTORIAL_2)
    keyed["args"] = args
    keyed["env"] = {"BRAVE_API_KEY": DEMO_KEY}
    _say("  " + json.dumps({**keyed, "env": {"BRAVE_API_KEY": "…"}}))
    engines = await _plug(command, keyed)
    _expect(engines["brave"]["state"] == "closed", "the key given by env did not reach rypsok")

    _say("3. rypsok init PATH, then the entry it prints:")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rypsok.toml"
        done = await trio.run_process(
            [command, "init", str(path)], capture_stdout=True, capture_stderr=True, check=False
        )
        _expect(done.returncode == 0, f"init failed: {done.stderr.decode().strip()}")
        printed = json.loads(done.stdout)["mcpServers"]["rypsok"]
        _say("  " + json.dumps(printed))
        engines = await _plug(command, printed)
    _expect(all(e["state"] == "closed" for e in engines.values()), "a starter engine is not in use")
    _say("first-host: every form works as the book says")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/first-host")
    parser.add_argument(
        "--command",
        help="the rypsok console script (default: the one installed beside this Python)",
    )
    args = parser.parse_args(argv)
    command = args.command or shutil.which("rypsok", path=str(Path(sys.executable).parent))
    if command is None:
        _say("first-host: no rypsok console script beside this Python; give --command")
        return 1
    os.environ.pop("RYPSOK_CONFIG", None)
    return trio.run(_walk, command)


if __name__ == "__main__":
    sys.exit(main())
