"""MCP over Streamable HTTP: the ASGI application, the gate first, then the protocol.

`GET /healthz` and `GET /readyz` are answered before the gate (`rypsok.mcp.health`). The
gate answers before any JSON is parsed: 401 (no or a wrong bearer token), 404 (another
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

from typing import TYPE_CHECKING, Any

import trio

from rypsok.core import telemetry
from rypsok.core.model import StatusResponse
from rypsok.mcp.health import Health
from rypsok.mcp.http_refusals import RefusalLog
from rypsok.mcp.http_request import (
    CONNECTION_CANCELS,
    CONNECTION_CLAIM,
    CORS_EXPOSED,
    CORS_PREFLIGHT,
    EXPECT_CONTINUE,
    HEADER_BLOCK_BYTES,
    JSON,
    MCP_PATH,
    RETRY_AFTER_S,
    SSE,
    PeerGone,
    Refused,
    Request,
    accepted_types,
    allowed_hosts,
    check_modern_headers,
    is_json_content,
    is_modern,
    origin_allowed,
    refusal,
    reply_status,
)
from rypsok.mcp.probes import HEALTH_PATHS, is_preflight
from rypsok.mcp.protocol import Call, Cancel, Dispatcher, Reply, StatusCall, jsonrpc, revisions
from rypsok.mcp.protocol.dispatch import META_VERSION
from rypsok.mcp.sessions import SESSION_TTL_S, SessionsFull, SessionTable
from rypsok.mcp.status_replies import StatusReplies
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
    "CONNECTION_CANCELS",
    "CONNECTION_CLAIM",
    "EXPECT_CONTINUE",
    "HEADER_BLOCK_BYTES",
    "MCP_PATH",
    "McpHttpApp",
    "RefusalLog",
]


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
        self._status_replies = StatusReplies()
        self._legacy_enabled = http.legacy_revisions
        self.sessions = SessionTable(http.max_sessions, session_ttl_s, len(http.auth.callers))
        self._max_body = http.max_request_bytes
        self._timeout_s = float(http.request_timeout_s)
        self._hosts = allowed_hosts(config, bound_port)
        self._origins = tuple(o.lower() for o in http.allowed_origins)
        self.refusals = RefusalLog()
        # /healthz and /readyz; a service without `readiness` (a test's fake) is ready.
        self.health = Health(getattr(service, "readiness", None))

    def _new_dispatcher(self) -> Dispatcher:
        return make_dispatcher(self._service, self._config)

    # -- ASGI -----------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # no WebSocket in the contract
        request = Request(scope)
        origin = request.headers.get(b"origin")
        if origin is not None and origin_allowed(self._origins, origin):
            # Every answer to a listed origin, refusals included, carries what lets the
            # browser hand it to the page (CORS); an origin not listed gets none.
            request.cors = (
                (b"access-control-allow-origin", origin),
                (b"access-control-expose-headers", CORS_EXPOSED),
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
                out.append((b"content-type", JSON))
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
            except PeerGone:
                return
            except Refused as refusal:
                if refusal.reason is not None:
                    self.refusals.refuse(refusal.reason, request.family)
                body = b"" if refusal.body is None else jsonrpc.encode(refusal.body)
                await respond(refusal.status, body, request.closing(refusal.headers))
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
        request: Request,
        receive: Receive,
        respond: Callable[[int, bytes, tuple[tuple[bytes, bytes], ...]], Awaitable[None]],
    ) -> None:
        if request.head_bytes > HEADER_BLOCK_BYTES:
            # h11 bounds a header block that arrives in pieces; this bounds one that came
            # whole. Before the gate, as the contract says: neither logged nor counted.
            raise Refused(431, headers=((b"connection", b"close"),))
        if request.path in HEALTH_PATHS:
            # A probe's (`rypsok.mcp.probes`, whose judgement the room made at the cap shares):
            # before the gate (no token, no Host check), never a refusal.
            await respond(*self.health.answer(request.method, request.path))
            return
        if is_preflight(request.method, request.headers):
            # A browser's CORS preflight carries no token (Fetch standard): answered before
            # the token is asked for, for a listed origin only.
            self._preflight(request)
            await respond(204, b"", CORS_PREFLIGHT)
            return
        caller = self.callers.identify(request.headers.get(b"authorization"))
        if caller is None:
            raise Refused(401, reason="unauthorized", headers=((b"www-authenticate", b"Bearer"),))
        if request.claim is not None and not request.claim(caller):
            # The caller holds its share of the connections, each with a request running.
            raise Refused(
                503,
                reason="caller_share",
                headers=((b"retry-after", b"1"), (b"connection", b"close")),
            )
        if request.path != MCP_PATH:
            raise Refused(404, reason="not_found")
        host = request.headers.get(b"host")
        if host is None or host.lower() not in self._hosts:
            raise refusal(403, jsonrpc.INVALID_REQUEST, "Forbidden: Host", reason="sdk_forbidden")
        if b"origin" in request.headers:
            origin = request.headers.get(b"origin")
            if origin is None or not origin_allowed(self._origins, origin):
                raise refusal(
                    403, jsonrpc.INVALID_REQUEST, "Forbidden: Origin", reason="sdk_forbidden"
                )
        if request.method == "DELETE":
            await self._delete(request, caller, respond)
            return
        if request.method != "POST":
            raise Refused(405, reason="method_not_allowed", headers=((b"allow", b"POST, DELETE"),))
        accept = accepted_types(request.headers.get(b"accept") or b"")
        if JSON not in accept or SSE not in accept:
            raise refusal(
                406,
                jsonrpc.INVALID_REQUEST,
                "Not Acceptable: Accept must list application/json and text/event-stream",
                reason="sdk_not_acceptable",
            )
        if not is_json_content(request.headers.get(b"content-type")):
            raise refusal(
                415, jsonrpc.INVALID_REQUEST, "Unsupported Media Type: send application/json"
            )
        body = await self._body(request, receive)
        status, payload, headers = await self._post(request, caller, body, receive)
        await respond(status, payload, headers)

    def _preflight(self, request: Request) -> None:
        if request.path != MCP_PATH:
            raise Refused(404, reason="not_found")
        host = request.headers.get(b"host")
        if host is None or host.lower() not in self._hosts:
            raise refusal(403, jsonrpc.INVALID_REQUEST, "Forbidden: Host", reason="sdk_forbidden")
        if not request.cors:
            raise refusal(403, jsonrpc.INVALID_REQUEST, "Forbidden: Origin", reason="sdk_forbidden")

    async def _body(self, request: Request, receive: Receive) -> bytes:
        declared = request.headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                size = -1  # h11 and h2 refuse a malformed length before the app sees it
            if size > self._max_body:
                raise Refused(413, reason="body_too_large", headers=((b"connection", b"close"),))
        if request.expect_continue is not None:
            # Every answer but 200 is decided by now (401, 413, 415 ...): only a body that
            # will be read is asked for (RFC 9110 §10.1.1).
            await request.expect_continue()
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise PeerGone
            chunk: bytes = message.get("body", b"")
            total += len(chunk)
            if total > self._max_body:
                raise Refused(413, reason="body_too_large", headers=((b"connection", b"close"),))
            chunks.append(chunk)
            if not message.get("more_body", False):
                request.body_unread = False
                return b"".join(chunks)

    async def _delete(
        self,
        request: Request,
        caller: str,
        respond: Callable[[int, bytes, tuple[tuple[bytes, bytes], ...]], Awaitable[None]],
    ) -> None:
        session_id = request.headers.get(b"mcp-session-id")
        if session_id is None:
            raise refusal(
                400, jsonrpc.INVALID_REQUEST, "Bad Request: DELETE needs Mcp-Session-Id",
                reason="sdk_bad_request",
            )  # fmt: skip
        if not self.sessions.close(session_id.decode("latin-1"), caller):
            raise refusal(404, jsonrpc.INVALID_REQUEST, "Session not found")
        await respond(204, b"", ())

    # -- one POST -------------------------------------------------------------------------

    async def _post(self, request: Request, caller: str, body: bytes, receive: Receive) -> _Answer:
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
        if session_header is not None and not is_modern(message):
            return await self._in_session(
                request, caller, message, session_header, version_header, receive
            )
        if isinstance(message, jsonrpc.Batch):
            raise refusal(415, jsonrpc.INVALID_REQUEST, "Invalid Request: no batch here")
        if isinstance(message, jsonrpc.Notification | jsonrpc.Response):
            return 202, b"", ()
        if is_modern(message) or version_header == revisions.MODERN_REVISION.encode():
            check_modern_headers(request, message)
            watch = request.disconnect_watch(receive)
            return await self._dispatch(self._modern, message, caller, watch, modern=True)
        if message.method == "initialize":
            return await self._initialize(request, caller, message)
        raise refusal(
            400,
            jsonrpc.INVALID_REQUEST,
            "Bad Request: this method needs the Mcp-Session-Id of an initialize, "
            f"or _meta {META_VERSION} (2026-07-28)",
            reason="sdk_bad_request",
            request_id=message.id,
        )

    async def _initialize(self, request: Request, caller: str, message: jsonrpc.Request) -> _Answer:
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
        if isinstance(session, SessionsFull):
            raise _sessions_full(session, message.id)
        telemetry.debug("http_session_opened", sessions=len(self.sessions))
        session_id = session.session_id.encode("ascii")
        return 200, jsonrpc.encode(action.payload), ((b"mcp-session-id", session_id),)

    async def _in_session(
        self,
        request: Request,
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
            raise refusal(404, jsonrpc.INVALID_REQUEST, "Session not found")
        dispatcher = session.dispatcher
        if version_header is not None and version_header.decode("latin-1") != (
            dispatcher.legacy_revision
        ):
            raise refusal(
                400, jsonrpc.INVALID_REQUEST,
                "Bad Request: MCP-Protocol-Version is not the session's revision",
                reason="sdk_bad_request",
            )  # fmt: skip
        if isinstance(message, jsonrpc.Batch):
            if not dispatcher.batches_allowed():
                raise refusal(415, jsonrpc.INVALID_REQUEST, "Invalid Request: no batch here")
            return await self._batch(dispatcher, message, caller, receive)
        if isinstance(message, jsonrpc.Notification | jsonrpc.Response):
            return 202, b"", ()
        assert isinstance(message, jsonrpc.Request)
        if message.method == "initialize":
            raise refusal(
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
            status = reply_status(action.payload, modern=modern)
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
            raise PeerGone
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


def _sessions_full(full: SessionsFull, request_id: jsonrpc.RequestId) -> Refused:
    """503 for an initialize that gets no session: LIM-H6 reached (`Retry-After: 30`), or
    the caller's share of it, with the wait until its oldest session expires (the header in
    seconds, `retry_after_ms` in the error's data) and what else it can do."""
    if not full.share:
        return refusal(
            503,
            jsonrpc.INTERNAL_ERROR,
            "Service Unavailable: too many sessions; retry later or use 2026-07-28",
            reason="session_limit",
            request_id=request_id,
            headers=((b"retry-after", RETRY_AFTER_S),),
        )
    seconds = b"%d" % -(-full.retry_after_ms // 1000)
    return refusal(
        503,
        jsonrpc.INTERNAL_ERROR,
        "Service Unavailable: this caller holds its share of the sessions; end one with "
        "DELETE, retry after retry_after_ms, or use 2026-07-28",
        reason="session_share",
        request_id=request_id,
        headers=((b"retry-after", seconds),),
        data={"reason": "session_share", "retry_after_ms": full.retry_after_ms},
    )


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
