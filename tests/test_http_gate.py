"""The listener's status table (external design §2), row by row, over a real loopback socket.

Each row is what the book says answers it: the gate (401, 404, 408, 413, 503) before any
JSON is read, then the protocol statuses (400, 403, 406, 415) and the 200 of an unknown tool.
Refusals are logged as http_refused with the reason and the address family only, and counted.
"""

from __future__ import annotations

import base64
import json

import httpx
import pytest
import trio
from http_helpers import (
    ACCEPT,
    CALLERS,
    CALLERS_ENV,
    TOKEN_A,
    TOKEN_B,
    call_body,
    call_status,
    http_counts,
    initialize_body,
    legacy_headers,
    make_config,
    modern_body,
    modern_headers,
    post,
    raw_exchange,
    serving,
)
from search_fakes import capture_logs

from rypsok.core import telemetry


@pytest.fixture(autouse=True)
def _fresh_counters() -> None:
    telemetry.COUNTERS.reset()


def _error(response: httpx.Response) -> dict:
    return response.json()["error"]


async def test_req_mcp_003_the_curl_call_of_tutorial_4_is_answered_over_http() -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        response = await call_status(client, server)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    result = response.json()["result"]
    assert result["isError"] is False
    assert result["structuredContent"]["engines"][0]["id"] == "wikipedia"
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


