"""The web_fetch tool over stdio (in process, memory streams) on the real service."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
import trio.testing
from fetch_helpers import Authority, fetch_config, fetching_rypsok
from fetch_sites import Page, serve_site
from mcp_helpers import modern

from rypsok.mcp.stdio import serve_stdio

ROOT = Path(__file__).resolve().parent.parent
CALLS = ROOT / "conformance" / "calls"
RUST_PAGE = (ROOT / "testkit" / "fixtures" / "rust-ownership.html").read_text(encoding="utf-8")


async def exchange(rypsok: Any, config: Any, messages: list[dict[str, Any]]) -> list[Any]:
    in_send, in_recv = trio.testing.memory_stream_one_way_pair()
    out_send, out_recv = trio.testing.memory_stream_one_way_pair()
    answers: list[Any] = []
    async with rypsok, trio.open_nursery() as nursery:
        nursery.start_soon(lambda: serve_stdio(rypsok, config, stdin=in_recv, stdout=out_send))
        buffer = b""
        for message in messages:
            await in_send.send_all(json.dumps(message).encode() + b"\n")
            while b"\n" not in buffer:
                buffer += await out_recv.receive_some(65536)
            line, buffer = buffer.split(b"\n", 1)
            answers.append(json.loads(line))
        await in_send.aclose()
    return answers


async def test_req_fetch_001_req_mcp_011_the_books_calls_over_stdio() -> None:
    authority = Authority()
    routes = {
        "/rust-ownership": Page.html(RUST_PAGE),
        "/robots.txt": Page.text("User-agent: *\nAllow: /\n"),
    }
    cases = [json.loads((CALLS / f"{name}.json").read_text()) for name in (
        "web-fetch", "web-fetch-continuation-1", "web-fetch-continuation-2",
        "web-fetch-denied-egress",
    )]  # fmt: skip
    async with serve_site(routes, tls=authority.server_context("example.org")) as site:
        config = fetch_config()
        rypsok, _, _ = fetching_rypsok(config, {"example.org": site}, authority=authority)
        answers = await exchange(rypsok, config, [case["request"] for case in cases])
    for case, answer in zip(cases, answers, strict=True):
        assert answer == case["response"]
        expected_text = case["response"]["result"]["content"][0]["text"]
        assert answer["result"]["content"][0]["text"] == expected_text


async def test_req_mcp_004_web_fetch_arguments_are_checked_before_any_request() -> None:
    config = fetch_config()
    rypsok, network_backend, _ = fetching_rypsok(config, {})
    url = "https://a.org/"
    arguments: list[dict[str, Any]] = [
        {},
        {"url": 7},
        {"url": url, "max_chars": "9"},
        {"url": url, "x": 1},
        {"url": url, "start_char": 2.5},
    ]
    messages = [modern("tools/list", request_id=1)] + [
        modern("tools/call", request_id=2 + i, name="web_fetch", arguments=a)
        for i, a in enumerate(arguments)
    ]
    answers = await exchange(rypsok, config, messages)
    tools = {t["name"]: t for t in answers[0]["result"]["tools"]}
    schema = tools["web_fetch"]["inputSchema"]
    assert schema["required"] == ["url"]
    assert schema["properties"]["max_chars"] == {
        "type": "integer", "minimum": 500, "maximum": 20000, "default": 3000,
    }  # fmt: skip
    assert tools["web_fetch"]["annotations"]["openWorldHint"] is True
    assert (
        "Scripts are not run and meta refresh is not followed" in tools["web_fetch"]["description"]
    )
    for answer in answers[1:]:
        result = answer["result"]
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["kind"] == "invalid_request"
    parameters = [
        a["result"]["structuredContent"]["error"]["detail"].get("parameter") for a in answers[1:]
    ]
    assert parameters == ["url", "url", "max_chars", "x", "start_char"]
    unknown = answers[4]["result"]["structuredContent"]["error"]["detail"]
    assert unknown["allowed"] == ["url", "max_chars", "start_char"]
    assert network_backend.attempts == []
