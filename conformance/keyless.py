"""Tutorial 6 replayed: a web_search of each category with `examples/configs/keyless.toml`,
its engines pointed at one loopback server that replays their recorded answers
(`testkit.keyless`).

Each category is searched in a fresh process as a host starts it; the case passes when the
results come from every engine serving that category and from no other.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

from testkit import messages
from testkit.keyless import keyless_pointed_at, replay_routes
from testkit.servers import serve_http

ROOT = Path(__file__).resolve().parent.parent
CASE_TIMEOUT_S = 20

# The host each engine's recorded answer links to (a private MediaWiki links to itself).
HOSTS = {
    "wikipedia": "127.0.0.1",
    "searxng": "www.spectroscopyonline.com",
    "hackernews": "code.facebook.com",
    "arxiv": "arxiv.org",
    "crossref": "doi.org",
    "stackoverflow": "stackoverflow.com",
}
SERVED = {
    "general": ("wikipedia", "searxng"),
    "news": ("hackernews", "searxng"),
    "science": ("wikipedia", "searxng", "arxiv", "crossref"),
    "code": ("hackernews", "searxng", "stackoverflow"),
}


def result_hosts(structured: dict[str, Any]) -> set[str]:
    return {r["url"].split("/")[2].split(":")[0] for r in structured.get("results", [])}


def category_verdict(category: str, structured: dict[str, Any]) -> str:
    """'' when the results come from every engine of the category and no other."""
    hosts = result_hosts(structured)
    expected = {HOSTS[e] for e in SERVED[category]}
    if not expected <= hosts:
        return f"{category}: no result of {sorted(expected - hosts)}"
    stray = hosts & (set(HOSTS.values()) - expected)
    if stray:
        return f"{category}: results of engines that do not serve it: {sorted(stray)}"
    return ""


def _search(category: str) -> bytes:
    arguments = {"query": "rust", "category": category, "max_results": 20}
    call = messages.modern("tools/call", name="web_search", arguments=arguments)
    return json.dumps(call).encode() + b"\n"


async def category_cases() -> list[tuple[str, str]]:
    """(case name, '' or why it failed) for each category, each in a fresh process."""
    out: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as folder:
        async with serve_http(replay_routes()) as server:
            config = keyless_pointed_at(server.url, Path(folder) / "k.toml")
            for category in SERVED:
                argv = [sys.executable, "-m", "rypsok", "serve", "--config", str(config)]
                with trio.fail_after(CASE_TIMEOUT_S):
                    done = await trio.run_process(
                        argv, stdin=_search(category), capture_stdout=True,
                        capture_stderr=True, check=False, cwd=ROOT,
                    )  # fmt: skip
                out.append((f"tutorial-6-{category}", _verdict(category, done.stdout)))
    return out


def _verdict(category: str, stdout: bytes) -> str:
    lines = stdout.splitlines()
    if len(lines) != 1:
        return f"{len(lines)} lines on stdout, expected 1"
    try:
        structured = json.loads(lines[0])["result"]["structuredContent"]
    except (ValueError, KeyError, TypeError):
        return "the answer is not a web_search result"
    return category_verdict(category, structured)