# -- 401 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer wrong-token-wrong-token-wrong-token-x",
        f"Basic {TOKEN_A}",
        "Bearer",
        f"{TOKEN_A}",
    ],
)
async def test_req_sec_018_a_missing_or_wrong_token_is_401(authorization: str | None) -> None:
    headers = modern_headers("tools/call", "engine_status")
    if authorization is not None:
        headers["Authorization"] = authorization
    config = make_config(CALLERS, CALLERS_ENV)
    with capture_logs() as logs:
        async with serving(config, CALLERS_ENV) as server, httpx.AsyncClient() as client:
            response = await post(client, server, call_body("engine_status"), headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert logs.named("call") == []  # the call never ran
    refused = logs.named("http_refused")
    assert refused == [{**refused[0], "reason": "unauthorized", "family": "ipv4"}]
    assert "127.0.0.1" not in json.dumps(refused)
    assert TOKEN_A not in logs.text
    assert http_counts() == {"unauthorized": 1}


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
async def test_req_sec_018_the_bearer_scheme_is_case_insensitive(scheme: str) -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    headers = modern_headers("tools/call", "engine_status", Authorization=f"{scheme} {TOKEN_A}")
    async with serving(config, CALLERS_ENV) as server, httpx.AsyncClient() as client:
        response = await post(client, server, call_body("engine_status"), headers)
    assert response.status_code == 200


async def test_req_sec_018_a_token_prefix_or_extension_is_401() -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    async with serving(config, CALLERS_ENV) as server, httpx.AsyncClient() as client:
        for token in (TOKEN_A[:-1], TOKEN_A + "A", TOKEN_A.upper()):
            response = await call_status(client, server, token)
            assert response.status_code == 401


# -- 404 / 405 --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/mcp/", "/MCP", "/sse", "/messages", "/mcp/x"])
async def test_req_sec_018_another_path_is_404(path: str) -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        response = await client.post(
            f"http://{server.host}{path}",
            content=json.dumps(call_body("engine_status")),
            headers=modern_headers("tools/call", "engine_status"),
        )
    assert response.status_code == 404
    assert http_counts() == {"not_found": 1}


async def test_req_mcp_003_no_get_stream_and_no_http_sse_endpoint() -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        got = await client.get(server.url, headers={"Accept": "text/event-stream"})
        sse = await client.get(f"http://{server.host}/sse")
    assert got.status_code == 405
    assert "POST" in got.headers["allow"]
    assert sse.status_code == 404


# -- 413 ------------------------------------------------------------------------------------


async def test_req_sec_018_a_declared_body_above_the_limit_is_413() -> None:
    config = make_config("[service.http]\nmax_request_bytes = 4096\n")
    body = json.dumps(call_body("web_search", {"query": "x" * 5000})).encode()
    with capture_logs() as logs:
        async with serving(config) as server, httpx.AsyncClient() as client:
            response = await post(client, server, body, modern_headers("tools/call", "web_search"))
    assert response.status_code == 413
    assert [(e["reason"], e["family"]) for e in logs.named("http_refused")] == [
        ("body_too_large", "ipv4")
    ]
    assert logs.named("call") == []


async def test_req_sec_018_a_streamed_body_above_the_limit_is_413() -> None:
    config = make_config("[service.http]\nmax_request_bytes = 4096\n")

    async def chunks():  # no Content-Length: chunked transfer coding
        for _ in range(10):
            yield b" " * 1000

    async with serving(config) as server, httpx.AsyncClient() as client:
        response = await client.post(
            server.url, content=chunks(), headers=modern_headers("tools/call", "web_search")
        )
    assert response.status_code == 413
    assert http_counts() == {"body_too_large": 1}


async def test_req_sec_018_a_body_at_the_limit_is_served() -> None:
    config = make_config("[service.http]\nmax_request_bytes = 4096\n")
    body = json.dumps(call_body("engine_status")).encode()
    body = body[:-1] + b" " * (4096 - len(body)) + b"}"
    assert len(body) == 4096
    async with serving(config) as server, httpx.AsyncClient() as client:
        response = await post(client, server, body, modern_headers("tools/call", "engine_status"))
    assert response.status_code == 200


# -- 408 ------------------------------------------------------------------------------------


async def test_req_sec_022_a_request_outliving_the_request_time_is_408() -> None:
    config = make_config(request_timeout_s=1)
    head = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: " + ACCEPT.encode() + b"\r\nContent-Length: 500\r\n\r\n{"
    )
    with capture_logs() as logs:
        async with serving(config) as server:
            stream = await trio.open_tcp_stream("127.0.0.1", server.port)
            start = trio.current_time()
            await stream.send_all(head)
            received = b""
            with trio.fail_after(5):
                while b"\r\n\r\n" not in received:
                    # A byte every 0.2 s: the body trickles but never completes in time.
                    with trio.move_on_after(0.2):
                        received += await stream.receive_some(65536)
                    if b"\r\n\r\n" not in received:
                        await stream.send_all(b" ")
            elapsed = trio.current_time() - start
            await stream.aclose()
    assert received.startswith(b"HTTP/1.1 408 ")
    assert 0.9 <= elapsed < 4
    assert [e["reason"] for e in logs.named("http_refused")] == ["request_timeout"]


async def test_req_sec_022_a_call_outliving_the_request_time_is_408_and_cancelled() -> None:
    from http_helpers import SlowEngine

    engine = SlowEngine("wikipedia", None)
    config = make_config(request_timeout_s=1)
    async with serving(config, engine=engine) as server, httpx.AsyncClient() as client:
        response = await post(
            client, server, call_body("web_search", {"query": "rust"}),
            modern_headers("tools/call", "web_search"),
        )  # fmt: skip
        assert response.status_code == 408
        assert engine.started.is_set()
        with trio.fail_after(2):
            await engine.cancelled.wait()
    assert http_counts() == {"request_timeout": 1}


# -- 503 and sessions -----------------------------------------------------------------------


async def _initialize(client: httpx.AsyncClient, url: str, **headers: str) -> httpx.Response:
    return await client.post(
        url, content=json.dumps(initialize_body()), headers=legacy_headers(**headers)
    )


async def test_req_sec_024_a_handshake_beyond_max_sessions_is_503_with_retry_after() -> None:
    config = make_config("[service.http]\nmax_sessions = 2\n")
    with capture_logs() as logs:
        async with serving(config) as server, httpx.AsyncClient() as client:
            first = await _initialize(client, server.url)
            second = await _initialize(client, server.url)
            third = await _initialize(client, server.url)
            assert first.status_code == second.status_code == 200
            assert third.status_code == 503
            assert third.headers["retry-after"] == "30"
            assert "mcp-session-id" not in third.headers
            # The 2026-07-28 revision keeps no session and is still served.
            assert (await call_status(client, server)).status_code == 200
            # DELETE ends a session and frees its slot.
            ended = await client.delete(
                server.url, headers={"Mcp-Session-Id": first.headers["mcp-session-id"]}
            )
            assert ended.status_code == 204
            assert (await _initialize(client, server.url)).status_code == 200
    assert [e["reason"] for e in logs.named("http_refused")] == ["session_limit"]


# The sessions' expiry and renewal by traffic: tests/test_http_sessions.py, on MockClock.


async def test_req_mcp_003_a_handshake_session_lists_and_calls() -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        opened = await _initialize(client, server.url)
        assert opened.json()["result"]["protocolVersion"] == "2025-11-25"
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"]}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        acked = await client.post(server.url, json=note, headers=legacy_headers(**session))
        assert acked.status_code == 202
        headers = legacy_headers(**session, **{"MCP-Protocol-Version": "2025-11-25"})
        listed = await client.post(
            server.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers
        )
        assert [t["name"] for t in listed.json()["result"]["tools"]] == [
            "web_search",
            "web_fetch",
            "engine_status",
        ]
        called = await client.post(
            server.url,
            json={"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                  "params": {"name": "engine_status", "arguments": {}}},
            headers=headers,
        )  # fmt: skip
        assert called.json()["result"]["isError"] is False
        wrong = await client.post(
            server.url,
            json={"jsonrpc": "2.0", "id": 4, "method": "ping"},
            headers=legacy_headers(**session, **{"MCP-Protocol-Version": "2025-06-18"}),
        )
        assert wrong.status_code == 400


async def test_req_mcp_006_legacy_revisions_off_refuses_the_handshake() -> None:
    config = make_config("[service.http]\nlegacy_revisions = false\n")
    async with serving(config) as server, httpx.AsyncClient() as client:
        refused = await _initialize(client, server.url)
        modern = await call_status(client, server)
    assert refused.status_code == 400
    assert _error(refused)["code"] == -32022
    assert "mcp-session-id" not in refused.headers
    assert modern.status_code == 200


# -- 400 --------------------------------------------------------------------------------------


def _without(headers: dict[str, str], name: str) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k != name}


_STATUS = modern_headers("tools/call", "engine_status")
_B64_OTHER = "=?base64?" + base64.b64encode(b"web_search").decode() + "?="


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        (_without(_STATUS, "MCP-Protocol-Version"), "missing"),
        ({**_STATUS, "MCP-Protocol-Version": "2025-11-25"}, "version"),
        (_without(_STATUS, "Mcp-Method"), "missing"),
        (modern_headers("tools/list", "engine_status"), "method"),
        (modern_headers("Tools/Call", "engine_status"), "method"),  # values are case-sensitive
        (modern_headers("tools/call"), "missing"),
        (modern_headers("tools/call", "web_search"), "name"),
        (modern_headers("tools/call", _B64_OTHER), "name"),
        (modern_headers("tools/call", "=?base64?not base64!?="), "base64"),
        ({**modern_headers("tools/call"), "Mcp-Name": "engine_status\u00e9".encode()}, "ascii"),
    ],
)  # fmt: skip
async def test_req_mcp_003_a_missing_or_disagreeing_protocol_header_is_400(
    headers: dict[str, str | bytes], why: str
) -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        response = await post(client, server, call_body("engine_status"), headers)
    assert response.status_code == 400, why
    assert _error(response)["code"] == -32020
    assert response.json()["id"] == 1
    assert http_counts() == {"sdk_bad_request": 1}


