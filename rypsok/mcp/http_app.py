"""MCP over Streamable HTTP: the ASGI application, the gate first, then the protocol.

The gate answers before any JSON is parsed: 401 (no or a wrong bearer token), 404 (another
path), 413 (a body above LIM-H2), 408 (a request still running after LIM-H5, its body
included). Then the listener's contract (external design §2): 403 (Host or Origin not
allowed), 405, 406 (Accept), 415 (Content-Type, or not a JSON-RPC message), 400 (protocol
headers missing or disagreeing with the body, a handshake-era POST without its session), 503
(a handshake while LIM-H6 sessions live). Everything after that is the same dispatcher as
over stdio: this module only moves bytes between HTTP and `rypsok.mcp.protocol`.

2026-07-28 requests are stateless and answered with one JSON object; a closed connection
cancels the call. The handshake revisions get an `Mcp-Session-Id` session each.

Implements REQ-MCP-003, REQ-DEP-002 and REQ-SEC-022.
"""

from __future__ import annotations

import binascii
import json
import re
from base64 import b64decode
from typing import TYPE_CHECKING, Any, Final

import trio

from rypsok.config.rules import parse_bind
from rypsok.core import telemetry
from rypsok.core.model import StatusResponse
from rypsok.mcp.protocol import Call, Cancel, Dispatcher, Reply, StatusCall, jsonrpc, revisions
from rypsok.mcp.protocol.dispatch import META_CAPABILITIES, META_CLIENT, META_VERSION
from rypsok.mcp.sessions import SESSION_TTL_S, SessionTable
from rypsok.mcp.tool_calls import execute, make_dispatcher, outcome

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, MutableMapping

    from rypsok.config.schema import Config
    from rypsok.mcp.caller_tokens import Callers
    from rypsok.mcp.tool_calls import ToolService

    Scope = MutableMapping[str, Any]
    Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
    Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
    # An answer decided: the status, the encoded body (b"" for none) and extra headers.
    _Answer = tuple[int, bytes, tuple[tuple[bytes, bytes], ...]]

__all__ = [
    "CONNECTION_CLAIM",
    "EXPECT_CONTINUE",
    "HEADER_BLOCK_BYTES",
    "HEADER_MISMATCH",
    "MCP_PATH",
    "McpHttpApp",
    "RefusalLog",
    "address_family",
]

MCP_PATH: Final = "/mcp"
HEADER_BLOCK_BYTES: Final = 16384  # LIM-H7, fixed
# Set in the scope by the listener when it cancels the request itself as soon as the peer
# closes the connection (HTTP/1, one request at a time), so the app need not watch for it:
# a set into which the app puts the request's cancel scope while it runs.
CONNECTION_CANCELS: Final = "rypsok.connection_cancels"
HEADER_MISMATCH: Final = -32020  # 2026-07-28, HeaderMismatch
RETRY_AFTER_S: Final = b"30"
_SENTINEL_START: Final = "=?base64?"
_SENTINEL_END: Final = "?="
_JSON: Final = b"application/json"
# Outside RFC 9110's field value (visible ASCII, space, tab).
_INVALID_FIELD_BYTE: Final = re.compile(rb"[^\t\x20-\x7e]")
_SSE: Final = b"text/event-stream"
_LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "[::1]")

# Reasons counted under `http` in the counters event; the logged ones also get lines, in
# aggregate (`refuse`).
LOGGED_REASONS: Final = frozenset(
    {
        "too_many_connections",
        "body_too_large",
        "unauthorized",
        "request_timeout",
        "session_limit",
        "sdk_forbidden",
        "caller_share",
    }
)
# One `http_refused` line per reason and address family per interval (issue 18.5): the first
# refusal at once, those after it in one line with their count when the interval ends.
REFUSAL_LOG_INTERVAL_S: Final = 10.0
# Set in the scope by the listener: the connection's claim by a caller (`Listener.claim`),
# and (HTTP/1) what sends `100 Continue` once the gate has decided to read the body.
CONNECTION_CLAIM: Final = "rypsok.connection_claim"
EXPECT_CONTINUE: Final = "rypsok.expect_continue"
# CORS (issue 18.5): what a browser host of a listed origin may send and read.
_CORS_METHODS: Final = b"POST, DELETE"
_CORS_REQUEST_HEADERS: Final = (
    b"authorization, content-type, accept, mcp-protocol-version, mcp-method, mcp-name, "
    b"mcp-session-id, last-event-id"
)
_CORS_EXPOSED: Final = b"mcp-session-id, www-authenticate, retry-after"
_CORS_MAX_AGE_S: Final = b"600"
_CORS_PREFLIGHT: Final = (
    (b"access-control-allow-methods", _CORS_METHODS),
    (b"access-control-allow-headers", _CORS_REQUEST_HEADERS),
    (b"access-control-max-age", _CORS_MAX_AGE_S),
)


