"""keyless.toml end to end: pointed at loopback servers replaying the recorded answers, a
web_search of each category returns that category's engines' results, through the real
console script over stdio."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio
from mcp_helpers import modern
from stdio_process import Child

from conformance.keyless import SERVED, category_cases, category_verdict
from testkit.keyless import keyless_pointed_at, replay_routes
from testkit.servers import serve_http

SCRIPT = Path(sys.executable).parent / "rypsok"


def _search(request_id: int, category: str) -> dict[str, Any]:
    return modern(
        "tools/call",
        request_id=request_id,
        name="web_search",
        arguments={"query": "rust", "category": category, "max_results": 20},
    )


async def test_req_search_004_each_category_is_answered_by_its_keyless_engines(
    tmp_path: Path,
) -> None:
    assert SCRIPT.exists(), "the console script is installed next to the interpreter"
    categories = list(SERVED)
    async with serve_http(replay_routes()) as server, trio.open_nursery() as nursery:
        config = keyless_pointed_at(server.url, tmp_path / "keyless.toml")
        child = await Child.start(nursery, [str(SCRIPT), "serve", "--config", str(config)])
        await child.send(*(_search(i + 1, c) for i, c in enumerate(categories)))
        await child.close_stdin()
        out = await child.rest_of_stdout(timeout_s=20)
        assert await child.wait() == 0
        nursery.cancel_scope.cancel()
        paths = {r.path for r in server.requests}
    answers = {a["id"]: a for a in map(json.loads, out.splitlines())}
    for i, category in enumerate(categories):
        structured = answers[i + 1]["result"]["structuredContent"]
        assert category_verdict(category, structured) == ""
        # Every provider's text went through the content boundary: the Stack Exchange
        # bodies' markup is gone, the entities decoded, each string bounded.
        for result in structured["results"]:
            for text in (result["title"], result["snippet"]):
                assert "<p>" not in text
                assert "&#" not in text
                assert "&quot;" not in text
            assert len(result["snippet"]) <= 300
            assert len(result["title"]) <= 150
        # The recorded SearXNG answer names two of its sources that did not answer it.
        assert structured["outcome"] == "partial", (category, structured)
        assert {"code": "engine_unavailable", "engine": "searxng", "count": 2} in structured[
            "notices"
        ]
    assert paths == set(replay_routes())


async def test_req_test_002_conformance_replays_a_search_per_category() -> None:
    assert await category_cases() == [
        (f"tutorial-6-{category}", "") for category in ("general", "news", "science", "code")
    ]
