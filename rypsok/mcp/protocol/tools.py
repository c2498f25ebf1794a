"""The tool contract: definitions, schemas, the server instructions, argument validation.

The descriptions and the instructions are contract strings of the book (external design §2
and §3) and change only through review; the fixture tests/fixtures/tools-list.json pins them.
Input schemas are flat objects that vary with the configuration only (served categories,
languages, limits), never per connection. Output schemas are generated from the model's
vocabularies so that a new notice code or state cannot be forgotten here. Each output schema
describes both shapes a call can return: the tool's response, and the error object of an
error result (`isError: true`), whose detail keys come from the model's `ErrorDetail`.

Implements REQ-MCP-005, REQ-MCP-009, REQ-STATUS-003 and REQ-CTX-002.
"""

from __future__ import annotations

import enum
import re
import typing
from typing import TYPE_CHECKING, Any, Final

import attrs

from rypsok.core import errors
from rypsok.core.model import (
    FAILURE_CLASSES,
    MAX_MESSAGE_CHARS,
    DisabledReason,
    EngineState,
    ErrorDetail,
    ErrorKind,
    FetchRequest,
    NoticeCode,
    Outcome,
    Reason,
    SearchRequest,
)
from rypsok.mcp.protocol.jsonrpc import MAX_INT_DIGITS, HugeInteger

# The parts LIM-I1 counts are built below the configuration, which checks their size.
from rypsok.shared.tooldefs import (
    ENGINE_STATUS,
    ENGINE_STATUS_DESCRIPTION,
    INSTRUCTIONS,
    WEB_FETCH,
    WEB_FETCH_DESCRIPTION,
    WEB_SEARCH,
    WEB_SEARCH_DESCRIPTION,
    ToolSettings,
    counted_chars,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "ENGINE_STATUS",
    "ENGINE_STATUS_DESCRIPTION",
    "INSTRUCTIONS",
    "WEB_FETCH",
    "WEB_FETCH_DESCRIPTION",
    "WEB_SEARCH",
    "WEB_SEARCH_DESCRIPTION",
    "StatusCall",
    "ToolSet",
    "build_toolset",
    "definition_budget",
]

_ANNOTATIONS_BASE = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True}


@attrs.frozen(kw_only=True)
class StatusCall:
    """An engine_status call: it has no parameters."""


def _notice_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "code": {"type": "string", "enum": [str(c) for c in NoticeCode]},
            "engine": {"type": "string"},
            "reason": {"type": "string", "enum": [str(r) for r in Reason]},
            "count": {"type": "integer", "minimum": 0},
        },
        "required": ["code"],
        "additionalProperties": False,
    }


def _envelope(outcomes: Iterable[Outcome]) -> dict[str, Any]:
    return {
        "outcome": {"type": "string", "enum": [str(o) for o in outcomes]},
        "notices": {"type": "array", "items": _notice_schema()},
    }


def _detail_value_schema(hint: Any) -> dict[str, Any]:
    """The JSON Schema of one `ErrorDetail` field, from its type (None means "absent")."""
    members = [h for h in typing.get_args(hint) if h is not type(None)] or [hint]
    (value,) = members
    if isinstance(value, type) and issubclass(value, enum.Enum):
        return {"type": "string", "enum": [str(v) for v in value]}
    if value is str:
        return {"type": "string"}
    if value is int:
        return {"type": "integer"}
    if typing.get_origin(value) is tuple and typing.get_args(value)[0] is str:
        return {"type": "array", "items": {"type": "string"}}
    # A field type this mapping does not know yet: fail where the schema is built (at import),
    # never with a schema that says nothing about the field.
    raise TypeError(f"no JSON Schema for ErrorDetail fields of type {value!r}")