async def test_req_mcp_003_a_base64_mcp_name_is_decoded_before_comparing() -> None:
    encoded = "=?base64?" + base64.b64encode(b"engine_status").decode() + "?="
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        response = await post(
            client, server, call_body("engine_status"), modern_headers("tools/call", encoded)
        )
    assert response.status_code == 200
    assert response.json()["result"]["isError"] is False


async def test_req_mcp_003_a_handshake_era_post_without_its_session_is_400() -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        for method in ("tools/list", "ping", "tools/call"):
            response = await client.post(
                server.url,
                json={"jsonrpc": "2.0", "id": 5, "method": method},
                headers=legacy_headers(),
            )
            assert response.status_code == 400
            assert response.json()["id"] == 5
        unknown = await client.post(
            server.url,
            json={"jsonrpc": "2.0", "id": 6, "method": "ping"},
            headers=legacy_headers(**{"Mcp-Session-Id": "no-such-session"}),
        )
    assert unknown.status_code == 404


async def test_req_mcp_006_an_unsupported_version_is_400_with_the_supported_list() -> None:
    body = call_body("engine_status")
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2099-01-01"
    headers = modern_headers(
        "tools/call", "engine_status", **{"MCP-Protocol-Version": "2099-01-01"}
    )
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        response = await post(client, server, body, headers)
    assert response.status_code == 400
    assert _error(response)["code"] == -32022
    assert "2026-07-28" in _error(response)["data"]["supported"]


