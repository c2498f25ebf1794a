"""keyless.toml's engines replayed from one loopback server: the recorded answers per path,
and the file with every engine's base_url pointed at that server (Tutorial 6's replay in the
harness, and the end-to-end tests).

The recorded answers are the drivers' test data (`tests/data/engines/`, with their sources).
"""

from __future__ import annotations

import re
from pathlib import Path

from testkit.servers import Reply

__all__ = ["ANSWERS", "PREFIXES", "keyless_pointed_at", "replay_routes"]

ROOT = Path(__file__).resolve().parent.parent
KEYLESS = ROOT / "examples" / "configs" / "keyless.toml"
RECORDED = ROOT / "tests" / "data" / "engines"
WIKI = ROOT / "tests" / "fixtures" / "wikipedia-search-rust.json"

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


def replay_routes() -> dict[str, Reply]:
    """`testkit.servers.serve_http`'s routes answering each recorded path (others: 404)."""
    return {
        path: Reply(headers=(("Content-Type", kind),), body=file.read_bytes())
        for path, (kind, file) in ANSWERS.items()
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