def _error_schema() -> dict[str, Any]:
    """`{"error": {kind, message, detail}}` (external design §4)."""
    hints = typing.get_type_hints(ErrorDetail)
    detail = {
        "type": "object",
        "properties": {
            f.name: _detail_value_schema(hints[f.name]) for f in attrs.fields(ErrorDetail)
        },
        "additionalProperties": False,
    }
    error = {
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": [str(k) for k in ErrorKind]},
            "message": {"type": "string", "maxLength": MAX_MESSAGE_CHARS},
            "detail": detail,
        },
        "required": ["kind", "message", "detail"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"error": error},
        "required": ["error"],
        "additionalProperties": False,
    }


def _response_or_error(response: dict[str, Any]) -> dict[str, Any]:
    # The revisions with output schemas want `"type": "object"` at the top; the two shapes
    # share no required key, so exactly one of them matches a valid structured content.
    return {"type": "object", "oneOf": [response, _error_schema()]}


def _listing(name: str, item: dict[str, Any]) -> dict[str, Any]:
    """The output schema of a tool whose answer is the envelope and an array `name` of
    `item` (web_search's results, engine_status's engines)."""
    return _response_or_error(
        {
            "type": "object",
            "properties": {**_envelope(Outcome), name: {"type": "array", "items": item}},
            "required": ["outcome", "notices", name],
            "additionalProperties": False,
        }
    )


def _search_output_schema() -> dict[str, Any]:
    result = {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "url": {"type": "string"},
            "snippet": {"type": "string"},
            "date": {"type": "string", "format": "date"},
            "engines": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["title", "url", "snippet"],
        "additionalProperties": False,
    }
    return _listing("results", result)


def _status_output_schema() -> dict[str, Any]:
    engine = {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "state": {"type": "string", "enum": [str(s) for s in EngineState]},
            "latency_ms": {"type": ["integer", "null"], "minimum": 0},
            "reason": {"type": "string", "enum": [str(r) for r in DisabledReason]},
            "recent_failures": {
                "type": "object",
                "properties": {
                    "requests": {"type": "integer", "minimum": 0},
                    "count": {"type": "integer", "minimum": 0},
                    "classes": {
                        "type": "object",
                        "properties": {
                            str(c): {"type": "integer", "minimum": 1}
                            for c in sorted(FAILURE_CLASSES)
                        },
                        "additionalProperties": False,
                    },
                },
                "required": ["requests", "count", "classes"],
                "additionalProperties": False,
            },
        },
        "required": ["id", "state", "latency_ms"],
        "additionalProperties": False,
    }
    return _listing("engines", engine)


def _fetch_output_schema() -> dict[str, Any]:
    return _response_or_error(
        {
            "type": "object",
            "properties": {
                **_envelope((Outcome.OK,)),
                "url": {"type": "string"},
                "title": {"type": "string"},
                "content": {"type": "string"},
                "truncated": {"type": "boolean"},
                "next_start_char": {"type": "integer", "minimum": 0},
            },
            "required": ["outcome", "notices", "url", "title", "content", "truncated"],
            "additionalProperties": False,
        }
    )


_EXPECTED = {"string": "a string", "integer": "an integer"}
# A parsed message holds no surrogate (the JSON-RPC parser refuses it); a transport that
# builds arguments another way meets the same rule here, before any work (REQ-MCP-004).
_SURROGATE = re.compile("[\ud800-\udfff]")


# An unknown name goes back to the caller that wrote it, in detail.parameter, when it can
# be shown as it is: printable, without a surrogate, short (a parameter name, not text), and
# without the shape of a credential (an error never carries one, REQ-ERR-004).
_SHOWN_NAME_MAX_CHARS = 64


def _showable(name: str) -> bool:
    # The secret check (its many patterns compile on import) is loaded by the first name that
    # needs it, or by the first web_search, never by the start: discover answers without it.
    from rypsok.core import secret_scan

    return (
        0 < len(name) <= _SHOWN_NAME_MAX_CHARS
        and name.isprintable()
        and _SURROGATE.search(name) is None
        and secret_scan.find_secret(name) is None
    )


