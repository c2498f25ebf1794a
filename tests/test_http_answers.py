"""engine_status over HTTP: the encoding kept for an unchanged answer, the one scope that ends
a request (LIM-H5 or the peer gone), over real loopback sockets."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import trio
from http_helpers import (
    call_body,
    call_status,
    initialize_body,
    make_config,
    modern_headers,
    post,
    serving,
)

from rypsok.core.engines.base import EngineFailure
from rypsok.core.model import Reason
from rypsok.mcp.protocol import jsonrpc
from rypsok.shared.jsontext import canonical_json
from testkit.instant import ANSWER, InstantEngine

if TYPE_CHECKING:
    from rypsok.core.engines.base import EngineAnswer, EngineQuery


class SwitchableEngine(InstantEngine):
    """Answers at once, or fails with `failure` while it is set."""

    def __init__(self) -> None:
        super().__init__("wikipedia")
        self.failure: Reason | None = None

    async def search(self, query: EngineQuery) -> EngineAnswer:
        await trio.lowlevel.checkpoint()
        if self.failure is not None:
            raise EngineFailure(failure_class=self.failure)
        return ANSWER


def _engine(response: httpx.Response) -> dict[str, Any]:
    """The one engine of the answer, after checking that its two renderings agree."""
    assert response.status_code == 200
    result = response.json()["result"]
    structured = result["structuredContent"]
    assert result["content"][0]["text"] == canonical_json(structured)
    [engine] = structured["engines"]
    return dict(engine)


async def _search(client: httpx.AsyncClient, server: Any) -> None:
    response = await post(
        client, server, call_body("web_search", {"query": "rust"}),
        modern_headers("tools/call", "web_search"),
    )  # fmt: skip
    assert response.status_code == 200


async def test_req_obs_004_a_circuit_change_shows_in_the_next_engine_status_over_http() -> None:
    engine = SwitchableEngine()
    config = make_config("[resilience]\nfailures_to_open = 2\nfirst_cooldown_s = 60\n")
    async with serving(config, engine=engine) as server, httpx.AsyncClient() as client:
        first = _engine(await call_status(client, server))
        assert _engine(await call_status(client, server)) == first
        assert first["state"] == "closed"
        engine.failure = Reason.BLOCKED
        await _search(client, server)
        assert _engine(await call_status(client, server))["state"] == "closed"  # one failure
        await _search(client, server)
        opened = _engine(await call_status(client, server))
        assert opened["state"] == "open"
        assert _engine(await call_status(client, server)) == opened


async def test_req_obs_002_a_new_latency_shows_in_the_next_engine_status_over_http() -> None:
    engine = SwitchableEngine()
    async with serving(make_config(), engine=engine) as server, httpx.AsyncClient() as client:
        before = _engine(await call_status(client, server))
        assert before["latency_ms"] is None
        await _search(client, server)
        after = _engine(await call_status(client, server))
        assert isinstance(after["latency_ms"], int)
        assert after["state"] == "closed"


@pytest.mark.parametrize(
    "request_id",
    [0, -1, 7, 2**53 + 1, "", "a", 'quote " and back\\slash', "line\nbreak", "ünïcødé", "😀"],
)
async def test_req_mcp_003_every_id_is_echoed_in_the_encoding_of_any_other_answer(
    request_id: int | str,
) -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        body = json.dumps({**call_body("engine_status"), "id": request_id}).encode()
        headers = modern_headers("tools/call", "engine_status")
        for _ in range(2):  # the first answer is encoded afresh, the second reuses it
            response = await post(client, server, body, headers)
            assert response.status_code == 200
            reply = response.json()
            assert reply["id"] == request_id
            # Byte for byte what the protocol's own encoder writes for the same reply.
            assert response.content == jsonrpc.encode(reply)


async def test_req_mcp_003_each_revision_gets_its_own_engine_status_answer() -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        modern = (await call_status(client, server)).json()["result"]
        opened = await post(
            client, server, initialize_body("2025-03-26"),
            {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"},
        )  # fmt: skip
        session = opened.headers["mcp-session-id"]
        legacy = await post(
            client, server,
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "engine_status", "arguments": {}}},
            {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
             "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-03-26"},
        )  # fmt: skip
        again = (await call_status(client, server)).json()["result"]
    old = legacy.json()["result"]
    # 2025-03-26 has neither the result type of 2026-07-28 nor structured content.
    assert "resultType" not in old
    assert "structuredContent" not in old
    assert modern["resultType"] == "complete"
    assert "structuredContent" in modern
    assert again == modern
    assert old["content"] == modern["content"]
