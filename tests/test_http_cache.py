"""The result cache over HTTP: keyed by the authenticated caller (REQ-CACHE-004, REQ-TEST-010).

Two callers with their own bearer tokens search the same query through one listener on a
real loopback socket: one caller's cached answer is never served to the other, each
caller's own repeat is a hit (the notice `from_cache`, no engine request).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import httpx
from http_helpers import (
    CALLERS,
    CALLERS_ENV,
    TOKEN_A,
    TOKEN_B,
    call_body,
    make_config,
    modern_headers,
    post,
    serving,
)

from testkit.instant import RECORD, InstantEngine

if TYPE_CHECKING:
    from rypsok.core.engines.base import AdmissionRecord, EngineAnswer, EngineQuery

CACHE = "[cache]\nenabled = true\n"


class CountingEngine(InstantEngine):
    """Answers at once, counts the requests it receives; its record allows storage."""

    def __init__(self, engine_id: str) -> None:
        super().__init__(engine_id)
        self.queries: list[str] = []

    @property
    def record(self) -> AdmissionRecord:
        return attrs.evolve(RECORD, cacheable=True)

    async def search(self, query: EngineQuery) -> EngineAnswer:
        self.queries.append(query.query)
        return await super().search(query)


async def _search(client: httpx.AsyncClient, server: Any, token: str) -> dict[str, Any]:
    response = await post(
        client,
        server,
        call_body("web_search", {"query": "rust"}),
        modern_headers("tools/call", "web_search", token),
    )
    assert response.status_code == 200
    result: dict[str, Any] = response.json()["result"]["structuredContent"]
    return result


def _from_cache(result: dict[str, Any]) -> list[str]:
    return [n["engine"] for n in result["notices"] if n["code"] == "from_cache"]


async def test_req_test_010_one_callers_cached_answer_is_never_served_to_another() -> None:
    engine = CountingEngine("wikipedia")
    config = make_config(CALLERS + CACHE, CALLERS_ENV)
    async with (
        serving(config, CALLERS_ENV, engine=engine) as server,
        httpx.AsyncClient(trust_env=False) as client,
    ):
        first_a = await _search(client, server, TOKEN_A)
        first_b = await _search(client, server, TOKEN_B)
        again_a = await _search(client, server, TOKEN_A)
        again_b = await _search(client, server, TOKEN_B)
    # Each caller's first search asked the engine; only each caller's own repeat was a hit.
    assert engine.queries == ["rust", "rust"]
    assert _from_cache(first_a) == []
    assert _from_cache(first_b) == []
    assert _from_cache(again_a) == ["wikipedia"]
    assert _from_cache(again_b) == ["wikipedia"]
    assert again_a["results"] == first_a["results"]


async def test_req_cache_001_over_http_the_cache_is_off_by_default() -> None:
    engine = CountingEngine("wikipedia")
    config = make_config(CALLERS, CALLERS_ENV)
    async with (
        serving(config, CALLERS_ENV, engine=engine) as server,
        httpx.AsyncClient(trust_env=False) as client,
    ):
        await _search(client, server, TOKEN_A)
        again = await _search(client, server, TOKEN_A)
    assert engine.queries == ["rust", "rust"]
    assert _from_cache(again) == []
