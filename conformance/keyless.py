"""Tutorial 6 replayed: a web_search of each category with `examples/configs/keyless.toml`,
its engines pointed at one loopback server that replays their recorded answers.

The recorded answers are the drivers' test data (`tests/data/engines/`, with their sources).
Each category is searched in a fresh process as a host starts it; the case passes when the
results come from every engine serving that category and from no other.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent
KEYLESS = ROOT / "examples" / "configs" / "keyless.toml"
RECORDED = ROOT / "tests" / "data" / "engines"
WIKI = ROOT / "tests" / "fixtures" / "wikipedia-search-rust.json"
CASE_TIMEOUT_S = 20

_JSON = "application/json"
# Per engine id of keyless.toml: its path prefix on the replay server.
PREFIXES = {
    "wikipedia": "/w",
    "searxng": "/sx",
    "hackernews": "/hn/api/v1",
    "arxiv": "/ax/api",
    "crossref": "/cr",
    "stackoverflow": "/se/2.3",
}
# Per path the driver asks: the content type and the recorded answer.
ANSWERS: dict[str, tuple[str, Path]] = {
    "/w/api.php": (_JSON, WIKI),
    "/sx/search": (_JSON, RECORDED / "searxng" / "search-format=json.assembled.json"),
    "/hn/api/v1/search": (
        _JSON,
        RECORDED / "hackernews" / "search-query=javascript.real-capture.json",
    ),
    "/ax/api/query": (
        "application/atom+xml",
        RECORDED / "arxiv" / "query-au=gariazzo.real-capture.xml",
    ),
    "/cr/works": (_JSON, RECORDED / "crossref" / "works-work-list.real-capture.abridged.json"),
    "/se/2.3/search/advanced": (
        _JSON,
        RECORDED / "stackexchange" / "search-advanced-q=java-filter=withbody.real-capture.json",
    ),
}
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


def keyless_pointed_at(server_url: str, target: Path) -> Path:
    """keyless.toml with every engine's base_url on `server_url`, written to `target`."""
    text = KEYLESS.read_text(encoding="utf-8")
    text = re.sub(r'(?m)^base_url = ".*"\n', "", text)
    for engine_id, prefix in PREFIXES.items():
        header = f"[engines.{engine_id}]\n"
        if header not in text:
            raise ValueError(f"keyless.toml has no engine {engine_id}")
        text = text.replace(header, f'{header}base_url = "{server_url}{prefix}"\n')
    target.write_text(text, encoding="utf-8")
    return target


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


class ReplayServer:
    """HTTP/1.1 on 127.0.0.1 answering each recorded path, one request per connection."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._connection, listeners)
            task_status.started(port)

    async def _connection(self, stream: trio.SocketStream) -> None:
        buffer = b""
        try:
            while b"\r\n\r\n" not in buffer and len(buffer) < 65536:
                data = await stream.receive_some(65536)
                if not data:
                    return
                buffer += data
            target = buffer.split(b" ", 2)[1].decode("ascii", "replace")
            path = target.split("?", 1)[0]
            self.paths.append(path)
            if path not in ANSWERS:
                await stream.send_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
                return
            kind, file = ANSWERS[path]
            body = file.read_bytes()
            await stream.send_all(
                f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + body
            )
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await stream.aclose()


def _search(category: str) -> bytes:
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "web_search",
            "arguments": {"query": "rust", "category": category, "max_results": 20},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    return json.dumps(call).encode() + b"\n"


async def category_cases() -> list[tuple[str, str]]:
    """(case name, '' or why it failed) for each category, each in a fresh process."""
    server = ReplayServer()
    out: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as folder:
        async with trio.open_nursery() as nursery:
            port = await nursery.start(server.serve)
            config = keyless_pointed_at(f"http://127.0.0.1:{port}", Path(folder) / "k.toml")
            for category in SERVED:
                argv = [sys.executable, "-m", "rypsok", "serve", "--config", str(config)]
                with trio.fail_after(CASE_TIMEOUT_S):
                    done = await trio.run_process(
                        argv, stdin=_search(category), capture_stdout=True,
                        capture_stderr=True, check=False, cwd=ROOT,
                    )  # fmt: skip
                out.append((f"tutorial-6-{category}", _verdict(category, done.stdout)))
            nursery.cancel_scope.cancel()
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
