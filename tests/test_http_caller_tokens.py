"""Callers over HTTP: each its own token and its own rate limits (LIM-C6..C8, REQ-SEC-019);
on loopback without callers every request is the caller `local`; the caller's id on every
log event of its calls. And a closed connection cancels its call (REQ-MCP-007, HTTP half).
"""

from __future__ import annotations

import json

import httpx
import pytest
import trio
from http_helpers import (
    CALLERS,
    CALLERS_ENV,
    TOKEN_A,
    TOKEN_B,
    SlowEngine,
    call_body,
    call_status,
    initialize_body,
    legacy_headers,
    make_config,
    modern_headers,
    post,
    serving,
    start_slow_search,
)
from search_fakes import capture_logs

from rypsok.config.load import ConfigError
from rypsok.core import telemetry
from rypsok.mcp.caller_tokens import Callers, bearer_token


@pytest.fixture(autouse=True)
def _fresh_counters() -> None:
    telemetry.COUNTERS.reset()


def _kind(response: httpx.Response) -> str | None:
    result = response.json()["result"]
    return (
        result["structuredContent"]["error"]["detail"].get("reason") if result["isError"] else None
    )


async def test_req_sec_019_one_caller_exhausting_its_limit_does_not_slow_another() -> None:
    config = make_config(CALLERS + "[limits]\nengine_status_per_minute = 2\n", CALLERS_ENV)
    with capture_logs() as logs:
        async with serving(config, CALLERS_ENV) as server, httpx.AsyncClient() as client:
            a = [await call_status(client, server, TOKEN_A, id=i) for i in range(3)]
            b = [await call_status(client, server, TOKEN_B, id=i) for i in range(2)]
    assert [_kind(r) for r in a] == [None, None, "rate_limited"]
    assert [_kind(r) for r in b] == [None, None]
    refused = logs.named("refused")
    assert [(e["caller"], e["reason"]) for e in refused] == [("alpha", "rate_limited")]


async def test_req_sec_019_search_limits_are_per_caller_too() -> None:
    config = make_config(CALLERS + "[limits]\nweb_search_per_minute = 1\n", CALLERS_ENV)
    body = call_body("web_search", {"query": "rust"})
    headers_a = modern_headers("tools/call", "web_search", TOKEN_A)
    headers_b = modern_headers("tools/call", "web_search", TOKEN_B)
    async with serving(config, CALLERS_ENV) as server, httpx.AsyncClient() as client:
        first_a = await post(client, server, body, headers_a)
        second_a = await post(client, server, body, headers_a)
        first_b = await post(client, server, body, headers_b)
    assert _kind(first_a) is None
    assert _kind(second_a) == "rate_limited"
    assert _kind(first_b) is None


async def test_req_cache_004_on_loopback_without_callers_every_request_is_local() -> None:
    with capture_logs() as logs:
        async with serving(make_config()) as server, httpx.AsyncClient() as client:
            plain = await call_status(client, server)
            # A token is not needed and not looked at: still the caller `local`.
            tokened = await call_status(client, server, "some-token-nobody-configured-xxxxxxxx")
    assert plain.status_code == tokened.status_code == 200
    calls = logs.named("call")
    assert [e["caller"] for e in calls] == ["local", "local"]
    assert logs.named("listening")[0]["callers"] == 0


async def test_req_obs_001_every_event_of_a_call_carries_its_caller() -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    body = call_body("web_search", {"query": "rust"})
    with capture_logs("debug") as logs:
        async with serving(config, CALLERS_ENV) as server, httpx.AsyncClient() as client:
            await post(client, server, body, modern_headers("tools/call", "web_search", TOKEN_B))
    inside = [e for e in logs.events() if "request_id" in e]
    assert inside
    assert {e["caller"] for e in inside} == {"beta"}
    assert logs.named("listening")[0]["callers"] == 2


async def test_req_sec_019_a_session_belongs_to_the_caller_that_opened_it() -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    async with serving(config, CALLERS_ENV) as server, httpx.AsyncClient() as client:
        opened = await client.post(
            server.url, content=json.dumps(initialize_body()), headers=legacy_headers(TOKEN_A)
        )
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"]}
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        mine = await client.post(server.url, json=ping, headers=legacy_headers(TOKEN_A, **session))
        theirs = await client.post(
            server.url, json=ping, headers=legacy_headers(TOKEN_B, **session)
        )
        ended = await client.delete(server.url, headers=legacy_headers(TOKEN_B, **session))
    assert mine.status_code == 200
    assert theirs.status_code == 404
    assert ended.status_code == 404


def test_req_sec_018_tokens_are_read_once_and_compared_whole() -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    callers = Callers.from_config(config, CALLERS_ENV)
    assert len(callers) == 2
    assert callers.identify(f"Bearer {TOKEN_A}".encode()) == "alpha"
    assert callers.identify(f"bearer   {TOKEN_B}".encode()) == "beta"
    assert callers.identify(None) is None
    assert callers.identify(b"Bearer ") is None
    assert callers.identify(f"Bearer {TOKEN_A} {TOKEN_B}".encode()) is None
    assert bearer_token(b"Token abc") is None
    assert "token-of-caller" not in repr(callers.tokens[0][0])
    with pytest.raises(ConfigError):
        Callers.from_config(config, {"RYPSOK_TOKEN_A": TOKEN_A})


async def test_req_mcp_007_a_closed_connection_cancels_its_call() -> None:
    """The client goes away mid-call: the call is cancelled, nothing answered; and (REQ-SEC-022)
    the request is not taken for one that outran its time, neither counted nor logged."""
    engine = SlowEngine("wikipedia", None)
    with capture_logs("debug") as logs:
        async with serving(make_config(), engine=engine) as server:
            before = telemetry.COUNTERS.snapshot()["http"].get("request_timeout", 0)
            async with httpx.AsyncClient() as client, trio.open_nursery() as nursery:
                await start_slow_search(nursery, client, server, engine)
                nursery.cancel_scope.cancel()  # the client goes away mid-call
            with trio.fail_after(5):
                await engine.cancelled.wait()
            with trio.fail_after(5):
                while server.listener.in_flight:  # noqa: ASYNC110 # a counter, no event
                    await trio.sleep(0.02)
            after = telemetry.COUNTERS.snapshot()["http"].get("request_timeout", 0)
    assert [e["transport"] for e in logs.named("call_cancelled")] == ["http"]
    assert logs.named("http_refused") == []
    assert after == before