def address_family(host: str | None) -> str:
    """`ipv6` or `ipv4`: what the log may say about a peer's address."""
    return "ipv6" if host is not None and ":" in host else "ipv4"


class RefusalLog:
    """The refusals of one listener: counted, always; the logged reasons written in
    aggregate, so that a flood writes two lines per reason and family per interval at most,
    whatever its rate (never the address, never a header value)."""

    def __init__(self) -> None:
        self._logged_at: dict[tuple[str, str], float] = {}
        self._pending: dict[tuple[str, str], int] = {}

    def refuse(self, reason: str, family: str) -> None:
        telemetry.COUNTERS.http_refused(reason)
        if reason not in LOGGED_REASONS:
            return
        key = (reason, family)
        now = trio.current_time()
        last = self._logged_at.get(key)
        if last is None or now - last >= REFUSAL_LOG_INTERVAL_S:
            self._logged_at[key] = now
            count = self._pending.pop(key, 0) + 1
            telemetry.info("http_refused", reason=reason, family=family, count=count)
        else:
            self._pending[key] = self._pending.get(key, 0) + 1

    def flush(self, *, final: bool = False) -> None:
        """The line of each reason whose interval has ended with refusals not yet logged
        (`final`: all of them, at the shutdown)."""
        now = trio.current_time()
        for key, count in list(self._pending.items()):
            if final or now - self._logged_at[key] >= REFUSAL_LOG_INTERVAL_S:
                del self._pending[key]
                self._logged_at[key] = now
                telemetry.info("http_refused", reason=key[0], family=key[1], count=count)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write the aggregated lines as their intervals end (beside the listener)."""
        task_status.started()
        while True:
            await trio.sleep(REFUSAL_LOG_INTERVAL_S)
            self.flush()


class _Refusal(Exception):
    """An HTTP answer other than 200 decided before the call runs."""

    def __init__(
        self,
        status: int,
        *,
        reason: str | None = None,
        body: dict[str, Any] | None = None,
        headers: tuple[tuple[bytes, bytes], ...] = (),
    ) -> None:
        super().__init__(status)
        self.status = status
        self.reason = reason
        self.body = body
        self.headers = headers


def _error(
    status: int,
    code: int,
    message: str,
    *,
    reason: str | None = None,
    request_id: jsonrpc.RequestId | None = None,
    headers: tuple[tuple[bytes, bytes], ...] = (),
) -> _Refusal:
    body = jsonrpc.error_response(request_id, code, message)
    return _Refusal(status, reason=reason, body=body, headers=headers)


class _PeerGone(Exception):
    """The client closed its side: nobody is left to answer."""


_ACCEPT_CACHE: dict[bytes, frozenset[bytes]] = {}
_ACCEPT_CACHE_SIZE: Final = 64


def _accepted(accept: bytes) -> frozenset[bytes]:
    """`_media_types`, remembered for the few Accept values clients send over and over."""
    found = _ACCEPT_CACHE.get(accept)
    if found is None:
        found = frozenset(_media_types(accept))
        if len(_ACCEPT_CACHE) >= _ACCEPT_CACHE_SIZE:
            _ACCEPT_CACHE.clear()  # bounded: a client varying its header gains nothing
        _ACCEPT_CACHE[accept] = found
    return found


def _media_types(accept: bytes) -> set[bytes]:
    """The media types an Accept header lists with a q above 0, in lower case."""
    found: set[bytes] = set()
    for item in accept.lower().split(b","):
        parts = [p.strip() for p in item.split(b";")]
        if not parts[0]:
            continue
        acceptable = True
        for param in parts[1:]:
            name, _, value = param.partition(b"=")
            if name.strip() == b"q":
                try:
                    acceptable = float(value.strip()) > 0
                except ValueError:
                    acceptable = False
        if acceptable:
            found.add(parts[0])
    return found


def _is_json_content(content_type: bytes | None) -> bool:
    if content_type is None:
        return False
    return content_type.split(b";", 1)[0].strip().lower() == _JSON


class _BadHeader(Exception):
    pass


_HEADER_TEXTS: dict[bytes, str] = {}
_HEADER_TEXTS_SIZE: Final = 64


def _header_text(value: bytes, name: str) -> str:
    """`_decode_header`, remembered for the few values (revision, method, tool name) clients
    send over and over; a value that fails is decoded, and refused, every time."""
    text = _HEADER_TEXTS.get(value)
    if text is None:
        text = _decode_header(value, name)
        if len(_HEADER_TEXTS) >= _HEADER_TEXTS_SIZE:
            _HEADER_TEXTS.clear()  # bounded: a client varying its headers gains nothing
        _HEADER_TEXTS[value] = text
    return text


def _decode_header(value: bytes, name: str) -> str:
    """A protocol header's value, decoded from the `=?base64?…?=` form when it has it."""
    if not value.isascii():
        raise _BadHeader(f"{name} is not ASCII")
    if _INVALID_FIELD_BYTE.search(value):
        raise _BadHeader(f"{name} has invalid characters")
    text = value.decode("ascii")
    if text.startswith(_SENTINEL_START) and text.endswith(_SENTINEL_END) and len(text) >= 11:
        encoded = text[len(_SENTINEL_START) : -len(_SENTINEL_END)]
        try:
            return b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise _BadHeader(f"{name} is not valid base64 UTF-8") from None
    return text