# -- 403 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8737", "127.0.0.1.evil.example", "localhost.evil", ""]
)
async def test_req_sec_018_a_foreign_host_is_403_dns_rebinding(host: str) -> None:
    with capture_logs() as logs:
        async with serving(make_config()) as server, httpx.AsyncClient() as client:
            response = await call_status_with(client, server, Host=host)
    assert response.status_code == 403
    assert [(e["reason"], e["family"]) for e in logs.named("http_refused")] == [
        ("sdk_forbidden", "ipv4")
    ]
    assert host == "" or host not in logs.text


async def call_status_with(client: httpx.AsyncClient, server, **headers: str) -> httpx.Response:
    return await post(
        client, server, call_body("engine_status"),
        modern_headers("tools/call", "engine_status", **headers),
    )  # fmt: skip


async def test_req_sec_018_loopback_names_and_the_bind_address_are_the_default_hosts() -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        for host in ("localhost", f"localhost:{server.port}", "127.0.0.1", server.host,
                     f"[::1]:{server.port}", "LOCALHOST"):  # fmt: skip
            response = await call_status_with(client, server, Host=host)
            assert response.status_code == 200, host


async def test_req_sec_018_allowed_hosts_replace_the_default() -> None:
    config = make_config(
        '[service.http]\nallowed_hosts = ["rypsok.example", "rypsok.example:443"]\n'
    )
    async with serving(config) as server, httpx.AsyncClient() as client:
        good = await call_status_with(client, server, Host="rypsok.example:443")
        plain = await call_status_with(client, server, Host="Rypsok.Example")
        loopback = await call_status_with(client, server, Host="localhost")
        other_port = await call_status_with(client, server, Host="rypsok.example:8443")
    assert (good.status_code, plain.status_code) == (200, 200)
    assert (loopback.status_code, other_port.status_code) == (403, 403)


@pytest.mark.parametrize(
    "origin", ["https://evil.example", "null", "http://localhost", "http://127.0.0.1:8737"]
)
async def test_req_sec_018_an_origin_not_listed_is_403(origin: str) -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        response = await call_status_with(client, server, Origin=origin)
    assert response.status_code == 403
    assert http_counts() == {"sdk_forbidden": 1}


async def test_req_sec_018_a_listed_origin_is_served() -> None:
    config = make_config(
        '[service.http]\nallowed_origins = ["https://app.example", "http://localhost:*"]\n'
    )
    async with serving(config) as server, httpx.AsyncClient() as client:
        exact = await call_status_with(client, server, Origin="https://app.example")
        any_port = await call_status_with(client, server, Origin="http://localhost:5173")
        bare = await call_status_with(client, server, Origin="http://localhost")
        other = await call_status_with(client, server, Origin="https://app.example:444")
    assert (exact.status_code, any_port.status_code, bare.status_code) == (200, 200, 200)
    assert other.status_code == 403


async def test_req_sec_018_off_loopback_the_401_comes_before_the_host_check() -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    async with serving(config, CALLERS_ENV) as server, httpx.AsyncClient() as client:
        response = await call_status_with(client, server, Host="evil.example")
    assert response.status_code == 401


# -- 406 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "accept",
    [
        "application/json",
        "text/event-stream",
        "application/json, text/event-stream;q=0",
        "application/json;q=0, text/event-stream",
        "*/*",
        "application/json, text/html",
        "",
    ],
)
async def test_req_mcp_003_accept_without_both_media_types_is_406(accept: str) -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        response = await call_status_with(client, server, Accept=accept)
    assert response.status_code == 406
    assert http_counts() == {"sdk_not_acceptable": 1}