def _check_type(name: str, value: Any, schema: Mapping[str, Any]) -> Any:
    """The value with its JSON type checked; a whole-number float counts as an integer, as
    JSON Schema says. Never echoes the value (it is the caller's text)."""
    if schema["type"] == "string":
        if isinstance(value, str):
            if _SURROGATE.search(value) is not None:
                raise errors.invalid_type(name, "Unicode text (it holds an unpaired surrogate)")
            return value
    elif isinstance(value, int) and not isinstance(value, bool):
        return value
    elif isinstance(value, float) and value.is_integer():
        return int(value)
    elif isinstance(value, HugeInteger):
        # An integer too long to convert is beyond every bound of the schema; start_char
        # has no maximum in the schema (the content's length bounds it).
        if "maximum" in schema:
            raise errors.invalid_range(name, schema["minimum"], schema["maximum"])
        raise errors.integer_too_long(name, schema["minimum"], MAX_INT_DIGITS)
    raise errors.invalid_type(name, _EXPECTED[schema["type"]])


@attrs.frozen(kw_only=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    open_world: bool

    def definition(self, *, with_output_schema: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
        }
        if with_output_schema:
            out["outputSchema"] = self.output_schema
        out["annotations"] = {**_ANNOTATIONS_BASE, "openWorldHint": self.open_world}
        return out

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments checked against the input schema, before any work (REQ-MCP-004):
        unknown properties, then each property in schema order (required, then type).
        Ranges and enumerations are the service's to judge: it words those errors and
        judges them before any engine is asked."""
        properties: dict[str, Any] = self.input_schema["properties"]
        unknown = [key for key in arguments if key not in properties]
        if unknown:
            shown = next((key for key in unknown if _showable(key)), None)
            raise errors.unknown_parameter(len(unknown), shown, tuple(properties))
        checked: dict[str, Any] = {}
        for name, schema in properties.items():
            if name not in arguments:
                if name in self.input_schema.get("required", ()):
                    raise errors.required(name)
                continue
            checked[name] = _check_type(name, arguments[name], schema)
        return checked


@attrs.frozen(kw_only=True)
class ToolSet:
    """The tools this process serves, in their deterministic order."""

    tools: tuple[Tool, ...]

    def get(self, name: str) -> Tool | None:
        for tool in self.tools:
            if tool.name == name:
                return tool
        return None

    def definitions(self, *, with_output_schema: bool = True) -> list[dict[str, Any]]:
        return [t.definition(with_output_schema=with_output_schema) for t in self.tools]

    def request_for(
        self, tool: Tool, arguments: Mapping[str, Any]
    ) -> SearchRequest | FetchRequest | StatusCall:
        """Validate and build the service request; raises ToolError (invalid_request)."""
        checked = tool.validate(arguments)
        if tool.name == WEB_SEARCH:
            return SearchRequest(**checked)
        if tool.name == WEB_FETCH:
            return FetchRequest(**checked)
        return StatusCall()


# What each served tool adds to its counted parts: the output schema and the open-world hint.
_SERVED: Final = {
    WEB_SEARCH: (_search_output_schema, True),
    WEB_FETCH: (_fetch_output_schema, True),
    ENGINE_STATUS: (_status_output_schema, False),
}


def build_toolset(settings: ToolSettings) -> ToolSet:
    """The tools a process serves, from the same parts the configuration counts (LIM-I1)."""
    return ToolSet(
        tools=tuple(
            Tool(
                name=name,
                description=description,
                input_schema=input_schema,
                output_schema=_SERVED[name][0](),
                open_world=_SERVED[name][1],
            )
            for name, description, input_schema in settings.counted_parts()
        )
    )


def definition_budget(toolset: ToolSet) -> int:
    """Characters counted against LIM-I1 of the tools served, by the count the configuration
    check uses too (rypsok.shared.tooldefs)."""
    return counted_chars((t.name, t.description, t.input_schema) for t in toolset.tools)