class _StatusReplies:
    """engine_status's answer, encoded once for each content it has.

    The answer is a function of the `StatusResponse` (a frozen value: each engine's state,
    median latency and reason) and of the revision alone: every dispatcher of the app is made
    from the same configuration. So the last encoding is kept with the value it was made
    from and used again while the core hands out an equal one; any change of an engine's
    state or latency makes an unequal value, which is encoded afresh. Only the JSON-RPC id
    differs between calls: it is written around the kept `result`, in the order
    `jsonrpc.result_response` gives the members.
    """

    __slots__ = ("_key", "_result")

    def __init__(self) -> None:
        self._key: tuple[StatusResponse, str] | None = None
        self._result = b""

    def encode(self, dispatcher: Dispatcher, call: Call, response: StatusResponse) -> bytes:
        key = (response, call.revision)
        if key != self._key:
            reply = dispatcher.render_response(call, response.to_json())
            self._result = jsonrpc.encode(reply["result"])[:-1]  # without the newline
            self._key = key
        head = (_REPLY_HEAD, _id_json(call.request_id), _REPLY_RESULT, self._result, b"}\n")
        return b"".join(head)


_REPLY_HEAD: Final = b'{"jsonrpc":"2.0","id":'
_REPLY_RESULT: Final = b',"result":'


def _id_json(request_id: jsonrpc.RequestId) -> bytes:
    """A JSON-RPC id as `jsonrpc.encode` writes it (an int, or a string kept in UTF-8)."""
    if isinstance(request_id, int):
        return b"%d" % request_id
    return json.dumps(request_id, ensure_ascii=False).encode("utf-8")


