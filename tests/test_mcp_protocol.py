"""The sans-I/O protocol layer: JSON-RPC validation, both eras, the method table, tools/call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp_helpers import MODERN_META, dispatcher, modern, tutorial_toolset

from rypsok.core.model import SearchRequest
from rypsok.core.telemetry import COUNTERS
from rypsok.mcp.protocol import Call, Cancel, Nothing, Reply, StatusCall, definition_budget, jsonrpc
from rypsok.mcp.protocol.dispatch import CACHE_SCOPE, TTL_MS
from rypsok.mcp.protocol.tools import (
    ENGINE_STATUS_DESCRIPTION,
    INSTRUCTIONS,
    WEB_FETCH_DESCRIPTION,
    WEB_SEARCH_DESCRIPTION,
)

FIXTURE = Path(__file__).parent / "fixtures" / "tools-list.json"


def handle_line(d: Any, line: bytes | str) -> Any:
    if isinstance(line, str):
        line = line.encode()
    return d.handle(jsonrpc.parse(line))


def handle(d: Any, obj: dict[str, Any]) -> Any:
    return handle_line(d, json.dumps(obj))


def error_of(action: Any) -> dict[str, Any]:
    assert isinstance(action, Reply), action
    return action.payload["error"]


def result_of(action: Any) -> dict[str, Any]:
    assert isinstance(action, Reply), action
    assert "error" not in action.payload, action.payload
    return action.payload["result"]


# -- JSON-RPC ------------------------------------------------------------------------------


@pytest.mark.parametrize("line", [b"{", b"not json", b'{"a": NaN}', b"\xff\xfe"])
def test_req_mcp_001_unparseable_line_is_a_parse_error(line: bytes) -> None:
    action = handle_line(dispatcher(), line)
    assert action.payload == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }


@pytest.mark.parametrize(
    ("message", "reply_id"),
    [
        ({"jsonrpc": "2.0", "id": None, "method": "tools/list"}, None),
        ({"jsonrpc": "1.0", "id": 7, "method": "tools/list"}, 7),
        ({"id": 7, "method": "tools/list"}, 7),
        ({"jsonrpc": "2.0", "id": 7, "method": 5}, 7),
        ({"jsonrpc": "2.0", "id": True, "method": "tools/list"}, None),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}, None),
        ({"jsonrpc": "2.0", "id": 7}, 7),
    ],
)
def test_req_mcp_001_malformed_request_is_invalid_request(
    message: dict[str, Any], reply_id: Any
) -> None:
    action = handle(dispatcher(), message)
    assert isinstance(action, Reply)
    assert action.payload == {
        "jsonrpc": "2.0",
        "id": reply_id,
        "error": {"code": -32600, "message": "Invalid Request"},
    }


@pytest.mark.parametrize("line", [b"42", b'"text"', b"null", b"[]", b"  [ ]  "])
def test_req_mcp_001_non_object_message_and_empty_batch_are_invalid_request(line: bytes) -> None:
    # An empty array is an invalid request in every revision, batches allowed or not.
    for revision in (None, "2025-03-26"):
        d = dispatcher()
        if revision is not None:
            handle(d, initialize(revision))
        action = handle_line(d, line)
        assert isinstance(action, Reply)
        assert action.payload == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": "Invalid Request"},
        }


def test_req_mcp_001_notifications_and_responses_get_no_answer() -> None:
    d = dispatcher()
    for message in (
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "no/such/notification", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": None}},
        {"jsonrpc": "2.0", "method": "tools/list", "params": "not an object"},
        {"jsonrpc": "2.0", "id": 4, "result": {}},
    ):
        assert isinstance(handle(d, message), Nothing), message


def test_req_mcp_001_encoded_message_is_one_line() -> None:
    data = jsonrpc.encode({"jsonrpc": "2.0", "id": 1, "result": {"text": "a\nb\r\u2028c"}})
    assert data.endswith(b"\n")
    assert data.count(b"\n") == 1
    assert json.loads(data)["result"]["text"] == "a\nb\r\u2028c"


@pytest.mark.parametrize("revision", [None, "2025-11-25", "2025-06-18"])
def test_req_mcp_001_batches_are_refused_where_the_revision_forbids_them(
    revision: str | None,
) -> None:
    d = dispatcher()
    if revision is not None:
        handle(d, initialize(revision))
    assert not d.batches_allowed()
    batch = json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    action = handle_line(d, batch)
    assert error_of(action)["code"] == -32600
    assert action.payload["id"] is None


def test_req_mcp_001_batches_are_accepted_in_revision_2025_03_26() -> None:
    d = dispatcher()
    handle(d, initialize("2025-03-26"))
    assert d.batches_allowed()
    message = jsonrpc.parse(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]')
    assert isinstance(message, jsonrpc.Batch)
    assert result_of(d.handle_batch_item(message.items[0])) == {}
    again = jsonrpc.parse_one(initialize("2025-03-26"))
    assert error_of(d.handle_batch_item(again))["code"] == -32600


# -- 2026-07-28 ----------------------------------------------------------------------------


def test_req_mcp_006_server_discover_answers_versions_capabilities_and_instructions() -> None:
    result = result_of(handle(dispatcher(), modern("server/discover")))
    assert result == {
        "resultType": "complete",
        "supportedVersions": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"],
        "capabilities": {"tools": {}},
        "instructions": INSTRUCTIONS,
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "rypsok", "version": "0.10.0"}},
        "ttlMs": TTL_MS,
        "cacheScope": CACHE_SCOPE,
    }
    assert TTL_MS >= 0
    assert CACHE_SCOPE in ("public", "private")


def test_req_mcp_006_discover_lists_only_the_modern_revision_without_legacy() -> None:
    result = result_of(handle(dispatcher(legacy_enabled=False), modern("server/discover")))
    assert result["supportedVersions"] == ["2026-07-28"]


@pytest.mark.parametrize("missing", ["io.modelcontextprotocol/clientCapabilities"])
def test_req_mcp_006_request_without_a_required_meta_field_is_invalid_params(
    missing: str,
) -> None:
    message = modern("tools/list")
    del message["params"]["_meta"][missing]
    assert error_of(handle(dispatcher(), message))["code"] == -32602


@pytest.mark.parametrize("method", ["tools/list", "tools/call", "server/discover"])
def test_req_mcp_006_request_without_protocol_version_and_session_is_invalid_params(
    method: str,
) -> None:
    message = modern(method, name="engine_status")
    del message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
    assert error_of(handle(dispatcher(), message))["code"] == -32602


@pytest.mark.parametrize(
    "bad_meta",
    [
        "not an object",
        {**MODERN_META, "io.modelcontextprotocol/protocolVersion": 20260728},
        {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": []},
        {**MODERN_META, "io.modelcontextprotocol/clientInfo": {"name": "x"}},
    ],
)
def test_req_mcp_006_malformed_meta_is_invalid_params(bad_meta: Any) -> None:
    message = modern("tools/list")
    message["params"]["_meta"] = bad_meta
    assert error_of(handle(dispatcher(), message))["code"] == -32602


def test_req_mcp_006_client_info_is_optional() -> None:
    message = modern("tools/list")
    del message["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]
    assert result_of(handle(dispatcher(), message))["resultType"] == "complete"


@pytest.mark.parametrize("requested", ["1900-01-01", "2025-11-25"])
def test_req_mcp_006_unsupported_version_names_supported_and_requested(requested: str) -> None:
    message = modern("tools/list")
    message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = requested
    error = error_of(handle(dispatcher(), message))
    assert error["code"] == -32022
    assert error["data"] == {
        "supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"],
        "requested": requested,
    }


@pytest.mark.parametrize(
    "method", ["initialize", "ping", "logging/setLevel", "resources/list", "no/such"]
)
def test_req_mcp_006_method_absent_from_the_modern_revision_is_not_found(method: str) -> None:
    message = modern(method, protocolVersion="2025-11-25", capabilities={})
    assert error_of(handle(dispatcher(), message))["code"] == -32601


def test_req_mcp_006_every_modern_result_is_complete_and_lists_carry_cache_hints() -> None:
    d = dispatcher()
    listed = result_of(handle(d, modern("tools/list")))
    assert listed["resultType"] == "complete"
    assert listed["ttlMs"] == TTL_MS
    assert listed["cacheScope"] == CACHE_SCOPE
    called = handle(d, modern("tools/call", name="web_search", arguments={"query": 3}))
    assert result_of(called)["resultType"] == "complete"


# -- handshake revisions -------------------------------------------------------------------


def initialize(version: str, request_id: int = 0) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }


@pytest.mark.parametrize(
    ("requested", "agreed"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2025-11-25"),
        ("2099-01-01", "2025-11-25"),
    ],
)
def test_req_mcp_006_initialize_negotiates_a_handshake_revision(
    requested: str, agreed: str
) -> None:
    d = dispatcher()
    result = result_of(handle(d, initialize(requested)))
    assert result["protocolVersion"] == agreed
    assert result["instructions"] == INSTRUCTIONS
    assert result["serverInfo"] == {"name": "rypsok", "version": "0.10.0"}
    assert "tools" in result["capabilities"]
    assert "resultType" not in result
    assert d.legacy_revision == agreed


def test_req_mcp_006_legacy_session_serves_ping_and_tools_without_meta() -> None:
    d = dispatcher()
    handle(d, initialize("2025-06-18"))
    assert isinstance(handle(d, {"jsonrpc": "2.0", "method": "notifications/initialized"}), Nothing)
    assert result_of(handle(d, {"jsonrpc": "2.0", "id": 2, "method": "ping"})) == {}
    listed = result_of(handle(d, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
    assert [t["name"] for t in listed["tools"]] == ["web_search", "web_fetch", "engine_status"]
    assert "resultType" not in listed
    assert "ttlMs" not in listed
    # The modern era is served beside it on the same process.
    assert result_of(handle(d, modern("tools/list")))["resultType"] == "complete"


def test_req_mcp_006_revision_2025_03_26_has_no_output_schemas_nor_structured_content() -> None:
    d = dispatcher()
    handle(d, initialize("2025-03-26"))
    listed = result_of(handle(d, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
    assert all("outputSchema" not in t for t in listed["tools"])
    call = handle(
        d,
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "web_search", "arguments": {}},
        },
    )
    result = result_of(call)
    assert "structuredContent" not in result
    assert json.loads(result["content"][0]["text"])["error"]["kind"] == "invalid_request"


def test_req_mcp_006_legacy_request_before_initialize_is_refused() -> None:
    action = handle(dispatcher(), {"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    assert error_of(action)["code"] == -32602
    assert (
        error_of(handle(dispatcher(), {"jsonrpc": "2.0", "id": 3, "method": "x/y"}))["code"]
        == -32601
    )


def test_req_mcp_006_initialize_with_legacy_revisions_off_names_the_supported_revision() -> None:
    d = dispatcher(legacy_enabled=False)
    error = error_of(handle(d, initialize("2025-11-25")))
    assert error["code"] == -32022
    assert error["data"] == {"supported": ["2026-07-28"], "requested": "2025-11-25"}
    assert "2026-07-28" in error["message"]
    assert d.legacy_revision is None
    assert error_of(handle(d, {"jsonrpc": "2.0", "id": 2, "method": "ping"}))["code"] == -32602


def test_req_mcp_006_initialize_needs_a_version_and_capabilities() -> None:
    bad = initialize("2025-11-25")
    del bad["params"]["capabilities"]
    assert error_of(handle(dispatcher(), bad))["code"] == -32602
    bad = initialize("2025-11-25")
    bad["params"]["protocolVersion"] = 5
    assert error_of(handle(dispatcher(), bad))["code"] == -32602


# -- tools ---------------------------------------------------------------------------------


def test_req_mcp_009_tools_list_equals_the_committed_fixture() -> None:
    listed = result_of(handle(dispatcher(), modern("tools/list")))
    assert listed == json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_req_mcp_009_annotations_and_order() -> None:
    tools = result_of(handle(dispatcher(), modern("tools/list")))["tools"]
    assert [t["name"] for t in tools] == ["web_search", "web_fetch", "engine_status"]
    base = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True}
    assert tools[0]["annotations"] == {**base, "openWorldHint": True}
    assert tools[1]["annotations"] == {**base, "openWorldHint": True}
    assert tools[2]["annotations"] == {**base, "openWorldHint": False}
    assert tools[0]["description"] == WEB_SEARCH_DESCRIPTION
    assert tools[1]["description"] == WEB_FETCH_DESCRIPTION
    assert tools[2]["description"] == ENGINE_STATUS_DESCRIPTION


def test_req_mcp_009_tool_list_does_not_vary_between_calls_or_eras() -> None:
    d = dispatcher()
    first = result_of(handle(d, modern("tools/list")))["tools"]
    handle(d, initialize("2025-11-25"))
    legacy = result_of(handle(d, {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))["tools"]
    assert first == legacy == result_of(handle(dispatcher(), modern("tools/list")))["tools"]


def test_req_status_003_engine_status_is_absent_when_disabled() -> None:
    d = dispatcher(status_enabled=False)
    tools = result_of(handle(d, modern("tools/list")))["tools"]
    assert [t["name"] for t in tools] == ["web_search", "web_fetch"]
    call = handle(d, modern("tools/call", name="engine_status", arguments={}))
    assert error_of(call) == {"code": -32602, "message": "unknown tool"}


def test_req_search_002_category_enumerates_only_served_categories() -> None:
    for served, expected in [
        (("science", "general"), ["general", "science"]),
        (("code", "news"), ["news", "code"]),
    ]:
        toolset = tutorial_toolset(categories=served)
        schema = toolset.definitions()[0]["inputSchema"]
        assert schema["properties"]["category"]["enum"] == expected
    news = tutorial_toolset(categories=("news",)).definitions()[0]["inputSchema"]
    assert "default" not in news["properties"]["category"]


def test_req_search_004_language_appears_only_with_two_languages() -> None:
    one = tutorial_toolset(languages=("en",)).definitions()[0]["inputSchema"]
    assert "language" not in one["properties"]
    two = tutorial_toolset(languages=("en", "ja")).definitions()[0]["inputSchema"]
    assert two["properties"]["language"] == {
        "type": "string",
        "enum": ["en", "ja"],
        "default": "en",
    }


def test_req_mcp_008_input_schemas_are_flat_and_closed() -> None:
    toolset = tutorial_toolset(
        categories=("general", "news", "science", "code"), languages=("en", "ja")
    )
    for definition in toolset.definitions():
        schema = definition["inputSchema"]
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert len(schema["properties"]) <= 5  # LIM-I2
        for prop in schema["properties"].values():
            assert prop["type"] in ("string", "integer")  # LIM-I3: primitives and enums


def test_req_mcp_008_definitions_and_instructions_fit_lim_i1() -> None:
    # The widest configuration the tools can take: every category, several languages.
    toolset = tutorial_toolset(
        categories=("general", "news", "science", "code"),
        languages=("en", "de", "fr", "es", "ja", "zh", "pt", "it"),
    )
    counted = len(INSTRUCTIONS) + sum(
        len(d["name"])
        + len(d["description"])
        + len(json.dumps(d["inputSchema"], sort_keys=True, separators=(",", ":")))
        for d in toolset.definitions()
    )
    assert definition_budget(toolset) == counted
    assert counted <= 2000


def test_req_mcp_004_tools_call_builds_the_service_request() -> None:
    d = dispatcher()
    action = handle(
        d,
        modern(
            "tools/call",
            request_id="a",
            name="web_search",
            arguments={"query": "rust", "max_results": 5.0, "time_range": "week"},
        ),
    )
    assert action == Call(
        request_id="a",
        tool="web_search",
        request=SearchRequest(query="rust", max_results=5, time_range="week"),
        revision="2026-07-28",
    )
    status = handle(d, modern("tools/call", name="engine_status"))
    assert isinstance(status, Call)
    assert status.request == StatusCall()


SEARCH_PARAMETERS = ["query", "category", "max_results", "time_range"]


@pytest.mark.parametrize(
    ("arguments", "message", "detail"),
    [
        ({}, "query is required", {"parameter": "query"}),
        ({"query": 5}, "query must be a string", {"parameter": "query"}),
        (
            {"query": "x", "max_results": "5"},
            "max_results must be an integer",
            {"parameter": "max_results"},
        ),
        (
            {"query": "x", "max_results": True},
            "max_results must be an integer",
            {"parameter": "max_results"},
        ),
        (
            {"query": "x", "max_results": 2.5},
            "max_results must be an integer",
            {"parameter": "max_results"},
        ),
        ({"query": "x", "category": None}, "category must be a string", {"parameter": "category"}),
        (
            {"query": "x", "language": "en"},
            "the call has 1 unknown parameter; use only those of the tool (detail.allowed)",
            {"parameter": "language", "allowed": SEARCH_PARAMETERS},
        ),
        (
            {"query": "x", "page": 2, "Query": "y"},
            "the call has 2 unknown parameters; use only those of the tool (detail.allowed)",
            {"parameter": "page", "allowed": SEARCH_PARAMETERS},
        ),
        (
            # A name that cannot be shown as it is (too long) is counted, not named.
            {"query": "x", "p" * 65: 1},
            "the call has 1 unknown parameter; use only those of the tool (detail.allowed)",
            {"allowed": SEARCH_PARAMETERS},
        ),
        (
            # A name with the shape of a credential is never repeated in an error.
            {"query": "x", "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8": 1},
            "the call has 1 unknown parameter; use only those of the tool (detail.allowed)",
            {"allowed": SEARCH_PARAMETERS},
        ),
        (
            {"query": "x", "a\nb": 1, "b": 2},
            "the call has 2 unknown parameters; use only those of the tool (detail.allowed)",
            {"parameter": "b", "allowed": SEARCH_PARAMETERS},
        ),
    ],
)
def test_req_mcp_004_arguments_failing_the_schema_are_invalid_request(
    arguments: dict[str, Any], message: str, detail: dict[str, Any]
) -> None:
    action = handle(dispatcher(), modern("tools/call", name="web_search", arguments=arguments))
    result = result_of(action)
    body = {"error": {"kind": "invalid_request", "message": message, "detail": detail}}
    assert result == {
        "resultType": "complete",
        "content": [
            {"type": "text", "text": json.dumps(body, sort_keys=True, separators=(",", ":"))}
        ],
        "structuredContent": body,
        "isError": True,
    }


def test_req_obs_003_arguments_refused_by_the_schema_are_counted_as_call_errors() -> None:
    COUNTERS.reset()
    try:
        d = dispatcher()
        for arguments in ({"query": "x", "page": 2}, {"max_results": 0}):
            handle(d, modern("tools/call", name="web_search", arguments=arguments))
        handle(d, modern("tools/call", name="engine_status", arguments={"x": 1}))
        handle(d, modern("tools/call", name="nope", arguments={}))  # a protocol error
        snapshot = COUNTERS.snapshot()
    finally:
        COUNTERS.reset()
    assert snapshot["errors"] == {
        "engine_status": {"invalid_request": 1},
        "web_search": {"invalid_request": 2},
    }
    assert snapshot["tools"] == snapshot["errors"]  # and as refusals (REQ-OBS-007)


def test_req_mcp_004_engine_status_refuses_any_argument() -> None:
    action = handle(dispatcher(), modern("tools/call", name="engine_status", arguments={"x": 1}))
    assert result_of(action)["isError"] is True


@pytest.mark.parametrize(
    "params",
    [{"arguments": {}}, {"name": 5}, {"name": "web_search", "arguments": ["query"]}],
)
def test_req_mcp_001_malformed_tools_call_params_are_invalid_params(params: dict[str, Any]) -> None:
    assert error_of(handle(dispatcher(), modern("tools/call", **params)))["code"] == -32602


def test_req_mcp_001_unknown_tool_is_invalid_params_unknown_tool() -> None:
    for name in ("web_browse", "nope"):
        action = handle(dispatcher(), modern("tools/call", request_id=5, name=name, arguments={}))
        assert action.payload == {
            "jsonrpc": "2.0",
            "id": 5,
            "error": {"code": -32602, "message": "unknown tool"},
        }


def test_req_mcp_011_rendered_response_has_structured_content_and_the_same_text() -> None:
    d = dispatcher()
    call = handle(d, modern("tools/call", request_id=2, name="engine_status"))
    body = {
        "outcome": "ok",
        "notices": [],
        "engines": [{"id": "w", "state": "closed", "latency_ms": None}],
    }
    payload = d.render_response(call, body)
    result = payload["result"]
    assert result["structuredContent"] == body
    assert result["content"] == [
        {
            "type": "text",
            "text": '{"engines":[{"id":"w","latency_ms":null,"state":"closed"}],'
            '"notices":[],"outcome":"ok"}',
        }
    ]
    assert result["isError"] is False
    assert result["resultType"] == "complete"


def test_req_mcp_011_structured_content_off_gives_the_text_alone() -> None:
    d = dispatcher(structured_content=False)
    call = handle(d, modern("tools/call", request_id=2, name="engine_status"))
    result = d.render_response(call, {"outcome": "ok", "notices": [], "engines": []})["result"]
    assert set(result) == {"resultType", "content", "isError"}
    refused = result_of(handle(d, modern("tools/call", name="web_search", arguments={})))
    assert set(refused) == {"resultType", "content", "isError"}
    assert refused["isError"] is True


def test_req_mcp_007_cancelled_notification_names_the_request() -> None:
    d = dispatcher()
    for target in (7, "abc"):
        action = handle(
            d,
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": target, "reason": "x"},
            },
        )
        assert action == Cancel(request_id=target)


_external = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)


@given(title=_external, snippet=_external, url=_external)
def test_req_sec_002_external_strings_cannot_alter_the_response_structure(
    title: str, snippet: str, url: str
) -> None:
    d = dispatcher()
    call = handle(d, modern("tools/call", request_id=2, name="engine_status"))
    body = {
        "outcome": "ok",
        "notices": [],
        "results": [{"title": title, "url": url, "snippet": snippet}],
    }
    line = jsonrpc.encode(d.render_response(call, body))
    assert line.count(b"\n") == 1
    answer = json.loads(line)
    assert set(answer) == {"jsonrpc", "id", "result"}
    assert set(answer["result"]) == {"resultType", "content", "structuredContent", "isError"}
    assert answer["result"]["isError"] is False
    assert answer["result"]["structuredContent"] == body


@given(title=_external, snippet=_external)
def test_req_ctx_003_text_is_the_canonical_json_of_the_structured_response(
    title: str, snippet: str
) -> None:
    d = dispatcher()
    call = handle(d, modern("tools/call", request_id=2, name="engine_status"))
    body = {"outcome": "ok", "notices": [], "results": [{"title": title, "snippet": snippet}]}
    result = d.render_response(call, body)["result"]
    text = result["content"][0]["text"]
    assert text == json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert json.loads(text) == result["structuredContent"]


def test_req_ctx_002_the_books_responses_conform_to_the_declared_output_schemas() -> None:
    import jsonschema

    calls = Path(__file__).resolve().parent.parent / "conformance" / "calls"
    schemas = {
        t["name"]: t["outputSchema"]
        for t in json.loads(FIXTURE.read_text(encoding="utf-8"))["tools"]
    }
    checked = 0
    for path in sorted(calls.glob("*.json")):
        case = json.loads(path.read_text(encoding="utf-8"))
        request = case.get("request", {})
        name = request.get("params", {}).get("name")
        if request.get("method") != "tools/call" or name not in schemas:
            continue
        result = case["response"]["result"]
        if result["isError"]:
            # An error object is not the tool's output: it has its own fixed shape.
            assert set(result["structuredContent"]) == {"error"}
            continue
        jsonschema.validate(result["structuredContent"], schemas[name])
        checked += 1
    # first-search, engine-status, and web-fetch with its two continuation parts.
    assert checked == 5
    # Envelope and external data are distinct fields: a result's keys are never mixed in.
    search = schemas["web_search"]
    response, error = search["oneOf"]
    assert set(response["properties"]) == {"outcome", "notices", "results"}
    assert response["properties"]["results"]["items"]["additionalProperties"] is False
    assert set(error["properties"]) == {"error"}
    bad = {"outcome": "ok", "notices": [], "results": [], "isError": True}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, search)
