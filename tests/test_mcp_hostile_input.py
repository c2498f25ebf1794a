"""Hostile protocol input through the sans-I/O core: parse, dispatch, encode.

Every string the wire can carry: unpaired surrogate escapes in any field, integers past
CPython's int-string digit limit, params of the wrong JSON type, deep nesting, control
characters, arbitrary bytes. Each line gets an answer or a JSON-RPC error (or, for a
notification or a response, nothing), never an exception, and every answer encodes as one
line of UTF-8 JSON.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_helpers import MODERN_META, dispatcher, modern

from rypsok.core.model import SearchRequest
from rypsok.mcp.protocol import Call, Cancel, Nothing, Reply, StatusCall, jsonrpc

if TYPE_CHECKING:
    from rypsok.mcp.protocol.dispatch import Dispatcher

SURROGATE_MESSAGE = (
    "Parse error: a string holds an unpaired UTF-16 surrogate escape (\\ud800 to \\udfff); "
    "send Unicode text"
)
META = json.dumps(MODERN_META)
CALL = '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"web_search","arguments":{"query":%s},"_meta":%s}}'  # noqa: E501


def fill(template: str, *values: str) -> str:
    """The template with each %s replaced, in order, by one of the values (JSON text)."""
    for value in values:
        template = template.replace("%s", value, 1)
    return template


def initialize(version: str, request_id: int = 0) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}},
    }


def answer(d: Dispatcher, line: bytes | str) -> Any:
    return d.handle(jsonrpc.parse(line.encode() if isinstance(line, str) else line))


def reply_of(action: Any) -> dict[str, Any]:
    assert isinstance(action, Reply), action
    return action.payload


def one_line(payload: dict[str, Any] | list[dict[str, Any]]) -> Any:
    """The payload as the writer sends it: one line, UTF-8, JSON, that decodes back."""
    data = jsonrpc.encode(payload)
    assert data.endswith(b"\n")
    assert data.count(b"\n") == 1
    return json.loads(data.decode("utf-8"))


# -- unpaired surrogates: one rule at the parser -------------------------------------------

# Each key is its test's id; the first line is an id alone (no jsonrpc member) that holds a
# lone surrogate.
SURROGATE_LINES = {
    "no jsonrpc, only the id (the issue's line)": '{"id":"\\ud800"}',
    "ping": '{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
    "tools/list": fill(
        '{"jsonrpc":"2.0","id":"\\udfff","method":"tools/list","params":{"_meta":%s}}', META
    ),
    "tools/call id": fill(CALL, '"a\\ud800"', '"rust"', META),
    "tools/call query": fill(CALL, "5", '"rust \\ud800"', META),
    "low then high, reversed pair": fill(CALL, "5", '"\\udc00\\ud800"', META),
    "upper-case hex": fill(CALL, "5", '"\\uDBFF"', META),
    "unknown method": '{"jsonrpc":"2.0","id":"x\\udbffy","method":"no/such"}',
    "a method name": '{"jsonrpc":"2.0","id":3,"method":"ping\\ud800"}',
    "an object key": '{"jsonrpc":"2.0","id":3,"method":"ping","params":{"\\ud800":1}}',
    "the _meta protocolVersion": (
        '{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":'
        '{"io.modelcontextprotocol/protocolVersion":"2026-07-28\\ud800",'
        '"io.modelcontextprotocol/clientCapabilities":{}}}}'
    ),
    "initialize's protocolVersion": (
        '{"jsonrpc":"2.0","id":4,"method":"initialize",'
        '"params":{"protocolVersion":"\\ud800","capabilities":{}}}'
    ),
    "a batch": '[{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}]',
    "a response": '{"jsonrpc":"2.0","id":"\\ud800","result":{}}',
    "neither a request nor a notification": '{"jsonrpc":"2.0","x":"\\ud800"}',
}


@pytest.mark.parametrize("line", SURROGATE_LINES.values(), ids=SURROGATE_LINES.keys())
@pytest.mark.parametrize("revision", [None, "2025-03-26", "2025-11-25"])
def test_req_mcp_004_an_unpaired_surrogate_anywhere_is_a_parse_error_with_id_null(
    line: str, revision: str | None
) -> None:
    d = dispatcher()
    if revision is not None:
        reply_of(answer(d, json.dumps(initialize(revision))))
    payload = reply_of(answer(d, line))
    assert one_line(payload) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": SURROGATE_MESSAGE},
    }
    assert len(SURROGATE_MESSAGE) <= 200  # LIM-I4


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"\\ud800"}}',
        '{"jsonrpc":"2.0","method":"notifications/initialized\\udc00"}',
    ],
)
def test_req_mcp_001_a_notification_with_a_surrogate_gets_no_answer_and_does_nothing(
    line: str,
) -> None:
    message = jsonrpc.parse(line.encode())
    assert message == jsonrpc.Invalid(reply=None)
    assert isinstance(dispatcher().handle(message), Nothing)


@pytest.mark.parametrize(
    ("query_json", "query"),
    [
        ('"\\ud83e\\udd80 crab"', "\U0001f980 crab"),  # a paired escape is one character
        ('"\\\\ud800"', "\\ud800"),  # an escaped backslash: the text "\ud800", no escape
        ('"\\u00e9t\\u00e9"', "été"),
        ('"\U0001f980"', "\U0001f980"),  # raw UTF-8, four bytes
    ],
)
def test_req_mcp_004_text_that_only_looks_like_a_surrogate_is_served(
    query_json: str, query: str
) -> None:
    action = answer(dispatcher(), fill(CALL, "9", query_json, META))
    assert isinstance(action, Call)
    assert action.request == SearchRequest(query=query)


@pytest.mark.parametrize("bad", ["\ud800", "a\udfffb", "\udc00\ud800"])
def test_req_mcp_004_a_transport_that_bypasses_the_parser_meets_the_same_rule_before_any_work(
    bad: str,
) -> None:
    # A message built by another transport (not parsed from a line) still cannot carry a
    # surrogate into a call: the argument check refuses it as invalid_request.
    request = jsonrpc.Request(
        id=3,
        method="tools/call",
        params={"name": "web_search", "arguments": {"query": bad}, "_meta": dict(MODERN_META)},
    )
    payload = reply_of(dispatcher().handle(request))
    result = one_line(payload)["result"]
    assert result["isError"] is True
    error = result["structuredContent"]["error"]
    assert error["kind"] == "invalid_request"
    assert error["detail"] == {"parameter": "query"}
    assert error["message"] == "query must be Unicode text (it holds an unpaired surrogate)"


# -- integers past the digit limit -------------------------------------------------------

HUGE = "9" * (jsonrpc.MAX_INT_DIGITS + 1)


@pytest.mark.parametrize("digits", [HUGE, "-" + HUGE, "1" + "0" * 100_000])
def test_req_mcp_001_an_integer_id_past_the_digit_limit_is_invalid_request_not_a_parse_error(
    digits: str,
) -> None:
    line = fill('{"jsonrpc":"2.0","id":%s,"method":"ping"}', digits)
    assert one_line(reply_of(answer(dispatcher(), line))) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "Invalid Request: an integer id has more than 4300 digits",
        },
    }


def test_req_mcp_001_an_integer_id_at_the_digit_limit_is_echoed_in_full() -> None:
    digits = "7" * jsonrpc.MAX_INT_DIGITS
    data = jsonrpc.encode(
        reply_of(answer(dispatcher(), fill('{"jsonrpc":"2.0","id":%s,"method":"ping"}', digits)))
    )
    assert data == b'{"jsonrpc":"2.0","id":%s,"result":{}}\n' % digits.encode()


@pytest.mark.parametrize("limit", [0, 640, 4300])
def test_req_mcp_001_the_digit_bound_holds_whatever_the_interpreters_own_limit(
    limit: int,
) -> None:
    # 0 means "no limit" to CPython: the parser keeps its own bound (no quadratic
    # conversion); a lower limit set by an embedding program is respected, not an error.
    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(limit)
    try:
        small = jsonrpc.parse(b'{"jsonrpc":"2.0","id":%s,"method":"ping"}' % (b"5" * 1000))
        huge = jsonrpc.parse(b'{"jsonrpc":"2.0","id":%s,"method":"ping"}' % HUGE.encode())
    finally:
        sys.set_int_max_str_digits(previous)
    assert isinstance(huge, jsonrpc.Invalid)
    if limit == 640:
        assert isinstance(small, jsonrpc.Invalid)
    else:
        assert isinstance(small, jsonrpc.Request)
        assert small.id == int("5" * 1000)


def test_req_mcp_004_a_huge_integer_argument_is_out_of_range_elsewhere_inert() -> None:
    line = fill(
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"web_search",'
        '"arguments":{"query":"rust","max_results":-%s},"_meta":%s}}',
        HUGE,
        META,
    )
    result = one_line(reply_of(answer(dispatcher(), line)))["result"]
    assert result["structuredContent"]["error"] == {
        "kind": "invalid_request",
        "message": "max_results must be between 1 and 20",
        "detail": {"parameter": "max_results", "min": 1, "max": 20},
    }
    # In a cancellation or a capability, a huge integer is a value like any other.
    cancel = '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s}}'
    assert isinstance(answer(dispatcher(), cancel % HUGE), Nothing)
    meta = dict(MODERN_META)
    listed = modern("tools/list")
    listed["params"]["_meta"] = {**meta, "io.modelcontextprotocol/clientCapabilities": {"n": 0}}
    line = json.dumps(listed).replace('{"n": 0}', '{"n": ' + HUGE + "}")
    assert "tools" in one_line(reply_of(answer(dispatcher(), line)))["result"]


# -- params, responses, batches, the -32022 echo -----------------------------------------


@pytest.mark.parametrize("params", ["[1]", "[]", '"text"', "null", "5", "true"])
@pytest.mark.parametrize("method", ["ping", "tools/list", "tools/call", "no/such"])
def test_req_mcp_001_params_that_are_not_an_object_are_invalid_params(
    params: str, method: str
) -> None:
    line = fill('{"jsonrpc":"2.0","id":"p","method":"%s","params":%s}', method, params)
    assert one_line(reply_of(answer(dispatcher(), line))) == {
        "jsonrpc": "2.0",
        "id": "p",
        "error": {"code": -32602, "message": "Invalid params: params must be an object"},
    }


@pytest.mark.parametrize("params", ['[{"requestId":1}]', '"x"', "null", "1"])
def test_req_mcp_007_a_notification_with_params_that_are_not_an_object_is_not_dispatched(
    params: str,
) -> None:
    line = fill('{"jsonrpc":"2.0","method":"notifications/cancelled","params":%s}', params)
    message = jsonrpc.parse(line.encode())
    assert message == jsonrpc.Invalid(reply=None)
    assert isinstance(dispatcher().handle(message), Nothing)
    # The same notification with an object is a cancellation: the difference is the params.
    good = jsonrpc.parse(
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}'
    )
    assert dispatcher().handle(good) == Cancel(request_id=1)


@pytest.mark.parametrize(
    ("message", "response_id"),
    [
        ({"jsonrpc": "2.0", "id": 4, "error": {"code": -1, "message": "no"}}, 4),
        ({"jsonrpc": "2.0", "id": "r", "result": {}}, "r"),
        ({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}}, None),
    ],
)
def test_req_mcp_001_a_response_sent_to_rypsok_is_ignored_whether_result_or_error(
    message: dict[str, Any], response_id: Any
) -> None:
    parsed = jsonrpc.parse(json.dumps(message).encode())
    assert parsed == jsonrpc.Response(id=response_id)
    assert isinstance(dispatcher().handle(parsed), Nothing)


def test_req_mcp_001_an_empty_batch_is_invalid_request_even_where_batches_are_allowed() -> None:
    d = dispatcher()
    reply_of(answer(d, json.dumps(initialize("2025-03-26"))))
    assert d.batches_allowed()
    assert one_line(reply_of(answer(d, "[]"))) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Invalid Request"},
    }


@pytest.mark.parametrize("length", [201, 10_000, 1_000_000])
def test_req_mcp_006_the_requested_version_is_echoed_within_lim_i4(length: int) -> None:
    version = ("2026-07-28" + "é" * length)[:length]
    modern_request = modern("tools/list")
    modern_request["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = version
    legacy_off = dispatcher(legacy_enabled=False)
    for d, message in ((dispatcher(), modern_request), (legacy_off, initialize(version))):
        error = one_line(reply_of(answer(d, json.dumps(message))))["error"]
        assert error["code"] == -32022
        assert error["data"]["requested"] == version[:200]


def test_req_mcp_006_a_short_requested_version_is_echoed_whole() -> None:
    message = modern("tools/list")
    message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "x" * 200
    error = reply_of(answer(dispatcher(), json.dumps(message)))["error"]
    assert error["data"]["requested"] == "x" * 200


@pytest.mark.parametrize(
    "line",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":'
        + b"[" * 50_000
        + b"]" * 50_000
        + b"}}",
    ],
)
def test_req_sec_014_nesting_past_the_parsers_depth_is_a_parse_error(line: bytes) -> None:
    assert one_line(reply_of(answer(dispatcher(), line)))["error"] == {
        "code": -32700,
        "message": "Parse error: the JSON is nested too deeply",
    }


# -- the writer's last line of defence ----------------------------------------------------


def test_req_mcp_002_a_reply_that_cannot_be_encoded_becomes_an_internal_error_for_its_id() -> None:
    bad = jsonrpc.result_response(7, {"text": "\ud800"})
    line, replaced = jsonrpc.encode_safely(bad)
    assert replaced == 1
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32603, "message": "Internal error"},
    }
    with pytest.raises(UnicodeEncodeError):
        jsonrpc.encode(bad)


def test_req_mcp_002_in_a_batch_only_the_element_that_cannot_be_encoded_is_replaced() -> None:
    good = jsonrpc.result_response(1, {"a": "é"})
    nan = jsonrpc.result_response(2, {"x": float("nan")})
    huge = jsonrpc.result_response(3, {"n": 10**5000})
    unknown = jsonrpc.result_response(4, {"t": object()})
    line, replaced = jsonrpc.encode_safely([good, nan, huge, unknown, good])
    assert replaced == 3
    assert line.count(b"\n") == 1
    answers = json.loads(line)
    assert answers[0] == answers[4] == good
    for index, request_id in ((1, 2), (2, 3), (3, 4)):
        assert answers[index] == jsonrpc.error_response(
            request_id, jsonrpc.INTERNAL_ERROR, "Internal error"
        )


def test_req_mcp_002_an_id_that_cannot_be_encoded_is_answered_with_id_null() -> None:
    line, replaced = jsonrpc.encode_safely(jsonrpc.result_response("\udc00", {}))
    assert replaced == 1
    assert json.loads(line)["id"] is None


def test_req_mcp_002_an_encodable_reply_is_encoded_as_is() -> None:
    payload = jsonrpc.result_response(1, {"text": "a\nb\u2028\U0001f980"})
    assert jsonrpc.encode_safely(payload) == (jsonrpc.encode(payload), 0)


# -- the property: any JSON text, any bytes ----------------------------------------------

_SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff"]
_CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, 0x85, 0x2028, 0x2029, 0xFEFF, 0x202E)]
_chars = st.one_of(st.characters(exclude_categories=()), st.sampled_from(_SURROGATES + _CONTROLS))
_texts = st.text(_chars, max_size=20)


def _string(text: str, ascii_only: bool) -> str:
    # ensure_ascii writes a surrogate as a \u escape; without it, the surrogate reaches the
    # bytes (as an invalid UTF-8 sequence, via surrogatepass below).
    return json.dumps(text, ensure_ascii=ascii_only)


_scalars = st.one_of(
    st.sampled_from(["null", "true", "false", "0", "-0", "1e999", "-1e999", "1.5", "1E400"]),
    st.integers().map(str),
    st.integers(min_value=4290, max_value=4400).map(lambda n: "9" * n),
    st.floats(allow_nan=False, allow_infinity=False).map(json.dumps),
    st.builds(_string, _texts, st.booleans()),
)


def _array(items: list[str]) -> str:
    return "[" + ",".join(items) + "]"


def _object(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{key}:{value}" for key, value in pairs) + "}"


_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(_array),
        st.lists(st.tuples(st.builds(_string, _texts, st.booleans()), inner), max_size=4).map(
            _object
        ),
    ),
    max_leaves=12,
)
_deep = st.integers(min_value=1, max_value=3000).map(lambda n: "[" * n + "]" * n)
_ids = st.one_of(_values, st.sampled_from(["1", '"a"', "null"]))
_methods = st.one_of(
    st.sampled_from(
        [
            '"ping"',
            '"tools/list"',
            '"tools/call"',
            '"server/discover"',
            '"initialize"',
            '"notifications/cancelled"',
        ]
    ),
    _values,
)
_metas = st.one_of(st.just(META), _values)


def _message(
    request_id: str | None, method: str, arguments: str, meta: str, name: str, extra: str
) -> str:
    fields = ['"jsonrpc":"2.0"', f'"method":{method}']
    if request_id is not None:
        fields.append(f'"id":{request_id}')
    params = (
        f'{{"name":{name},"arguments":{arguments},"_meta":{meta},'
        f'"protocolVersion":{extra},"capabilities":{{}},"requestId":{extra}}}'
    )
    fields.append(f'"params":{params}')
    return "{" + ",".join(fields) + "}"


_arguments = st.one_of(
    _values,
    st.builds(
        lambda query, count, extra: (
            f'{{"query":{query},"max_results":{count},"category":{extra},"language":{extra}}}'
        ),
        _values,
        _values,
        _values,
    ),
)
_mcp_shaped = st.builds(
    _message,
    st.one_of(st.none(), _ids),
    _methods,
    _arguments,
    _metas,
    st.one_of(st.sampled_from(['"web_search"', '"engine_status"']), _values),
    _values,
)
_good_ids = st.sampled_from(["1", '"a"', "-7", '""'])
_ANY_ARGUMENTS = CALL.replace('{"query":%s}', "%s")
# Nearly valid messages, one field fuzzed, so that the property reaches the method table,
# the version checks and the argument checks, not only the envelope's.
_nearly_valid = st.one_of(
    st.builds(lambda i, a: fill(_ANY_ARGUMENTS, i, a, META), _good_ids, _arguments),
    st.builds(
        lambda i, q: fill(CALL, i, q, META), _good_ids, st.builds(_string, _texts, st.booleans())
    ),
    st.builds(
        lambda i, v: fill(
            '{"jsonrpc":"2.0","id":%s,"method":"tools/list","params":{"_meta":'
            '{"io.modelcontextprotocol/protocolVersion":%s,'
            '"io.modelcontextprotocol/clientCapabilities":{}}}}',
            i,
            v,
        ),
        _good_ids,
        _values,
    ),
    st.builds(
        lambda i, v: fill(
            '{"jsonrpc":"2.0","id":%s,"method":"initialize",'
            '"params":{"protocolVersion":%s,"capabilities":{}}}',
            i,
            v,
        ),
        _good_ids,
        _values,
    ),
)
_json_texts = st.one_of(
    _values,
    _deep,
    _mcp_shaped,
    _nearly_valid,
    st.lists(st.one_of(_mcp_shaped, _nearly_valid), max_size=3).map(_array),
)


def _line(text: str) -> bytes:
    return text.replace("\n", " ").encode("utf-8", "surrogatepass")


LINES = st.one_of(
    _json_texts.map(_line), st.binary(max_size=200).map(lambda b: b.replace(b"\n", b""))
)
KNOWN_CODES = {-32700, -32600, -32601, -32602, -32603, -32022}


def _check(payload: dict[str, Any]) -> None:
    answer = one_line(payload)
    assert answer["jsonrpc"] == "2.0"
    assert ("result" in answer) != ("error" in answer)
    assert answer["id"] is None or isinstance(answer["id"], str | int)
    if "error" in answer:
        assert answer["error"]["code"] in KNOWN_CODES
        assert len(answer["error"]["message"]) <= 200


def serve_line(d: Dispatcher, line: bytes) -> list[dict[str, Any]]:
    """What the transport does with one line, without I/O: the replies it would write."""
    message = jsonrpc.parse(line)
    if isinstance(message, jsonrpc.Batch) and d.batches_allowed():
        actions = [d.handle_batch_item(item) for item in message.items]
    else:
        actions = [d.handle(message)]
    replies = []
    for action in actions:
        if isinstance(action, Reply):
            replies.append(action.payload)
        elif isinstance(action, Call):
            assert isinstance(action.request, SearchRequest | StatusCall)
            body = {"outcome": "ok", "notices": [], "results": []}
            replies.append(d.render_response(action, body))
            replies.append(d.render_crash(action))
        elif isinstance(action, Cancel):
            assert isinstance(action.request_id, str | int)
        else:
            assert isinstance(action, Nothing)
    return replies


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line=LINES, revision=st.sampled_from([None, "2025-03-26", "2025-11-25"]))
def test_req_sec_014_any_line_gets_an_answer_or_an_error_that_encodes_as_utf8_json(
    line: bytes, revision: str | None
) -> None:
    d = dispatcher()
    if revision is not None:
        serve_line(d, json.dumps(initialize(revision)).encode())
    replies = serve_line(d, line)
    for payload in replies:
        _check(payload)
    if len(replies) > 1:
        one_line(replies)  # a batch's answers go out as one array, one line


# -- the output schemas describe both shapes of a result -----------------------------------


def _tool_schemas() -> dict[str, dict[str, Any]]:
    listed = reply_of(answer(dispatcher(), json.dumps(modern("tools/list"))))["result"]
    return {tool["name"]: tool["outputSchema"] for tool in listed["tools"]}


def _every_error() -> list[dict[str, Any]]:
    from rypsok.core import errors
    from rypsok.core.model import DetailReason, ErrorDetail, ErrorKind, SecretKind, ToolError

    made = [
        errors.invalid_range("max_results", 1, 20),
        errors.invalid_length("query", 1, 400),
        errors.invalid_allowed("category", ["general", "news"]),
        errors.invalid_type("max_results", "an integer", 1, 20),
        errors.required("query"),
        errors.unknown_parameter(2, "x", ("url", "max_chars")),
        errors.denied_secret(DetailReason.SECRET_IN_QUERY, SecretKind.GITHUB_TOKEN, 4),
        errors.no_engine(),
        errors.no_engine_skipped(1500),
        errors.all_failed(2000),
        errors.deadline_search(),
        errors.rate_limited("web_search", 60_000),
        errors.busy(),
    ]
    # The kinds and detail keys web_fetch will use (external design §4), at their widest.
    every_key = ErrorDetail(
        parameter="url",
        min=0,
        max=1,
        allowed=("a",),
        reason=DetailReason.HTTP_STATUS,
        kind=SecretKind.URL_PASSWORD,
        position=0,
        status=503,
        retry_after_ms=1,
        location="https://example.org/",
        media_type="application/pdf",
        limit_bytes=10,
    )
    made += [ToolError(kind=kind, message="m" * 200, detail=every_key) for kind in ErrorKind]
    return [error.to_json() for error in made]


def test_req_mcp_011_every_error_object_conforms_to_each_tools_output_schema() -> None:
    import jsonschema

    for name, schema in _tool_schemas().items():
        validator = jsonschema.Draft202012Validator(schema)
        for body in _every_error():
            validator.validate(body)
        # The schema still refuses what the book does not have: a mixed object, an unknown
        # detail key, a kind outside the vocabulary, a message beyond LIM-I4.
        good = _every_error()[0]
        refused = [
            {**good, "outcome": "ok"},
            {"error": {**good["error"], "detail": {"secret": "x"}}},
            {"error": {**good["error"], "kind": "oops"}},
            {"error": {**good["error"], "message": "m" * 201}},
            {"error": {"kind": "busy", "message": "m"}},
            {},
        ]
        for body in refused:
            assert not validator.is_valid(body), (name, body)


def test_req_mcp_011_the_error_schema_covers_every_detail_field_of_the_model() -> None:
    import attrs

    from rypsok.core.model import ErrorDetail
    from rypsok.mcp.protocol.tools import _detail_value_schema

    for name, schema in _tool_schemas().items():
        detail = schema["oneOf"][1]["properties"]["error"]["properties"]["detail"]
        assert set(detail["properties"]) == {f.name for f in attrs.fields(ErrorDetail)}, name
        assert all("type" in field for field in detail["properties"].values()), name
    assert _detail_value_schema(int) == {"type": "integer"}  # a field that is never absent
    with pytest.raises(TypeError):
        _detail_value_schema(float | None)