class _Request:
    """The parts of one HTTP request the handler reads."""

    __slots__ = (
        "claim",
        "connection_cancels",
        "cors",
        "expect_continue",
        "family",
        "head_bytes",
        "headers",
        "method",
        "path",
    )

    def __init__(self, scope: Scope) -> None:
        self.connection_cancels: set[trio.CancelScope] | None = scope.get(CONNECTION_CANCELS)
        self.claim: Callable[[str], bool] | None = scope.get(CONNECTION_CLAIM)
        self.expect_continue: Callable[[], Awaitable[None]] | None = scope.get(EXPECT_CONTINUE)
        self.cors: tuple[tuple[bytes, bytes], ...] = ()
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        client = scope.get("client")
        self.family = address_family(client[0] if client else None)
        headers: dict[bytes, bytes | None] = {}
        # The request line and the header block as HTTP/1 writes them (LIM-H7).
        size = len(self.method) + len(scope.get("raw_path") or b"") + len(scope["query_string"])
        size += 14
        for name, value in scope["headers"]:
            size += len(name) + len(value) + 4
            # A repeated header is ambiguous: recorded as None, which no check accepts.
            headers[name] = None if name in headers else value
        self.headers = headers
        self.head_bytes = size + 2

    def disconnect_watch(self, receive: Receive) -> Receive | None:
        """What a call watches for its peer going away: nothing when the listener cancels
        the request itself once the connection closes (HTTP/1, `CONNECTION_CANCELS`);
        `receive` otherwise (HTTP/2, where the stream's reset comes through it)."""
        return None if self.connection_cancels is not None else receive


