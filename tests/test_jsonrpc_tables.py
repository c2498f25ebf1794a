"""JSON-RPC 2.0 framing, shape by shape (REQ-MCP-001): every kind of id, every malformed
message and the exact error object each one gets; the encoding of one line.

Written against the survivors of tools/mutation.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rypsok.mcp.protocol import jsonrpc
from rypsok.mcp.protocol.jsonrpc import (
    Batch,
    Invalid,
    Notification,
    Request,
    Response,
    encode,
    error_response,
    parse,
    parse_one,
    result_response,
)


def _line(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def _invalid_request(request_id: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": -32600, "message": "Invalid Request"},
    }


def test_req_mcp_001_the_error_codes_are_those_of_json_rpc() -> None:
    assert (
        jsonrpc.PARSE_ERROR,
        jsonrpc.INVALID_REQUEST,
        jsonrpc.METHOD_NOT_FOUND,
        jsonrpc.INVALID_PARAMS,
        jsonrpc.INTERNAL_ERROR,
    ) == (-32700, -32600, -32601, -32602, -32603)


@pytest.mark.parametrize("request_id", [0, 1, -1, 2**70, "", "a", "é"])
def test_req_mcp_001_an_integer_or_string_id_makes_a_request(request_id: Any) -> None:
    message = parse(_line({"jsonrpc": "2.0", "id": request_id, "method": "m"}))
    assert message == Request(id=request_id, method="m", params=None)
    with_params = parse(_line({"jsonrpc": "2.0", "id": request_id, "method": "m", "params": {}}))
    assert with_params == Request(id=request_id, method="m", params={})


@pytest.mark.parametrize("request_id", [None, True, False, 1.5, [], {}, [1]])
def test_req_mcp_001_any_other_id_is_an_invalid_request_answered_with_null(
    request_id: Any,
) -> None:
    message = parse(_line({"jsonrpc": "2.0", "id": request_id, "method": "m"}))
    assert message == Invalid(reply=_invalid_request(None))


@pytest.mark.parametrize(
    ("obj", "reply_id"),
    [
        ({"id": 3, "method": "m"}, 3),
        ({"jsonrpc": "1.0", "id": "x", "method": "m"}, "x"),
        ({"jsonrpc": 2.0, "id": 3, "method": "m"}, 3),
        ({"jsonrpc": "2.0", "id": 4}, 4),
        ({"jsonrpc": "2.0", "id": 5, "method": 7}, 5),
        ({"jsonrpc": "2.0", "id": 6, "method": None}, 6),
        ({"jsonrpc": "2.0", "id": True, "method": 7}, None),
        ({"jsonrpc": "2.0", "id": 1.5}, None),
        # An id of the wrong type is answered with null even when params is wrong too.
        ({"jsonrpc": "2.0", "id": 1.5, "method": "m", "params": []}, None),
        ({"jsonrpc": "2.0", "id": None, "method": "m", "params": 3}, None),
        ({"jsonrpc": "2.0", "id": False, "method": "m", "params": []}, None),
    ],
)
def test_req_mcp_001_every_malformed_request_gets_invalid_request(
    obj: dict[str, Any], reply_id: Any
) -> None:
    assert parse(_line(obj)) == Invalid(reply=_invalid_request(reply_id))


@pytest.mark.parametrize("value", [1, "x", None, True, [1]])
def test_req_mcp_001_a_value_that_is_not_an_object_is_an_invalid_request(value: Any) -> None:
    assert parse_one(value) == Invalid(reply=_invalid_request(None))


def test_req_mcp_001_notifications_and_responses() -> None:
    assert parse(_line({"jsonrpc": "2.0", "method": "n"})) == Notification(method="n", params=None)
    assert parse(_line({"jsonrpc": "2.0", "method": "n", "params": {"a": 1}})) == (
        Notification(method="n", params={"a": 1})
    )
    # A notification with bad params is not answered at all.
    assert parse(_line({"jsonrpc": "2.0", "method": "n", "params": [1]})) == Invalid(reply=None)
    assert parse(_line({"jsonrpc": "2.0", "id": 1, "result": {}})) == Response(id=1)
    assert parse(_line({"jsonrpc": "2.0", "id": "r", "error": {}})) == Response(id="r")
    assert parse(_line({"jsonrpc": "2.0", "id": None, "error": {}})) == Response(id=None)
    assert parse(_line({"jsonrpc": "2.0", "id": 1.5, "result": 1})) == Response(id=None)


@pytest.mark.parametrize(
    "line",
    [b"", b"{", b"\xff\xfe", b"[1,", b'{"a":NaN}', b"Infinity", b"-Infinity"],
    ids=["empty", "open", "not-utf8", "open-array", "nan", "inf", "-inf"],
)
def test_req_mcp_001_a_line_that_is_not_json_is_a_parse_error(line: bytes) -> None:
    assert parse(line) == Invalid(
        reply={"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    )


def test_req_mcp_001_json_nested_too_deeply_is_a_parse_error_that_says_so() -> None:
    parsed = parse(b"[" * 100000)
    assert isinstance(parsed, Invalid)
    assert parsed.reply["id"] is None
    assert parsed.reply["error"]["code"] == -32700
    assert "nested too deeply" in parsed.reply["error"]["message"]


@pytest.mark.parametrize(
    ("obj", "reply_id"),
    [
        ({"jsonrpc": "2.0", "id": 7, "method": "m", "params": []}, 7),
        ({"jsonrpc": "2.0", "id": 8, "method": "m", "params": None}, 8),
        ({"jsonrpc": "2.0", "id": "s", "method": "m", "params": "p"}, "s"),
        ({"jsonrpc": "2.0", "id": 9, "method": "m", "params": 3}, 9),
    ],
)
def test_req_mcp_001_params_that_are_not_an_object_get_invalid_params(
    obj: dict[str, Any], reply_id: Any
) -> None:
    assert parse(_line(obj)) == Invalid(
        reply={
            "jsonrpc": "2.0",
            "id": reply_id,
            "error": {"code": -32602, "message": "Invalid params: params must be an object"},
        }
    )


def test_req_mcp_001_batches() -> None:
    assert parse(b"[]") == Invalid(reply=_invalid_request(None))
    batch = parse(_line([{"jsonrpc": "2.0", "id": 1, "method": "a"}, 5]))
    assert batch == Batch(
        items=(Request(id=1, method="a", params=None), Invalid(reply=_invalid_request(None)))
    )


def test_req_mcp_001_responses_are_built_with_the_version_and_optional_data() -> None:
    assert result_response(1, {"x": 1}) == {"jsonrpc": "2.0", "id": 1, "result": {"x": 1}}
    assert error_response("a", -32602, "bad") == {
        "jsonrpc": "2.0",
        "id": "a",
        "error": {"code": -32602, "message": "bad"},
    }
    assert error_response(None, -32602, "bad", data={"k": 0}) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32602, "message": "bad", "data": {"k": 0}},
    }
    # Falsy data is data too; only None means none.
    assert error_response(1, -32602, "bad", data=0)["error"]["data"] == 0


def test_req_mcp_001_encode_writes_one_compact_utf8_line() -> None:
    line = encode({"a": "é\n\u2028", "b": [1, 2]})
    assert line == '{"a":"é\\n\u2028","b":[1,2]}\n'.encode()
    assert line.count(b"\n") == 1
    assert encode([{"x": 1}]) == b'[{"x":1}]\n'
    with pytest.raises(ValueError, match="JSON"):
        encode({"a": float("nan")})


# --- encoding a reply that cannot be encoded, and integer ids at the digit limits ------------


@pytest.mark.parametrize(
    "bad",
    [
        "\ud800",  # no UTF-8 for it: ValueError (UnicodeEncodeError)
        {1j: 2},  # a key JSON cannot hold: TypeError
        float("nan"),  # not JSON: ValueError
    ],
    ids=["surrogate", "complex-key", "nan"],
)
def test_req_mcp_004_a_reply_that_cannot_be_encoded_becomes_internal_error(bad: object) -> None:
    reply = {"jsonrpc": "2.0", "id": 7, "result": {"x": bad}}
    line, replaced = jsonrpc.encode_safely(reply)
    assert replaced == 1
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32603, "message": "Internal error"},
    }


def test_req_mcp_004_a_reply_nested_too_deeply_becomes_internal_error() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    line, replaced = jsonrpc.encode_safely({"jsonrpc": "2.0", "id": 3, "result": deep})
    assert replaced == 1
    assert json.loads(line)["error"]["code"] == -32603


def test_req_mcp_004_in_a_batch_only_the_reply_that_cannot_be_encoded_is_replaced() -> None:
    good = {"jsonrpc": "2.0", "id": 1, "result": {}}
    bad = {"jsonrpc": "2.0", "id": 2, "result": {"x": "\udfff"}}
    line, replaced = jsonrpc.encode_safely([good, bad])
    assert replaced == 1
    assert json.loads(line) == [
        good,
        {"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "Internal error"}},
    ]
    assert jsonrpc.encode_safely([good]) == (jsonrpc.encode([good]), 0)


@pytest.mark.parametrize("digits", [1, 639, 640, 641, 4299, 4300])
@pytest.mark.parametrize("sign", ["", "-"])
def test_req_mcp_001_an_integer_id_up_to_the_digit_limit_is_kept(digits: int, sign: str) -> None:
    text = sign + "9" * digits
    parsed = parse(f'{{"jsonrpc":"2.0","id":{text},"method":"m"}}'.encode())
    assert parsed == Request(id=int(text), method="m", params=None)


@pytest.mark.parametrize("sign", ["", "-"])
def test_req_mcp_001_an_integer_id_past_the_digit_limit_is_invalid(sign: str) -> None:
    text = sign + "9" * 4301
    parsed = parse(f'{{"jsonrpc":"2.0","id":{text},"method":"m"}}'.encode())
    assert isinstance(parsed, Invalid)
    assert parsed.reply["id"] is None
    assert parsed.reply["error"]["code"] == -32600