@pytest.mark.parametrize(
    "accept",
    [
        "APPLICATION/JSON, Text/Event-Stream",
        "text/event-stream;q=0.1, application/json;q=1.0",
        "application/json; charset=utf-8, text/event-stream, */*",
    ],
)
async def test_req_mcp_003_accept_is_matched_without_case_and_with_q(accept: str) -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        response = await call_status_with(client, server, Accept=accept)
    assert response.status_code == 200


# -- 415 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/plain", "application/jsonx", "multipart/form-data"])
async def test_req_mcp_003_a_content_type_other_than_json_is_415(content_type: str) -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        response = await call_status_with(client, server, **{"Content-Type": content_type})
    assert response.status_code == 415
    assert http_counts() == {}  # not counted


@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "2.0", "id": None, "method": "tools/call"},
        {"jsonrpc": "1.0", "id": 1, "method": "tools/call"},
        {"id": 1, "method": "tools/call"},
        [],
        [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}],
        "a string",
    ],
)
async def test_req_mcp_003_a_body_that_is_not_a_json_rpc_message_is_415(body: object) -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        response = await post(
            client, server, json.dumps(body).encode(), modern_headers("tools/call", "engine_status")
        )
    assert response.status_code == 415


async def test_req_mcp_003_a_body_that_is_not_json_is_a_parse_error() -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        response = await post(
            client, server, b"{not json", modern_headers("tools/call", "engine_status")
        )
    assert response.status_code == 400
    assert _error(response)["code"] == -32700


# -- 200 / 202 / 404 of the modern era ------------------------------------------------------


async def test_req_mcp_003_an_unknown_tool_is_200_with_the_json_rpc_error() -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        response = await post(
            client, server, call_body("no_such_tool"), modern_headers("tools/call", "no_such_tool")
        )
    assert response.status_code == 200
    assert _error(response) == {"code": -32602, "message": "unknown tool"}


@pytest.mark.parametrize("method", ["resources/list", "prompts/get", "initialize", "ping"])
async def test_req_mcp_003_an_unknown_or_removed_method_is_404_with_32601(method: str) -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        response = await post(client, server, modern_body(method), modern_headers(method))
    assert response.status_code == 404
    assert _error(response)["code"] == -32601


async def test_req_mcp_003_a_notification_is_202_without_a_body() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"_meta": {}}}
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        response = await post(client, server, note, modern_headers("notifications/whatever"))
    assert response.status_code == 202
    assert response.content == b""


async def test_req_mcp_003_discover_and_list_over_http() -> None:
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        found = await post(
            client, server, modern_body("server/discover"), modern_headers("server/discover")
        )
        listed = await post(client, server, modern_body("tools/list"), modern_headers("tools/list"))
    assert "2026-07-28" in found.json()["result"]["supportedVersions"]
    assert [t["name"] for t in listed.json()["result"]["tools"]] == [
        "web_search",
        "web_fetch",
        "engine_status",
    ]


# -- 431 ------------------------------------------------------------------------------------


async def test_req_sec_018_an_oversized_header_block_is_431() -> None:
    async with serving(make_config()) as server:
        head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 17000 + b"\r\n\r\n"
        received = await raw_exchange(server.port, head)
        assert received.startswith(b"HTTP/1.1 431 ")
        # Just under the bound is read (and refused for what it lacks, not for its size).
        ok_head = (
            b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Big: "
            + b"a" * 15000 + b"\r\n\r\n"
        )  # fmt: skip
        assert (await raw_exchange(server.port, ok_head)).startswith(b"HTTP/1.1 405 ")


# -- the whole table at once --------------------------------------------------------------


