"""JSON-RPC 2.0 messages: one line of bytes in, one typed message (or a precise error) out.

Nothing else in the project reads or writes raw JSON-RPC. The rules are those of JSON-RPC 2.0
narrowed by MCP: an id is a string or an integer, never null; params, when present, is an
object; a batch is an array and is only accepted where a revision allows it (the caller
decides, this module only recognizes one).
"""

from __future__ import annotations

import json
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
    "Invalid",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "encode",
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


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; Python's parser accepts them unless told otherwise.
    raise ValueError("not JSON")


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


def encode(message: dict[str, Any] | list[dict[str, Any]]) -> bytes:
    """One line: compact JSON and a newline. JSON escapes every newline inside a string, so
    the line can never be split by the content it carries."""
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8") + b"\n"


def parse_one(obj: Any) -> Request | Notification | Response | Invalid:
    """Classify one decoded JSON value as a JSON-RPC message."""
    if not isinstance(obj, dict):
        return Invalid(reply=error_response(None, INVALID_REQUEST, "Invalid Request"))
    raw_id = obj.get("id")
    answerable_id: RequestId | None = raw_id if _valid_id(raw_id) else None
    if obj.get("jsonrpc") != "2.0":
        return Invalid(reply=error_response(answerable_id, INVALID_REQUEST, "Invalid Request"))
    if "method" not in obj:
        if "result" in obj or "error" in obj:
            return Response(id=answerable_id)
        return Invalid(reply=error_response(answerable_id, INVALID_REQUEST, "Invalid Request"))
    method = obj["method"]
    has_id = "id" in obj
    if not isinstance(method, str):
        return Invalid(reply=error_response(answerable_id, INVALID_REQUEST, "Invalid Request"))
    if has_id and not _valid_id(raw_id):
        # An id of null (or of any other type) is not a request, and not a notification.
        return Invalid(reply=error_response(None, INVALID_REQUEST, "Invalid Request"))
    params = obj.get("params")
    if "params" in obj and not isinstance(params, dict):
        if has_id:
            return Invalid(reply=error_response(raw_id, INVALID_REQUEST, "Invalid Request"))
        return Invalid(reply=None)
    if not has_id:
        return Notification(method=method, params=params)
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):  # narrowed above
        return Invalid(reply=error_response(None, INVALID_REQUEST, "Invalid Request"))
    return Request(id=raw_id, method=method, params=params)


def parse(line: bytes) -> Message:
    """Decode one line (without its newline) into a message."""
    try:
        obj = json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return Invalid(reply=error_response(None, PARSE_ERROR, "Parse error"))
    if isinstance(obj, list):
        if not obj:
            return Invalid(reply=error_response(None, INVALID_REQUEST, "Invalid Request"))
        return Batch(items=tuple(parse_one(item) for item in obj))
    return parse_one(obj)
