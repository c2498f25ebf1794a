"""The listener: each accepted connection from its first bytes to its close, handed to
hypercorn's HTTP/1.1 and HTTP/2 (h2c) protocol code on Trio, and the drain at the shutdown.

- LIM-H3: the first bytes are read here, under one deadline from the accept, until they show
  HTTP/1 or the HTTP/2 preface; a connection that does not (silence, or a preface cut short)
  is closed and counted as `idle_connection`, without a log line of its own. The bytes are
  handed back to hypercorn. After that a watchdog closes a connection with no request in
  flight once LIM-H3 has passed without a request starting (an idle keep-alive connection).
- `head_timeout_s`: a request head (an HTTP/2 header block, the preface once begun) must
  complete within its own, shorter bound (`head_timeout`).
"""

from __future__ import annotations

import contextlib
import socket as stdlib_socket
from functools import partial
from typing import TYPE_CHECKING, Any, Final, cast

import trio
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState

from rypsok.core import telemetry
from rypsok.mcp.http_app import (
    CONNECTION_CANCELS,
    CONNECTION_CLAIM,
    EXPECT_CONTINUE,
    HEADER_BLOCK_BYTES,
    McpHttpApp,
    RefusalLog,
)
from rypsok.mcp.http_framing import H2FrameParser, Http1RequestParser
from rypsok.mcp.listener.accept import AcceptLoop
from rypsok.mcp.listener.admission import Admission
from rypsok.mcp.listener.connection import Body, Connection
from rypsok.mcp.listener.descriptors import Descriptors, plan_descriptors
from rypsok.mcp.listener.heads import H2_PREFACE, whole_http1_head
from rypsok.mcp.listener.memory import MemoryReturn
from rypsok.mcp.listener.stream import NO_IDLE_TASK, RECEIVE, Replay, hypercorn_config
from rypsok.mcp.process import Activity

if TYPE_CHECKING:
    from collections.abc import Callable, MutableMapping

    from rypsok.config.schema import Config

__all__ = ["Listener"]

_HTTP1: Final = frozenset({"1.0", "1.1"})