class McpHttpApp:
    """The ASGI application of the listener: one path, `/mcp`, one dispatcher for 2026-07-28
    and one per handshake session."""

    def __init__(
        self,
        service: ToolService,
        config: Config,
        callers: Callers,
        *,
        session_ttl_s: float = SESSION_TTL_S,
        bound_port: int | None = None,
    ) -> None:
        self._service = service
        self._config = config
        http = config.service.http
        self.callers = callers  # the listener's too: a newcomer's share at the cap
        self._modern = self._new_dispatcher()
        self._status_replies = _StatusReplies()
        self._legacy_enabled = http.legacy_revisions
        self.sessions = SessionTable(http.max_sessions, session_ttl_s)
        self._max_body = http.max_request_bytes
        self._timeout_s = float(http.request_timeout_s)
        self._hosts = self._allowed_hosts(config, bound_port)
        self._origins = tuple(o.lower() for o in http.allowed_origins)
        self.refusals = RefusalLog()

    def _new_dispatcher(self) -> Dispatcher:
        return make_dispatcher(self._service, self._config)

    @staticmethod
    def _allowed_hosts(config: Config, bound_port: int | None) -> frozenset[bytes]:
        http = config.service.http
        if http.allowed_hosts:
            return frozenset(h.lower().encode("ascii") for h in http.allowed_hosts)
        # Empty: the loopback names, and the address the listener is bound to, with or
        # without its port (DNS rebinding: a foreign name pointing at us is refused).
        bind = parse_bind(http.bind)
        port = bind.port if bound_port is None else bound_port
        host = f"[{bind.host}]" if bind.host.version == 6 else str(bind.host)
        names = {*_LOOPBACK_NAMES, host}
        allowed: set[bytes] = set()
        for name in names:
            allowed.add(name.encode("ascii"))
            allowed.add(f"{name}:{port}".encode("ascii"))
        return frozenset(allowed)

    def _origin_allowed(self, origin: bytes) -> bool:
        text = origin.decode("latin-1").lower()
        for allowed in self._origins:
            if allowed.endswith(":*"):
                base = allowed[:-2]
                if text == base or (
                    text.startswith(base + ":") and text[len(base) + 1 :].isdigit()
                ):
                    return True
            elif text == allowed:
                return True
        return False

    # -- ASGI -----------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # no WebSocket in the contract
        request = _Request(scope)
        origin = request.headers.get(b"origin")
        if origin is not None and self._origin_allowed(origin):
            # Every answer to a listed origin, refusals included, carries what lets the
            # browser hand it to the page (CORS); an origin not listed gets none.
            request.cors = (
                (b"access-control-allow-origin", origin),
                (b"access-control-expose-headers", _CORS_EXPOSED),
                (b"vary", b"origin"),
            )
        started = False

        async def respond(
            status: int, body: bytes, headers: tuple[tuple[bytes, bytes], ...] = ()
        ) -> None:
            nonlocal started
            started = True
            out = [(b"content-length", b"%d" % len(body)), *headers, *request.cors]
            if body:
                out.append((b"content-type", _JSON))
            await send({"type": "http.response.start", "status": status, "headers": out})
            await send({"type": "http.response.body", "body": body})

        cancels = request.connection_cancels
        # One scope for both ends of a request: LIM-H5's deadline, and (HTTP/1, through the
        # listener) the peer closing its connection.
        with trio.move_on_after(self._timeout_s) as timer:
            if cancels is not None:
                cancels.add(timer)
            try:
                await self._handle(request, receive, respond)
            except _PeerGone:
                return
            except _Refusal as refusal:
                if refusal.reason is not None:
                    self.refusals.refuse(refusal.reason, request.family)
                body = b"" if refusal.body is None else jsonrpc.encode(refusal.body)
                await respond(refusal.status, body, refusal.headers)
            finally:
                if cancels is not None:
                    cancels.discard(timer)
        if not timer.cancelled_caught:
            return
        if trio.current_time() < timer.deadline:
            # The listener cancelled it: the peer is gone and nobody is left to answer.
            telemetry.debug("call_cancelled", transport="http")
        elif not started:
            # LIM-H5: whatever the request was doing (sending its body, waiting for its
            # call), it ends here; the connection is closed after this answer.
            self.refusals.refuse("request_timeout", request.family)
            await respond(408, b"", ((b"connection", b"close"),))

    # -- the gate and the statuses --------------------------------------------------------

    async def _handle(
        self,
        request: _Request,
        receive: Receive,
        respond: Callable[[int, bytes, tuple[tuple[bytes, bytes], ...]], Awaitable[None]],
    ) -> None:
        if request.head_bytes > HEADER_BLOCK_BYTES:
            # h11 bounds a header block that arrives in pieces; this bounds one that came
            # whole. Before the gate, as the contract says: neither logged nor counted.
            raise _Refusal(431, headers=((b"connection", b"close"),))
        if request.method == "OPTIONS" and b"access-control-request-method" in request.headers:
            # A browser's CORS preflight carries no token (Fetch standard): answered before
            # the token is asked for, for a listed origin only.
            self._preflight(request)
            await respond(204, b"", _CORS_PREFLIGHT)
            return
        caller = self.callers.identify(request.headers.get(b"authorization"))
        if caller is None:
            raise _Refusal(401, reason="unauthorized", headers=((b"www-authenticate", b"Bearer"),))
        if request.claim is not None and not request.claim(caller):
            # The caller holds its share of the connections, each with a request running.
            raise _Refusal(
                503,
                reason="caller_share",
                headers=((b"retry-after", b"1"), (b"connection", b"close")),
            )
        if request.path != MCP_PATH:
            raise _Refusal(404, reason="not_found")
        host = request.headers.get(b"host")
        if host is None or host.lower() not in self._hosts:
            raise _error(403, jsonrpc.INVALID_REQUEST, "Forbidden: Host", reason="sdk_forbidden")
        if b"origin" in request.headers:
            origin = request.headers.get(b"origin")
            if origin is None or not self._origin_allowed(origin):
                raise _error(
                    403, jsonrpc.INVALID_REQUEST, "Forbidden: Origin", reason="sdk_forbidden"
                )
        if request.method == "DELETE":
            await self._delete(request, caller, respond)
            return
        if request.method != "POST":
            raise _Refusal(405, reason="method_not_allowed", headers=((b"allow", b"POST, DELETE"),))
        accept = _accepted(request.headers.get(b"accept") or b"")
        if _JSON not in accept or _SSE not in accept:
            raise _error(
                406,
                jsonrpc.INVALID_REQUEST,
                "Not Acceptable: Accept must list application/json and text/event-stream",
                reason="sdk_not_acceptable",
            )
        if not _is_json_content(request.headers.get(b"content-type")):
            raise _error(
                415, jsonrpc.INVALID_REQUEST, "Unsupported Media Type: send application/json"
            )
        body = await self._body(request, receive)
        status, payload, headers = await self._post(request, caller, body, receive)
        await respond(status, payload, headers)

    def _preflight(self, request: _Request) -> None:
        if request.path != MCP_PATH:
            raise _Refusal(404, reason="not_found")
        host = request.headers.get(b"host")
        if host is None or host.lower() not in self._hosts:
            raise _error(403, jsonrpc.INVALID_REQUEST, "Forbidden: Host", reason="sdk_forbidden")
        if not request.cors:
            raise _error(403, jsonrpc.INVALID_REQUEST, "Forbidden: Origin", reason="sdk_forbidden")

    async def _body(self, request: _Request, receive: Receive) -> bytes:
        declared = request.headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                size = -1  # h11 and h2 refuse a malformed length before the app sees it
            if size > self._max_body:
                raise _Refusal(413, reason="body_too_large", headers=((b"connection", b"close"),))
        if request.expect_continue is not None:
            # Every answer but 200 is decided by now (401, 413, 415 ...): only a body that
            # will be read is asked for (RFC 9110 §10.1.1).
            await request.expect_continue()
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _PeerGone
            chunk: bytes = message.get("body", b"")
            total += len(chunk)
            if total > self._max_body:
                raise _Refusal(413, reason="body_too_large", headers=((b"connection", b"close"),))
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _delete(
        self,
        request: _Request,
        caller: str,
        respond: Callable[[int, bytes, tuple[tuple[bytes, bytes], ...]], Awaitable[None]],
    ) -> None:
        session_id = request.headers.get(b"mcp-session-id")
        if session_id is None:
            raise _error(
                400, jsonrpc.INVALID_REQUEST, "Bad Request: DELETE needs Mcp-Session-Id",
                reason="sdk_bad_request",
            )  # fmt: skip
        if not self.sessions.close(session_id.decode("latin-1"), caller):
            raise _error(404, jsonrpc.INVALID_REQUEST, "Session not found")
        await respond(204, b"", ())

    # -- one POST -------------------------------------------------------------------------

    async def _post(self, request: _Request, caller: str, body: bytes, receive: Receive) -> _Answer:
        message = jsonrpc.parse(body)
        if isinstance(message, jsonrpc.Invalid):
            reply = message.reply or jsonrpc.error_response(
                None, jsonrpc.INVALID_REQUEST, "Invalid Request"
            )
            if reply["error"]["code"] == jsonrpc.PARSE_ERROR:
                return 400, jsonrpc.encode(reply), ()
            return 415, jsonrpc.encode(reply), ()
        session_header = request.headers.get(b"mcp-session-id")
        version_header = request.headers.get(b"mcp-protocol-version")
        if session_header is not None and not _is_modern(message):
            return await self._in_session(
                request, caller, message, session_header, version_header, receive
            )
        if isinstance(message, jsonrpc.Batch):
            raise _error(415, jsonrpc.INVALID_REQUEST, "Invalid Request: no batch here")
        if isinstance(message, jsonrpc.Notification | jsonrpc.Response):
            return 202, b"", ()
        if _is_modern(message) or version_header == revisions.MODERN_REVISION.encode():
            self._check_modern_headers(request, message)
            watch = request.disconnect_watch(receive)
            return await self._dispatch(self._modern, message, caller, watch, modern=True)
        if message.method == "initialize":
            return await self._initialize(request, caller, message)
        raise _error(
            400,
            jsonrpc.INVALID_REQUEST,
            "Bad Request: this method needs the Mcp-Session-Id of an initialize, "
            f"or _meta {META_VERSION} (2026-07-28)",
            reason="sdk_bad_request",
            request_id=message.id,
        )

    def _check_modern_headers(self, request: _Request, message: jsonrpc.Request) -> None:
        problem = _meta_problem(message)
        if problem is not None:
            # The request names the stateless revision (header or body) without the metadata
            # it requires: Invalid params, and 400 since nothing was served.
            raise _error(
                400, jsonrpc.INVALID_PARAMS, f"Invalid params: {problem}",
                reason="sdk_bad_request", request_id=message.id,
            )  # fmt: skip
        try:
            self._compare_headers(request, message)
        except _BadHeader as exc:
            raise _error(
                400, HEADER_MISMATCH, f"Header mismatch: {exc}",
                reason="sdk_bad_request", request_id=message.id,
            ) from None  # fmt: skip

    def _compare_headers(self, request: _Request, message: jsonrpc.Request) -> None:
        def mismatch(what: str) -> _Refusal:
            return _error(
                400, HEADER_MISMATCH, f"Header mismatch: {what}",
                reason="sdk_bad_request", request_id=message.id,
            )  # fmt: skip

        params = message.params or {}
        meta = params.get("_meta")
        body_version = meta.get(META_VERSION) if isinstance(meta, dict) else None
        version = request.headers.get(b"mcp-protocol-version")
        if version is None:
            raise mismatch("MCP-Protocol-Version is missing")
        if _header_text(version, "MCP-Protocol-Version") != body_version:
            raise mismatch("MCP-Protocol-Version does not match the body's protocolVersion")
        method = request.headers.get(b"mcp-method")
        if method is None:
            raise mismatch("Mcp-Method is missing")
        if _header_text(method, "Mcp-Method") != message.method:
            raise mismatch("Mcp-Method does not match the body's method")
        if message.method == "tools/call":
            name = request.headers.get(b"mcp-name")
            if name is None:
                raise mismatch("Mcp-Name is missing")
            if _header_text(name, "Mcp-Name") != params.get("name"):
                raise mismatch("Mcp-Name does not match the body's params.name")

    async def _initialize(
        self, request: _Request, caller: str, message: jsonrpc.Request
    ) -> _Answer:
        if not self._legacy_enabled:
            reply = self._modern.handle(message)
            assert isinstance(reply, Reply)
            return 400, jsonrpc.encode(reply.payload), ()
        dispatcher = self._new_dispatcher()
        action = dispatcher.handle(message)
        assert isinstance(action, Reply)
        if "error" in action.payload:
            return 400, jsonrpc.encode(action.payload), ()
        session = self.sessions.open(caller, dispatcher)
        if session is None:
            raise _error(
                503,
                jsonrpc.INTERNAL_ERROR,
                "Service Unavailable: too many sessions; retry later or use 2026-07-28",
                reason="session_limit",
                request_id=message.id,
                headers=((b"retry-after", RETRY_AFTER_S),),
            )
        telemetry.debug("http_session_opened", sessions=len(self.sessions))
        session_id = session.session_id.encode("ascii")
        return 200, jsonrpc.encode(action.payload), ((b"mcp-session-id", session_id),)

    async def _in_session(
        self,
        request: _Request,
        caller: str,
        message: jsonrpc.Message,
        session_header: bytes,
        version_header: bytes | None,
        receive: Receive,
    ) -> _Answer:
        session = self.sessions.get(session_header.decode("latin-1"), caller)
        if session is None:
            # The transport's rule: an unknown or ended session is 404, and the client
            # starts a new one with initialize.
            raise _error(404, jsonrpc.INVALID_REQUEST, "Session not found")
        dispatcher = session.dispatcher
        if version_header is not None and version_header.decode("latin-1") != (
            dispatcher.legacy_revision
        ):
            raise _error(
                400, jsonrpc.INVALID_REQUEST,
                "Bad Request: MCP-Protocol-Version is not the session's revision",
                reason="sdk_bad_request",
            )  # fmt: skip
        if isinstance(message, jsonrpc.Batch):
            if not dispatcher.batches_allowed():
                raise _error(415, jsonrpc.INVALID_REQUEST, "Invalid Request: no batch here")
            return await self._batch(dispatcher, message, caller, receive)
        if isinstance(message, jsonrpc.Notification | jsonrpc.Response):
            return 202, b"", ()
        assert isinstance(message, jsonrpc.Request)
        if message.method == "initialize":
            raise _error(
                400, jsonrpc.INVALID_REQUEST, "Bad Request: the session is initialized already",
                reason="sdk_bad_request", request_id=message.id,
            )  # fmt: skip
        watch = request.disconnect_watch(receive)
        return await self._dispatch(dispatcher, message, caller, watch, modern=False)

    async def _dispatch(
        self,
        dispatcher: Dispatcher,
        message: jsonrpc.Request,
        caller: str,
        receive: Receive | None,
        *,
        modern: bool,
    ) -> _Answer:
        action = dispatcher.handle(message)
        if isinstance(action, Reply):
            status = _reply_status(action.payload, modern=modern)
            return status, jsonrpc.encode(action.payload), ()
        if isinstance(action, Call):
            return 200, await self._run(dispatcher, action, caller, receive), ()
        return 202, b"", ()  # nothing to answer (Cancel and Nothing come from notifications)

    async def _run(
        self, dispatcher: Dispatcher, call: Call, caller: str, receive: Receive | None
    ) -> bytes:
        """Run one call; a closed connection cancels it (and nothing is answered).

        `receive` is None when the listener itself cancels the request once its connection
        closes (HTTP/1): then no watcher task is needed.
        """
        if receive is None:
            return await self._execute(dispatcher, call, caller)
        payload: bytes | None = None
        async with trio.open_nursery() as nursery:

            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                telemetry.debug("call_cancelled", transport="http")
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch_disconnect)
            payload = await self._execute(dispatcher, call, caller)
            nursery.cancel_scope.cancel()
        if payload is None:  # the peer went away: the call was cancelled, nothing to send
            raise _PeerGone
        return payload

    async def _execute(self, dispatcher: Dispatcher, call: Call, caller: str) -> bytes:
        if not isinstance(call.request, StatusCall):
            return jsonrpc.encode(await execute(self._service, dispatcher, call, caller))
        # engine_status: the same outcomes, with the answer's encoding remembered.
        response = await outcome(self._service, dispatcher, call, caller)
        if isinstance(response, dict):
            return jsonrpc.encode(response)
        assert isinstance(response, StatusResponse)
        return self._status_replies.encode(dispatcher, call, response)

    async def _batch(
        self, dispatcher: Dispatcher, batch: jsonrpc.Batch, caller: str, receive: Receive
    ) -> _Answer:
        answers: list[dict[str, Any] | None] = [None] * len(batch.items)

        async def run(index: int, call: Call) -> None:
            answers[index] = await execute(self._service, dispatcher, call, caller)

        async with trio.open_nursery() as nursery:
            for index, item in enumerate(batch.items):
                action = dispatcher.handle_batch_item(item)
                if isinstance(action, Reply):
                    answers[index] = action.payload
                elif isinstance(action, Call):
                    nursery.start_soon(run, index, action)
                elif isinstance(action, Cancel):
                    pass  # over HTTP a closed stream is the cancellation
        replies = [a for a in answers if a is not None]
        return (200, jsonrpc.encode(replies), ()) if replies else (202, b"", ())


