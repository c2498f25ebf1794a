"""keyless.toml pointed at one loopback server that replays every engine's recorded answer.

Used by the end-to-end test and the conformance harness's replayed searches: each engine's
`base_url` is set to its own path prefix on the local server; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import re
from pathlib import Path

from keyless_fakes import recorded
from servers import Reply

ROOT = Path(__file__).resolve().parent.parent
KEYLESS = ROOT / "examples" / "configs" / "keyless.toml"
WIKI = Path(__file__).parent / "fixtures" / "wikipedia-search-rust.json"

# Per engine id of keyless.toml: its path prefix on the replay server and the recorded answer.
PREFIXES = {
    "wikipedia": "/w",
    "searxng": "/sx",
    "hackernews": "/hn/api/v1",
    "arxiv": "/ax/api",
    "crossref": "/cr",
    "stackoverflow": "/se/2.3",
}
JSON = (("Content-Type", "application/json"),)


def replay_routes() -> dict[str, Reply]:
    return {
        "/w/api.php": Reply(headers=JSON, body=WIKI.read_bytes()),
        "/sx/search": Reply(
            headers=JSON, body=recorded("searxng/search-format=json.assembled.json")
        ),
        "/hn/api/v1/search": Reply(
            headers=JSON, body=recorded("hackernews/search-query=javascript.real-capture.json")
        ),
        "/ax/api/query": Reply(
            headers=(("Content-Type", "application/atom+xml"),),
            body=recorded("arxiv/query-au=gariazzo.real-capture.xml"),
        ),
        "/cr/works": Reply(
            headers=JSON, body=recorded("crossref/works-work-list.real-capture.abridged.json")
        ),
        "/se/2.3/search/advanced": Reply(
            headers=JSON,
            body=recorded("stackexchange/search-advanced-q=java-filter=withbody.real-capture.json"),
        ),
    }


def keyless_pointed_at(server_url: str, target: Path) -> Path:
    """keyless.toml with every engine's base_url on `server_url`, written to `target`."""
    text = KEYLESS.read_text(encoding="utf-8")
    text = re.sub(r'(?m)^base_url = ".*"\n', "", text)
    for engine_id, prefix in PREFIXES.items():
        header = f"[engines.{engine_id}]\n"
        assert header in text, engine_id
        text = text.replace(header, f'{header}base_url = "{server_url}{prefix}"\n')
    target.write_text(text, encoding="utf-8")
    return target
