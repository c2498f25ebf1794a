"""The official MCP Python SDK client drives rypsok over Streamable HTTP, with a bearer token.

`auto` probes with server/discover and stays on 2026-07-28; `legacy` opens a handshake session
(Mcp-Session-Id, ended by DELETE when the client closes); `2026-07-28` pins the revision.
In every mode the client checks structuredContent against the tools' output schemas itself.
"""

from __future__ import annotations

import pytest
import trio
from http_helpers import CALLERS, CALLERS_ENV, TOKEN_A, make_config, serving
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from search_fakes import capture_logs

from rypsok.mcp.protocol.tools import INSTRUCTIONS


@pytest.mark.parametrize(
    ("mode", "revision"),
    [("auto", "2026-07-28"), ("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")],
)
async def test_req_mcp_003_sdk_client_lists_and_calls_over_http_with_a_token(
    mode: str, revision: str
) -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    with capture_logs() as logs:
        async with serving(config, CALLERS_ENV) as server:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN_A}"})
            async with (
                http,
                Client(streamable_http_client(server.url, http_client=http), mode=mode) as client,
            ):
                assert client.protocol_version == revision
                if mode != "2026-07-28":
                    assert client.instructions == INSTRUCTIONS
                    assert client.server_info is not None
                    assert client.server_info.name == "rypsok"
                listed = await client.list_tools()
                assert [t.name for t in listed.tools] == [
                    "web_search",
                    "web_fetch",
                    "engine_status",
                ]
                assert all(t.output_schema is not None for t in listed.tools)
                found = await client.call_tool(
                    "web_search", {"query": "rust programming language", "max_results": 5}
                )
                assert found.is_error is False
                assert found.structured_content is not None
                titles = [r["title"] for r in found.structured_content["results"]]
                assert titles == ["Rust (programming language)", "Rust & Bone"]
                status = await client.call_tool("engine_status", {})
                assert status.is_error is False
                refused = await client.call_tool("web_search", {"query": "x", "max_results": 99})
                assert refused.is_error is True
                assert refused.structured_content is not None
                assert refused.structured_content["error"]["kind"] == "invalid_request"
                if mode == "legacy":
                    assert len(server.listener.app.sessions) == 1
            if mode == "legacy":
                # The client ends its session with DELETE when it closes.
                with trio.fail_after(5):
                    while len(server.listener.app.sessions):  # noqa: ASYNC110 # a table, no event
                        await trio.sleep(0.02)
    calls = logs.named("call")
    assert calls
    assert {e["caller"] for e in calls} == {"alpha"}
    assert TOKEN_A not in logs.text


async def test_req_sec_018_sdk_client_without_the_token_is_refused() -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    async with serving(config, CALLERS_ENV) as server:
        http = create_mcp_http_client()
        with pytest.raises(Exception):  # noqa: B017, PT011 # the SDK's own error for a 401
            async with (
                http,
                Client(
                    streamable_http_client(server.url, http_client=http), mode="2026-07-28"
                ) as client,
            ):
                await client.list_tools()