def _meta_problem(message: jsonrpc.Request) -> str | None:
    """What the per-request metadata of 2026-07-28 lacks, or None."""
    meta = (message.params or {}).get("_meta")
    if not isinstance(meta, dict):
        return "params._meta is required (an object)"
    if not isinstance(meta.get(META_VERSION), str):
        return f"_meta must carry {META_VERSION}, a string"
    if not isinstance(meta.get(META_CAPABILITIES), dict):
        return f"_meta must carry {META_CAPABILITIES}, an object"
    info = meta.get(META_CLIENT)
    if META_CLIENT in meta and not (
        isinstance(info, dict)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("version"), str)
    ):
        return f"{META_CLIENT} needs a name and a version"
    return None


def _is_modern(message: jsonrpc.Message) -> bool:
    if not isinstance(message, jsonrpc.Request) or message.params is None:
        return False
    meta = message.params.get("_meta")
    return isinstance(meta, dict) and META_VERSION in meta


def _reply_status(payload: dict[str, Any], *, modern: bool) -> int:
    error = payload.get("error")
    if not isinstance(error, dict) or not modern:
        return 200
    code = error.get("code")
    if code == jsonrpc.METHOD_NOT_FOUND:
        return 404
    if code in (jsonrpc.UNSUPPORTED_PROTOCOL_VERSION, HEADER_MISMATCH):
        return 400
    return 200


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