async def test_req_test_014_every_row_of_the_status_table_on_one_listener() -> None:
    """One listener with callers and small bounds answers each row of the table."""
    config = make_config(
        "[service.http]\nmax_request_bytes = 4096\nmax_sessions = 1\n" + CALLERS,
        CALLERS_ENV,
        request_timeout_s=1,
    )
    seen: dict[int, list[str]] = {}
    async with serving(config, CALLERS_ENV) as server, httpx.AsyncClient() as client:

        async def status(body: object, **headers: str) -> int:
            base = modern_headers("tools/call", "engine_status", TOKEN_A)
            content = body if isinstance(body, bytes) else json.dumps(body).encode()
            response = await client.post(server.url, content=content, headers={**base, **headers})
            return response.status_code

        ok = call_body("engine_status")
        seen.setdefault(await status(ok), []).append("a call")
        seen.setdefault(await status(call_body("nope"), **{"Mcp-Name": "nope"}), []).append(
            "an unknown tool"
        )
        seen.setdefault(
            await status({"jsonrpc": "2.0", "method": "x", "params": {"_meta": {}}}), []
        ).append("note")
        seen.setdefault(await status(ok, **{"Mcp-Name": "web_search"}), []).append(
            "header mismatch"
        )
        seen.setdefault(await status(ok, Authorization="Bearer nope"), []).append("token")
        seen.setdefault(await status(ok, Host="evil.example"), []).append("host")
        unknown = modern_body("resources/list")
        seen.setdefault(await status(unknown, **{"Mcp-Method": "resources/list"}), []).append("m")
        seen.setdefault(await status(ok, Accept="application/json"), []).append("accept")
        seen.setdefault(await status(b" " * 5000), []).append("body")
        seen.setdefault(await status(ok, **{"Content-Type": "text/plain"}), []).append(
            "content type"
        )
        seen.setdefault(await status(ok, **{"X-Big": "a" * 17000}), []).append("header block")
        # The bound (one session) reached by A, then B below its share: the bound's 503
        # (A again would be past its share, the share's 503).
        first = await client.post(
            server.url, json=initialize_body(), headers=legacy_headers(TOKEN_A)
        )
        second = await client.post(
            server.url, json=initialize_body(), headers=legacy_headers(TOKEN_B)
        )
        seen.setdefault(first.status_code, []).append("a handshake")
        seen.setdefault(second.status_code, []).append("session bound")
        head = (
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
            + TOKEN_A.encode() + b"\r\nContent-Type: application/json\r\nAccept: "
            + ACCEPT.encode() + b"\r\nContent-Length: 100\r\n\r\n{"
        )  # fmt: skip
        seen.setdefault(int((await raw_exchange(server.port, head)).split(b" ")[1]), []).append(
            "slow body"
        )
    assert sorted(seen) == [200, 202, 400, 401, 403, 404, 406, 408, 413, 415, 431, 503]
    assert set(http_counts()) == {
        "unauthorized", "sdk_forbidden", "sdk_not_acceptable", "body_too_large",
        "request_timeout", "session_limit", "sdk_bad_request",
    }  # fmt: skip


@pytest.mark.parametrize(
    "meta",
    [
        None,
        {"io.modelcontextprotocol/clientCapabilities": {}},
        {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
        {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "x"},
        },
    ],
)
async def test_req_mcp_003_a_modern_request_without_its_metadata_is_400_invalid_params(
    meta: dict | None,
) -> None:
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}
    if meta is not None:
        body["params"]["_meta"] = meta
    async with serving(make_config()) as server, httpx.AsyncClient() as client:
        response = await post(client, server, body, modern_headers("tools/list"))
    assert response.status_code == 400
    assert _error(response)["code"] == -32602
    assert response.json()["id"] == 7


async def test_req_obs_007_the_counters_event_counts_every_refusal_of_the_listener() -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    with capture_logs() as logs:
        async with (
            serving(config, CALLERS_ENV, counters_interval_s=0.5) as server,
            httpx.AsyncClient() as client,
        ):
            await call_status(client, server, "wrong-token-wrong-token-wrong-token-x")
            await call_status(client, server, "wrong-token-wrong-token-wrong-token-x")
            await call_status_with(client, server, Authorization=f"Bearer {TOKEN_A}", Accept="x/y")
            # The first event written after the three refusals (the counters are totals): on
            # a loaded machine the calls may outlast an interval or two.
            before = len(logs.named("counters"))
            with trio.fail_after(5):
                while len(logs.named("counters")) <= before:  # noqa: ASYNC110 # the log
                    await trio.sleep(0.05)
    http = logs.named("counters")[before]["refusals"]["http"]
    assert http == {"unauthorized": 2, "sdk_not_acceptable": 1}
