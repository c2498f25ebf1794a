"""What the five keyless drivers must all do, each through the real client and the real
pipeline: the response bound, the engine timeout, and a provider's wait seen in
engine_status."""

from __future__ import annotations

import gzip
from typing import Any

import pytest
import trio
from keyless_fakes import ask, outcome_of, query, recorded_json

from rypsok.config.schema import Config, EngineConfig, SearchConfig
from rypsok.core.engines.arxiv import ArxivEngine
from rypsok.core.engines.client import EngineClient
from rypsok.core.engines.crossref import CrossrefEngine
from rypsok.core.engines.hackernews import HackerNewsEngine
from rypsok.core.engines.searxng import SearxngEngine
from rypsok.core.engines.stackexchange import StackExchangeEngine
from rypsok.core.model import Category, DetailReason, EngineState, SearchRequest, ToolError
from rypsok.core.services import Rypsok
from testkit.servers import Reply, serve_http

# type, the path the driver asks under base_url, and how to build it on `url`.
DRIVERS: list[tuple[str, str, Any]] = [
    ("searxng", "/search", lambda http, url: SearxngEngine("e", http, url)),
    (
        "stackexchange",
        "/search/advanced",
        lambda http, url: StackExchangeEngine("e", http, base_url=url),
    ),
    ("arxiv", "/query", lambda http, url: ArxivEngine("e", http, base_url=url)),
    ("hackernews", "/search", lambda http, url: HackerNewsEngine("e", http, base_url=url)),
    ("crossref", "/works", lambda http, url: CrossrefEngine("e", http, base_url=url)),
]
IDS = [kind for kind, _, _ in DRIVERS]


def _asker(path: str, build: Any) -> Any:
    async def search(reply: Reply) -> Any:
        return await ask({path: reply}, build, query("rust"))

    return search


@pytest.mark.parametrize(("kind", "path", "build"), DRIVERS, ids=IDS)
async def test_req_sec_010_an_answer_above_the_bound_is_a_parse_failure(
    kind: str, path: str, build: Any
) -> None:
    async with EngineClient() as http:
        bound = build(http, "http://127.0.0.1:9").record.response_max_bytes
    over = Reply(body=b" " * (bound + 1))
    assert await outcome_of(_asker(path, build), over) == ("parse_failure", None)
    # A compressed answer expanding past the bound stops there too (a gzip bomb).
    bomb = Reply(headers=(("Content-Encoding", "gzip"),), body=gzip.compress(b" " * bound * 4))
    assert await outcome_of(_asker(path, build), bomb) == ("parse_failure", None)


@pytest.mark.parametrize(("kind", "path", "build"), DRIVERS, ids=IDS)
async def test_req_test_002_an_engine_that_does_not_answer_in_time_is_a_timeout(
    kind: str, path: str, build: Any
) -> None:
    async with serve_http({}, default=Reply(body=b"{}", delay_s=5)) as server:
        engine = EngineConfig(
            id="e", type=kind, categories=(Category.GENERAL,), base_url=server.url
        )
        config = Config(search=SearchConfig(engine_timeout_ms=100), engines=(engine,))
        async with Rypsok(config, env={}) as rypsok:
            start = trio.current_time()
            with pytest.raises(ToolError) as caught:
                await rypsok.search(SearchRequest(query="rust"))
            elapsed = trio.current_time() - start
    assert caught.value.detail.reason is DetailReason.DEADLINE
    assert elapsed < 1.5


async def test_req_res_002_a_stack_exchange_backoff_shows_the_engine_resting() -> None:
    payload = recorded_json(
        "stackexchange/search-advanced-q=java-filter=withbody.real-capture.json"
    ) | {"backoff": 30}
    body = Reply(headers=(("Content-Type", "application/json"),), body=_json(payload))
    async with serve_http({"/search/advanced": body}) as server:
        engine = EngineConfig(
            id="so", type="stackexchange", categories=(Category.CODE,), base_url=server.url
        )
        config = Config(engines=(engine,))
        async with Rypsok(config, env={}) as rypsok:
            first = await rypsok.search(SearchRequest(query="java", category="code"))
            with pytest.raises(ToolError):
                await rypsok.search(SearchRequest(query="java", category="code"))
            status = await rypsok.status()
            sent = len(server.requests)
    assert first.results
    assert sent == 1  # the second search waited as asked: nothing was sent
    (entry,) = status.engines
    assert entry.state is EngineState.OPEN


def _json(payload: Any) -> bytes:
    import json

    return json.dumps(payload).encode()
