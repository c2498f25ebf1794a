"""The MCP method table for both eras, without I/O.

`Dispatcher.handle(message)` turns one parsed message into what the transport must do:
send a reply now, start a tool call (and render its outcome with `render_call`), cancel a
call, or nothing. A request carrying `io.modelcontextprotocol/protocolVersion` in `_meta` is
served statelessly as 2026-07-28; `initialize` opens the handshake era for this dispatcher
(one stdio process, or one HTTP session). Both eras can be served by one dispatcher.

Implements REQ-MCP-001, REQ-MCP-006, REQ-MCP-011, REQ-CTX-003 and REQ-ERR-003.
"""

from __future__ import annotations

from typing import Any

import attrs

from rypsok.core import telemetry
from rypsok.core.model import (
    MAX_MESSAGE_CHARS,
    FetchRequest,
    SearchRequest,
    ToolError,
    canonical_json,
)
from rypsok.mcp.protocol import jsonrpc, revisions
from rypsok.mcp.protocol.jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    RequestId,
)
from rypsok.mcp.protocol.tools import INSTRUCTIONS, StatusCall, ToolSet

__all__ = [
    "CACHE_SCOPE",
    "TTL_MS",
    "Call",
    "Cancel",
    "Dispatcher",
    "Nothing",
    "Reply",
]

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT = "io.modelcontextprotocol/clientInfo"
META_SERVER = "io.modelcontextprotocol/serverInfo"

# The tool list and the discovery result change only with the configuration, which is fixed
# for the life of the process, and are the same for every caller: fresh for an hour, public.
TTL_MS = 3_600_000
CACHE_SCOPE = "public"

_MODERN_METHODS = frozenset({"server/discover", "tools/list", "tools/call"})
_LEGACY_METHODS = frozenset({"initialize", "ping", "tools/list", "tools/call"})


@attrs.frozen(kw_only=True)
class Reply:
    payload: dict[str, Any]


@attrs.frozen(kw_only=True)
class Nothing:
    """No message is sent (a notification, or a response sent to us)."""


@attrs.frozen(kw_only=True)
class Cancel:
    request_id: RequestId


@attrs.frozen(kw_only=True)
class Call:
    """A validated tool call to run; `render_call` makes its reply."""

    request_id: RequestId
    tool: str
    request: SearchRequest | FetchRequest | StatusCall
    revision: str


Action = Reply | Nothing | Cancel | Call


def _echo(text: str) -> str:
    """The caller's text as rypsok repeats it in an error: at most LIM-I4 characters, like
    every message it writes (a parsed string holds no surrogate, so any cut is whole)."""
    return text[:MAX_MESSAGE_CHARS]


def _invalid_params(request_id: RequestId, why: str) -> Reply:
    return Reply(
        payload=jsonrpc.error_response(request_id, INVALID_PARAMS, f"Invalid params: {why}")
    )


def _not_found(request_id: RequestId) -> Reply:
    return Reply(payload=jsonrpc.error_response(request_id, METHOD_NOT_FOUND, "Method not found"))


