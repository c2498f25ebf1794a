"""JSON-RPC 2.0 messages: one line of bytes in, one typed message (or a precise error) out.

Nothing else in the project reads or writes raw JSON-RPC. The rules are those of JSON-RPC 2.0
narrowed by MCP: an id is a string or an integer, never null; params, when present, is an
object; a batch is an array and is only accepted where a revision allows it (the caller
decides, this module only recognizes one).

Every string of a parsed message is Unicode text: a line whose JSON holds an unpaired
surrogate escape (`"\\ud800"`) is a parse error, so no string that cannot be written as UTF-8
goes further than this module (decisions/protocol-jsonrpc-input).
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import attrs

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "Batch",
    "HugeInteger",
    "Invalid",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "encode",
    "encode_safely",
    "error_response",
    "parse",
    "parse_one",
    "result_response",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNSUPPORTED_PROTOCOL_VERSION = -32022  # MCP 2026-07-28, UnsupportedProtocolVersionError

RequestId = str | int


@attrs.frozen(kw_only=True)
class Request:
    id: RequestId
    method: str
    params: dict[str, Any] | None


@attrs.frozen(kw_only=True)
class Notification:
    method: str
    params: dict[str, Any] | None


@attrs.frozen(kw_only=True)
class Response:
    """A response sent to us: a server never asks the client anything, so it is ignored."""

    id: RequestId | None


@attrs.frozen(kw_only=True)
class Invalid:
    """A message that cannot be served; `reply` is the error response, or None when the
    message must go unanswered (for example a malformed notification)."""

    reply: dict[str, Any] | None


@attrs.frozen(kw_only=True)
class Batch:
    """A JSON array: its elements, each already classified."""

    items: tuple[Request | Notification | Response | Invalid, ...]


Message = Request | Notification | Response | Invalid | Batch


# JSON numbers that CPython will not turn into an int (its int-string digit limit guards
# against quadratic conversion): kept as a marker, never converted.
MAX_INT_DIGITS = 4300
# No interpreter limit can be set below 640 digits (sys.set_int_max_str_digits).
_ALWAYS_CONVERTED = 640

_INVALID_REQUEST = "Invalid Request"
_SURROGATE_MESSAGE = (
    "Parse error: a string holds an unpaired UTF-16 surrogate escape (\\ud800 to \\udfff); "
    "send Unicode text"
)
_TOO_DEEP_MESSAGE = "Parse error: the JSON is nested too deeply"
_PARAMS_MESSAGE = "Invalid params: params must be an object"
_HUGE_ID_MESSAGE = f"Invalid Request: an integer id has more than {MAX_INT_DIGITS} digits"

# Only a `\u` escape of D800..DFFF can put a surrogate in a decoded string (strict UTF-8
# decoding refuses encoded surrogates), so the walk over the strings runs only when the raw
# line has one (or an escaped backslash followed by such text, which the walk clears).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


@attrs.frozen
class HugeInteger:
    """A JSON integer with more than MAX_INT_DIGITS digits: valid JSON, but too long to be
    converted, and never needed: it is no valid id, and no valid integer argument."""


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; Python's parser accepts them unless told otherwise.
    raise ValueError("not JSON")


def _parse_int(text: str) -> int | HugeInteger:
    if len(text) <= _ALWAYS_CONVERTED:
        return int(text)
    digits = len(text) - text.startswith("-")
    limit = sys.get_int_max_str_digits()
    if digits > MAX_INT_DIGITS or (limit and digits > limit):
        return HugeInteger()
    return int(text)


def _has_surrogate(value: Any) -> bool:
    """True when any string in the decoded value (a key or a value) holds a surrogate."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item) is not None:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def _valid_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def error_response(
    request_id: RequestId | None, code: int, message: str, data: Any = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def result_response(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _invalid(request_id: RequestId | None, message: str = _INVALID_REQUEST) -> Invalid:
    return Invalid(reply=error_response(request_id, INVALID_REQUEST, message))


def encode(message: dict[str, Any] | list[dict[str, Any]]) -> bytes:
    """One line: compact JSON and a newline. JSON escapes every newline inside a string, so
    the line can never be split by the content it carries. Raises ValueError (a string that
    is not Unicode text, a number JSON cannot carry), TypeError or RecursionError."""
    return _compact(message).encode("utf-8") + b"\n"


# One encoder for every line: `json.dumps` with options builds a new one per call.
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _compact(message: Any) -> str:
    text = _COMPACT.encode(message)
    text.encode("utf-8")  # a string that is not Unicode text fails here, not in the writer
    return text


def _encode_one(reply: dict[str, Any]) -> tuple[str, bool]:
    """The reply as JSON text, or its stand-in -32603 (False) when it cannot be encoded."""
    try:
        return _compact(reply), True
    except (ValueError, TypeError, RecursionError):
        pass
    try:
        return _compact(error_response(reply.get("id"), INTERNAL_ERROR, "Internal error")), False
    except ValueError:
        # The id itself cannot be written (the parser lets none such through).
        return _compact(error_response(None, INTERNAL_ERROR, "Internal error")), False


def encode_safely(message: dict[str, Any] | list[dict[str, Any]]) -> tuple[bytes, int]:
    """`encode`, except that a reply which cannot be encoded becomes -32603 "Internal error"
    for its id (in a batch, that element alone). Returns the line and how many replies were
    replaced: encoding one reply never fails the transport that writes it."""
    try:
        return encode(message), 0
    except (ValueError, TypeError, RecursionError):
        pass
    replies = message if isinstance(message, list) else [message]
    parts = []
    replaced = 0
    for reply in replies:
        text, ok = _encode_one(reply)
        replaced += not ok
        parts.append(text)
    line = ",".join(parts)
    if isinstance(message, list):
        line = "[" + line + "]"
    return line.encode("utf-8") + b"\n", replaced


def parse_one(obj: Any) -> Request | Notification | Response | Invalid:
    """Classify one decoded JSON value as a JSON-RPC message."""
    if not isinstance(obj, dict):
        return _invalid(None)
    raw_id = obj.get("id")
    answerable_id: RequestId | None = raw_id if _valid_id(raw_id) else None
    if obj.get("jsonrpc") != "2.0":
        return _invalid(answerable_id)
    if "method" not in obj:
        if "result" in obj or "error" in obj:
            return Response(id=answerable_id)
        return _invalid(answerable_id)
    method = obj["method"]
    if not isinstance(method, str):
        return _invalid(answerable_id)
    params = obj.get("params")
    params_valid = "params" not in obj or isinstance(params, dict)
    if "id" not in obj:
        # A malformed notification is not answered, and not acted on either.
        return Notification(method=method, params=params) if params_valid else Invalid(reply=None)
    if answerable_id is None:
        # An id of null (or of any other type) is not a request, and not a notification.
        message = _HUGE_ID_MESSAGE if isinstance(raw_id, HugeInteger) else _INVALID_REQUEST
        return _invalid(None, message)
    if not params_valid:
        # By-position params are JSON-RPC, but no MCP method takes them.
        return Invalid(reply=error_response(answerable_id, INVALID_PARAMS, _PARAMS_MESSAGE))
    return Request(id=answerable_id, method=method, params=params)


# One decoder for every line: `json.loads` with hooks builds a new one per call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_int=_parse_int)


def parse(line: bytes) -> Message:
    """Decode one line (without its newline) into a message."""
    try:
        obj = _DECODER.decode(line.decode("utf-8"))
    except RecursionError:
        return Invalid(reply=error_response(None, PARSE_ERROR, _TOO_DEEP_MESSAGE))
    except (UnicodeDecodeError, ValueError):
        return Invalid(reply=error_response(None, PARSE_ERROR, "Parse error"))
    if _SURROGATE_ESCAPE.search(line) is not None and _has_surrogate(obj):
        if isinstance(obj, dict) and "method" in obj and "id" not in obj:
            return Invalid(reply=None)  # a notification is never answered, whatever it holds
        return Invalid(reply=error_response(None, PARSE_ERROR, _SURROGATE_MESSAGE))
    if isinstance(obj, list):
        if not obj:
            return _invalid(None)
        return Batch(items=tuple(parse_one(item) for item in obj))
    return parse_one(obj)