class Listener:
    """The accept loop, the connection bounds and the hand-over to hypercorn."""

    def __init__(
        self, app: McpHttpApp, config: Config, *, descriptor_limit: int | None = None
    ) -> None:
        http = config.service.http
        self.app = app
        # The app's own, so that the gate's refusals and the listener's share their lines.
        self.refusals = app.refusals if isinstance(app, McpHttpApp) else RefusalLog()
        self._hconfig = hypercorn_config(config)
        self._context = WorkerContext(None)
        self._idle_s = float(http.idle_timeout_s)
        self._head_s = float(http.head_timeout_s)
        self.request_s = float(http.request_timeout_s)  # LIM-H5
        self.max_body = http.max_request_bytes  # LIM-H2
        self.memory = MemoryReturn()
        callers = app.callers if isinstance(app, McpHttpApp) else None
        # The share of the descriptor limit the connections get (LIM-H8; None: no limit).
        self.descriptor_plan = plan_descriptors(config, descriptor_limit)
        self.descriptors = Descriptors(self.descriptor_plan.sockets)
        self.admission = Admission(
            config, callers, self.refusals, self.memory, cap=self.descriptor_plan.connections
        )
        self._open: set[Connection] = set()  # past the first bytes, for the shutdown
        self._silent: set[trio.CancelScope] = set()  # waiting for their first bytes
        self.calls = Activity()  # requests running; the drain waits for them
        self.stopping = False

    @property
    def in_flight(self) -> int:
        """Requests running now (statistics, tests)."""
        return self.calls.count

    @property
    def connections(self) -> int:
        """Connections accepted and not yet closed (statistics, tests)."""
        return self.admission.connections

    def claim(self, connection: Connection, caller: str) -> bool:
        """The gate's claim of a connection by a caller (`Admission.claim`)."""
        return self.admission.claim(connection, caller)

    async def return_memory(
        self,
        trim: Callable[[], object] | None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Hand the allocator's free memory back after a flood (`MemoryReturn.run`)."""
        await self.memory.run(trim, task_status=task_status)

    async def accept_loop(self, sock: Any, nursery: trio.Nursery) -> None:
        """Accept connections on `sock` and serve each in `nursery`, until cancelled."""
        admit = partial(self._admit, nursery=nursery)
        await AcceptLoop(admit, self.descriptors, self.admission.make_room).run(sock)

    def _admit(self, client: Any, family: str, *, nursery: trio.Nursery) -> bool:
        """Hand an accepted socket to its connection's task, which owns it from then on;
        else (refused, or its socket failed) close it here, its owner until then. A socket
        of the standard library (the accept loop's bursts) becomes trio's only once
        admitted: a refusal costs its accept, a peek and its close, nothing more."""
        try:
            connection = self.admission.admit(client, family)
        except OSError as exc:
            self.refusals.connection_failed(exc, family)
            connection = None
        if connection is None:
            client.close()
            self.descriptors.released()
            return False
        if isinstance(client, stdlib_socket.socket):
            # The trio socket wraps the same object: its close leaves `connection.sock`
            # closed too (`fileno()` -1), as the peeks at the cap expect.
            client = trio.socket.from_stdlib_socket(client)
        nursery.start_soon(self._serve_connection, client, connection)
        return True

    async def _serve_connection(self, client: Any, connection: Connection) -> None:
        """Serve one connection. Its socket is this task's: closed here at the end, whatever
        ends it, and only then is its descriptor counted free. An error of the peer's socket
        ends this connection alone (`connection_failed`), never the listener."""
        try:
            with connection.scope:
                await self._serve_stream(trio.SocketStream(client), connection)
        except* OSError as failed:
            self.refusals.connection_failed(_first_error(failed), connection.family)
        finally:
            self.admission.forget(connection)
            client.close()  # the descriptor's one close: a peek finds -1 from here
            self.descriptors.released()

    async def _serve_stream(self, stream: trio.SocketStream, connection: Connection) -> None:
        """The connection from its first bytes (LIM-H3) through hypercorn to its end."""
        family = connection.family
        first = await self._first_bytes(stream, connection)
        if first is None:
            return
        if first == b"":
            self.refusals.refuse("idle_connection", family)
            return
        if first.startswith(H2_PREFACE):
            connection.h2 = H2FrameParser(HEADER_BLOCK_BYTES)
            connection.ready = len(first) > len(H2_PREFACE)
            connection.ready_since = trio.current_time()
            # The preface is whole: from here only a header block has a head bound.
            connection.head_since = None
        else:
            connection.gate = Http1RequestParser(HEADER_BLOCK_BYTES)
            # Read, not yet through the gate: hypercorn reads it some rounds later.
            connection.ready = b"\r\n\r\n" in first
            if connection.holder is None:
                connection.tokenless = self.admission.tokenless(whole_http1_head(first))
            if connection.holder is None and not self.admission.claimed(connection, first):
                # Its caller holds its share, each connection with a request: it
                # goes before hypercorn parses it (its head came after the accept).
                self.refusals.refuse("caller_share", family)
                return
        app = ASGIWrapper(cast("Any", ConnectionApp(self, connection)))
        replay = Replay(stream, first, connection, self.refusals, self.is_stopping)
        connection.replay = replay
        # cleartext: hypercorn's no-TLS path
        server = TCPServer(
            app, self._hconfig, self._context, ConnectionState({}), cast("Any", replay)
        )
        replay.server = server
        server.idle_task = cast("Any", NO_IDLE_TASK)
        self._open.add(connection)
        if self.stopping:
            # Its first bytes came in the same round as the drain's start, which
            # woke only the connections open then.
            connection.wake.set()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watchdog, connection, nursery.cancel_scope)
                await server.run()
                nursery.cancel_scope.cancel()
        finally:
            self._open.discard(connection)
            connection.ended.set()

    async def _first_bytes(self, stream: trio.SocketStream, connection: Connection) -> bytes | None:
        """The bytes that show the protocol; b"" when LIM-H3 passed first (or the head
        bound, once a part of the HTTP/2 preface came); None when the peer closed or broke
        the connection before, or the shutdown began."""
        data = b""
        with trio.move_on_after(self._idle_s) as scope:
            # The shutdown closes a connection that has not shown its protocol (`drain`).
            self._silent.add(scope)
            if self.stopping:
                scope.cancel()
            try:
                while True:
                    try:
                        chunk = await stream.receive_some(RECEIVE)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return None
                    if not chunk:
                        return None
                    if not data:
                        # A request has begun: its head has a bound of its own, from here
                        # (the watchdog keeps it once the gate has read the rest).
                        connection.head_since = trio.current_time()
                        head_deadline = connection.head_since + self._head_s
                        scope.deadline = min(scope.deadline, head_deadline)
                    data += chunk
                    if len(data) >= len(H2_PREFACE) or not H2_PREFACE.startswith(data):
                        return data
            finally:
                self._silent.discard(scope)
        # Closed unanswered by the shutdown: not an idle connection refused.
        return None if self.stopping else b""

    async def _watchdog(self, connection: Connection, scope: trio.CancelScope) -> None:
        """Close the connection once the peer has closed its side and nothing runs; once
        LIM-H3 has passed with no request started and none running (an idle keep-alive
        connection); or once a request head has taken longer than its own bound
        (`head_timeout_s`: a header block trickled a byte at a time). A running request is
        bounded by LIM-H5 instead."""
        while True:
            deadline = connection.quiet_since + self._idle_s
            if connection.head_since is not None:
                deadline = min(deadline, connection.head_since + self._head_s)
            with trio.move_on_at(deadline):
                await connection.wake.wait()
            connection.wake = trio.Event()
            now = trio.current_time()
            head_since = connection.head_since
            if head_since is not None and now - head_since >= self._head_s:
                # HTTP/2 included: no other frame may come between a header block's parts.
                self.refusals.refuse("head_timeout", connection.family)
                scope.cancel()
                return
            if connection.in_flight:
                connection.quiet_since = now
                continue
            if self.stopping and not connection.closed_by_peer and not connection.settled:
                # Its last answer is not all written yet (over HTTP/2 a stream's end and
                # the GOAWAY can follow its call's end): the write wakes this again.
                connection.quiet_since = now
                continue
            if (
                connection.closed_by_peer
                or self.stopping
                or now - connection.quiet_since >= self._idle_s
            ):
                scope.cancel()
                return

    # -- stopping -------------------------------------------------------------------------

    def is_stopping(self) -> bool:
        """Whether the shutdown has begun (new HTTP/2 streams are refused from then on)."""
        return self.stopping

    async def drain(self, deadline: float) -> None:
        """New requests on open connections are refused; wait for those running, and for
        their connections to write the answers whole and close."""
        self.stopping = True
        await self._context.terminated.set()
        # Idle connections close now, and those that have not sent their first bytes; busy
        # ones once their request is answered and written (hypercorn keeps no connection
        # alive after `terminated`).
        for scope in self._silent:
            scope.cancel()
        for connection in self._open:
            connection.wake.set()
        with trio.move_on_at(deadline):
            await self.calls.idle.wait()
            # A call's end is not its answer's last frame on the wire: cutting the
            # connections now could lose an HTTP/2 stream's END_STREAM. Each closes by
            # itself once nothing runs on it and all is written (`_watchdog`).
            for connection in list(self._open):
                await connection.ended.wait()