class Dispatcher:
    """The protocol state of one stdio process (or one HTTP session)."""

    def __init__(
        self,
        toolset: ToolSet,
        *,
        legacy_enabled: bool,
        structured_content: bool,
        server_version: str,
    ) -> None:
        self._tools = toolset
        self._legacy_enabled = legacy_enabled
        self._structured = structured_content
        self._server_info = {"name": "rypsok", "version": server_version}
        self.legacy_revision: str | None = None

    # -- messages -------------------------------------------------------------------------

    def batches_allowed(self) -> bool:
        return self.legacy_revision in revisions.BATCH_REVISIONS

    def handle(self, message: jsonrpc.Message) -> Action:
        if isinstance(message, jsonrpc.Batch):
            # Batches are served by the transport item by item; here only a refusal.
            return Reply(payload=jsonrpc.error_response(None, INVALID_REQUEST, "Invalid Request"))
        if isinstance(message, jsonrpc.Invalid):
            return Nothing() if message.reply is None else Reply(payload=message.reply)
        if isinstance(message, jsonrpc.Response):
            return Nothing()
        if isinstance(message, jsonrpc.Notification):
            return self._notification(message)
        return self._request(message)

    def handle_batch_item(self, message: jsonrpc.Message) -> Action:
        """An element of an accepted batch; `initialize` may not be one (2025-03-26)."""
        if isinstance(message, jsonrpc.Request) and message.method == "initialize":
            return Reply(
                payload=jsonrpc.error_response(message.id, INVALID_REQUEST, "Invalid Request")
            )
        return self.handle(message)

    def _notification(self, message: jsonrpc.Notification) -> Action:
        if message.method == "notifications/cancelled" and message.params is not None:
            target = message.params.get("requestId")
            if (isinstance(target, int) and not isinstance(target, bool)) or isinstance(
                target, str
            ):
                return Cancel(request_id=target)
        # notifications/initialized and every other notification: nothing to do, no answer.
        return Nothing()

    def _request(self, request: jsonrpc.Request) -> Action:
        params = request.params or {}
        meta = params.get("_meta")
        if "_meta" in params and not isinstance(meta, dict):
            return _invalid_params(request.id, "_meta must be an object")
        if isinstance(meta, dict) and META_VERSION in meta:
            return self._modern(request, params, meta)
        return self._legacy(request, params)

    # -- 2026-07-28 -----------------------------------------------------------------------

    def _modern(
        self, request: jsonrpc.Request, params: dict[str, Any], meta: dict[str, Any]
    ) -> Action:
        version = meta[META_VERSION]
        if not isinstance(version, str):
            return _invalid_params(request.id, f"{META_VERSION} must be a string")
        if version != revisions.MODERN_REVISION:
            return Reply(
                payload=jsonrpc.error_response(
                    request.id,
                    UNSUPPORTED_PROTOCOL_VERSION,
                    "Unsupported protocol version",
                    {
                        "supported": revisions.supported_versions(
                            legacy_enabled=self._legacy_enabled
                        ),
                        "requested": _echo(version),
                    },
                )
            )
        if not isinstance(meta.get(META_CAPABILITIES), dict):
            return _invalid_params(request.id, f"_meta must carry {META_CAPABILITIES}, an object")
        if META_CLIENT in meta:
            info = meta[META_CLIENT]
            if not (
                isinstance(info, dict)
                and isinstance(info.get("name"), str)
                and isinstance(info.get("version"), str)
            ):
                return _invalid_params(request.id, f"{META_CLIENT} needs a name and a version")
        if request.method not in _MODERN_METHODS:
            return _not_found(request.id)
        return self._method(request, params, revisions.MODERN_REVISION)

    # -- handshake revisions --------------------------------------------------------------

    def _legacy(self, request: jsonrpc.Request, params: dict[str, Any]) -> Action:
        if request.method == "initialize":
            return self._initialize(request, params)
        if request.method == "server/discover":
            return _invalid_params(request.id, f"_meta must carry {META_VERSION}")
        if request.method not in _LEGACY_METHODS:
            return _not_found(request.id)
        if not self._legacy_enabled or (self.legacy_revision is None and request.method != "ping"):
            # Neither a modern request nor one of an open handshake session.
            return _invalid_params(request.id, f"_meta must carry {META_VERSION}")
        if request.method == "ping":
            return Reply(payload=jsonrpc.result_response(request.id, {}))
        assert self.legacy_revision is not None
        return self._method(request, params, self.legacy_revision)

    def _initialize(self, request: jsonrpc.Request, params: dict[str, Any]) -> Action:
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            return _invalid_params(request.id, "protocolVersion must be a string")
        if not self._legacy_enabled:
            return Reply(
                payload=jsonrpc.error_response(
                    request.id,
                    UNSUPPORTED_PROTOCOL_VERSION,
                    f"Unsupported protocol version; this server speaks {revisions.MODERN_REVISION}",
                    {
                        "supported": [revisions.MODERN_REVISION],
                        "requested": _echo(requested),
                    },
                )
            )
        if not isinstance(params.get("capabilities"), dict):
            return _invalid_params(request.id, "capabilities must be an object")
        revision = revisions.negotiate_legacy(requested)
        self.legacy_revision = revision
        return Reply(
            payload=jsonrpc.result_response(
                request.id,
                {
                    "protocolVersion": revision,
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": dict(self._server_info),
                    "instructions": INSTRUCTIONS,
                },
            )
        )

    # -- the methods both eras share ------------------------------------------------------

    def _complete(self, revision: str, result: dict[str, Any]) -> dict[str, Any]:
        if revision == revisions.MODERN_REVISION:
            return {"resultType": "complete", **result}
        return result

    def _method(self, request: jsonrpc.Request, params: dict[str, Any], revision: str) -> Action:
        if request.method == "server/discover":
            result = {
                "resultType": "complete",
                "supportedVersions": revisions.supported_versions(
                    legacy_enabled=self._legacy_enabled
                ),
                "capabilities": {"tools": {}},
                "instructions": INSTRUCTIONS,
                "_meta": {META_SERVER: dict(self._server_info)},
                "ttlMs": TTL_MS,
                "cacheScope": CACHE_SCOPE,
            }
            return Reply(payload=jsonrpc.result_response(request.id, result))
        if request.method == "tools/list":
            tools = self._tools.definitions(
                with_output_schema=revision in revisions.STRUCTURED_REVISIONS
            )
            result = {"tools": tools}
            if revision == revisions.MODERN_REVISION:
                result = {
                    "resultType": "complete",
                    **result,
                    "ttlMs": TTL_MS,
                    "cacheScope": CACHE_SCOPE,
                }
            return Reply(payload=jsonrpc.result_response(request.id, result))
        return self._tools_call(request, params, revision)

    def _tools_call(
        self, request: jsonrpc.Request, params: dict[str, Any], revision: str
    ) -> Action:
        name = params.get("name")
        if not isinstance(name, str):
            return _invalid_params(request.id, "name must be a string")
        arguments = params.get("arguments", {})
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return _invalid_params(request.id, "arguments must be an object")
        tool = self._tools.get(name)
        if tool is None:
            return Reply(payload=jsonrpc.error_response(request.id, INVALID_PARAMS, "unknown tool"))
        try:
            call_request = self._tools.request_for(tool, arguments)
        except ToolError as error:
            # Refused before the service sees it: counted here, as the service counts its
            # own refusals (REQ-OBS-007) and call errors (REQ-OBS-003).
            reason = error.detail.reason
            counted = str(reason if reason is not None else error.kind)
            telemetry.COUNTERS.refused(name, counted)
            telemetry.COUNTERS.call_error(name, str(error.kind))
            telemetry.info("refused", tool=name, reason=counted)
            return Reply(payload=self.render_error(request.id, revision, error))
        return Call(request_id=request.id, tool=name, request=call_request, revision=revision)

    # -- rendering a call's outcome -------------------------------------------------------

    def _tool_result(
        self, request_id: RequestId, revision: str, body: dict[str, Any], is_error: bool
    ) -> dict[str, Any]:
        result: dict[str, Any] = {"content": [{"type": "text", "text": canonical_json(body)}]}
        if self._structured and revision in revisions.STRUCTURED_REVISIONS:
            result["structuredContent"] = body
        result["isError"] = is_error
        return jsonrpc.result_response(request_id, self._complete(revision, result))

    def render_response(self, call: Call, body: dict[str, Any]) -> dict[str, Any]:
        """A call's response object (`SearchResponse.to_json()` and the like)."""
        return self._tool_result(call.request_id, call.revision, body, False)

    def render_error(
        self, request_id: RequestId, revision: str, error: ToolError
    ) -> dict[str, Any]:
        return self._tool_result(request_id, revision, error.to_json(), True)

    def render_crash(self, call: Call) -> dict[str, Any]:
        """An unexpected failure inside a call: a protocol error that says nothing more."""
        return jsonrpc.error_response(call.request_id, jsonrpc.INTERNAL_ERROR, "Internal error")
