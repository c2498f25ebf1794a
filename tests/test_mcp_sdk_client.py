"""The official MCP Python SDK client drives rypsok over stdio in each of its modes.

`auto` probes with server/discover and stays modern; `legacy` performs the initialize
handshake (the SDK offers 2025-11-25); `2026-07-28` pins the modern revision without a
probe. In every mode the client validates structuredContent against the tools' output
schemas itself (it raises when a result does not conform).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pytest
import trio
from mcp import Client, StdioServerParameters
from stdio_process import ROOT, launch_argv, write_config

from rypsok.mcp.protocol.tools import INSTRUCTIONS
from testkit.mediawiki import FixtureWiki

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(
    ("mode", "revision"),
    [("auto", "2026-07-28"), ("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")],
)
async def test_req_mcp_006_sdk_client_lists_and_calls_the_tools(
    tmp_path: Path, mode: str, revision: str
) -> None:
    async with trio.open_nursery() as nursery:
        wiki = FixtureWiki()
        port = await nursery.start(wiki.serve)
        argv = launch_argv(write_config(tmp_path), port)
        params = StdioServerParameters(command=sys.executable, args=argv[1:], cwd=ROOT)
        async with Client(params, mode=mode) as client:
            assert client.protocol_version == revision
            if mode != "2026-07-28":  # a pinned client skips discovery
                assert client.instructions == INSTRUCTIONS
                assert client.server_info is not None
                assert client.server_info.name == "rypsok"
            listed = await client.list_tools()
            assert [t.name for t in listed.tools] == ["web_search", "web_fetch", "engine_status"]
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
            assert status.structured_content is not None
            assert [e["id"] for e in status.structured_content["engines"]] == ["wikipedia"]
            refused = await client.call_tool("web_search", {"query": "x", "max_results": 99})
            assert refused.is_error is True
            assert refused.structured_content is not None
            assert refused.structured_content["error"]["kind"] == "invalid_request"
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_req_mcp_011_error_results_conform_to_the_output_schema_of_each_tool(
    tmp_path: Path, mode: str
) -> None:
    # The SDK validates only results without isError on its own; its validator is called
    # here on error results too, as a host that validates every structured content would.
    async with trio.open_nursery() as nursery:
        wiki = FixtureWiki()
        port = await nursery.start(wiki.serve)
        config = write_config(tmp_path, "[limits]\nweb_search_per_minute = 2\n")
        argv = launch_argv(config, port)
        params = StdioServerParameters(command=sys.executable, args=argv[1:], cwd=ROOT)
        async with Client(params, mode=mode) as client:
            await client.list_tools()
            calls = [
                ("web_search", {"query": "x", "max_results": 99}),  # detail: min, max
                ("web_search", {"query": "key AKIAIOSFODNN7EXAMPLE"}),  # reason, kind, position
                ("engine_status", {"verbose": True}),  # detail: nothing but the rule
                # The third search in a minute over a limit of two: reason, retry_after_ms.
                ("web_search", {"query": "rust programming language"}),
            ]
            kinds = []
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                assert result.is_error is True
                assert result.structured_content is not None
                await client.session.validate_tool_result(name, result)
                kinds.append(result.structured_content["error"]["kind"])
            assert kinds == ["invalid_request", "denied", "invalid_request", "unavailable"]
            limited = result
            # And the validator is no rubber stamp: an error object with a field the book does
            # not have is refused for both tools.
            forged = limited.model_copy(
                update={"structured_content": {"error": {"kind": "denied", "x": 1}}}
            )
            for name in ("web_search", "engine_status"):
                with pytest.raises(RuntimeError, match="Invalid structured content"):
                    await client.session.validate_tool_result(name, forged)
        nursery.cancel_scope.cancel()