def _first_error(group: BaseExceptionGroup[OSError]) -> OSError:
    """The first `OSError` of a group, however deeply the nurseries nested it."""
    found: BaseException = group
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    assert isinstance(found, OSError)  # `except* OSError` gathers nothing else
    return found


class ConnectionApp:
    """The app as one connection sees it: each request counted while it runs."""

    def __init__(self, listener: Listener, connection: Connection) -> None:
        self._listener = listener
        self._connection = connection

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._listener.app(scope, receive, send)
            return
        connection = self._connection
        listener = self._listener
        connection.in_flight += 1
        connection.ready = False
        listener.calls.started()
        scope[CONNECTION_CLAIM] = partial(listener.claim, connection)
        now = trio.current_time()
        body = Body(now, expected_length(scope, listener.max_body), now + listener.request_s)
        connection.bodies.append(body)

        async def receive_counted() -> Any:
            message = await receive()
            if not body.whole:
                body.received += len(message.get("body", b""))
                if not message.get("more_body", False):
                    body.whole = True
                    connection.bodies.remove(body)
            return message

        try:
            if scope.get("http_version") in _HTTP1:
                # One request at a time on the connection: when the peer closes it, the
                # listener cancels the request (the app puts its scope in the set) instead
                # of the app watching for it.
                scope[CONNECTION_CANCELS] = connection.scopes
                if connection.replay is not None:
                    scope[EXPECT_CONTINUE] = connection.replay.send_continue
            await listener.app(scope, receive_counted, send)
        except Exception as exc:
            # A defect, not a peer's doing: one JSON line, no traceback that could quote a
            # header; hypercorn answers 500 if nothing was sent.
            telemetry.log_exception("http_app_failed", exc)
            raise
        finally:
            if not body.whole:
                connection.bodies.remove(body)
            connection.in_flight -= 1
            connection.request_ended()
            if listener.stopping:
                connection.wake.set()  # the watchdog closes it once its answer is written
            listener.calls.ended()


def expected_length(scope: MutableMapping[str, Any], most: int) -> int:
    """A request's declared body length, else (chunked, HTTP/2 without one) `most`."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            with contextlib.suppress(ValueError):
                return min(int(value), most)
            break
    return most
