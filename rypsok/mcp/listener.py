"""The HTTP listener: hypercorn's HTTP/1.1 and HTTP/2 (h2c) protocol code on Trio, under the
connection-level bounds hypercorn does not keep by itself.

hypercorn parses HTTP and calls the ASGI app (`rypsok.mcp.http_app`). The accept loop is ours:

- LIM-H1: at the cap a new connection makes room: the connection that has waited longest
  without a request (none running, none complete and waiting to run) is closed
  (`connection_evicted`), else one whose request bodies cannot arrive within LIM-H5 at
  their rate so far (`_Body`); only when there is none is the new one closed unanswered
  (`too_many_connections`). A newcomer that has not sent its whole head yet makes room only
  among connections that have waited `ROOM_GRACE_S`. With two callers or more a caller
  holds at most its share of the connections (`claim`): a newcomer whose whole head is in
  its buffer at its accept, or in its first read, is known by its token there and closed
  at once past its share (`caller_share`); otherwise the app's gate claims it (503).
  Accepts are taken in bursts: a flood's connections queued in the backlog are not each
  a scheduling round ahead of a caller's; once a burst closed a newcomer unanswered, the
  next connections wait a moment in the backlog (the served ones run meanwhile). The kernel
  holds a connection until its first bytes come, a second at most (`defer_accept`): a
  caller that writes its request after its connect is known at its accept, never closed
  as a newcomer without its request, nor made room with before its head is read.
- LIM-H3: the first bytes are read here, under one deadline from the accept, until they show
  HTTP/1 or the HTTP/2 preface; a connection that does not (silence, or a preface cut short)
  is closed and counted as `idle_connection`, without a log line of its own. The bytes are
  handed back to hypercorn. After that a watchdog closes a connection with no request in
  flight once LIM-H3 has passed without a request starting (an idle keep-alive connection).
- `head_timeout_s`: a request head (an HTTP/2 header block, the preface once begun) must
  complete within its own, shorter bound (`head_timeout`).
- Every byte passes `rypsok.mcp.http_framing` before hypercorn reads it: HTTP/1 heads are
  checked strictly (refused and closed where a proxy could read them otherwise), HTTP/2
  header blocks bounded by LIM-H7 as their frames arrive. LIM-H4 is h2's setting, a stream
  beyond it refused alone (`_RefusingH2Connection`). LIM-H2 and LIM-H5 are the app's.
- An accept error (descriptors exhausted) backs off 100 ms and is logged at most once per 10 s.

`serve_http` serves until its `stop` event; then the listening socket is closed (new
connections are refused), idle connections close, and calls in flight get what is left of
`service.shutdown_ms` before they are cancelled.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import math
import os
import signal
import socket as stdlib_socket
import time
from functools import partial
from typing import TYPE_CHECKING, Any, Final, cast

import h2.connection
import h2.errors
import h2.exceptions
import h2.stream
import hpack
import hyperframe.frame
import trio
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState

from rypsok import _early
from rypsok.config.rules import parse_bind
from rypsok.core import telemetry
from rypsok.mcp.caller_tokens import Callers
from rypsok.mcp.http_app import (
    CONNECTION_CANCELS,
    CONNECTION_CLAIM,
    EXPECT_CONTINUE,
    HEADER_BLOCK_BYTES,
    McpHttpApp,
    RefusalLog,
)
from rypsok.mcp.http_framing import H2FrameParser, Http1RequestParser
from rypsok.mcp.process import Activity, default_service, serving
from rypsok.mcp.sessions import SESSION_TTL_S
from rypsok.shared.allocator import malloc_trim

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, MutableMapping

    from rypsok.config.schema import Config
    from rypsok.core.services import Rypsok
    from rypsok.mcp.tool_calls import ToolService

__all__ = [
    "HEADER_BLOCK_BYTES",
    "Listener",
    "listening_socket",
    "run_http",
    "serve_http",
]

H2_PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
ACCEPT_BACKOFF_S: Final = 0.1
ACCEPT_LOG_INTERVAL_S: Final = 10.0
_BACKLOG: Final = 1024
_HTTP1: Final = frozenset({"1.0", "1.1"})
_RECEIVE: Final = 65536
_EXIT_MARGIN_MS: Final = 300
# Accepts after the first of one wake-up, at most (nginx's multi_accept, bounded).
_ACCEPT_BURST: Final = 64
# How long new connections wait in the backlog once a newcomer was closed unanswered (no
# room, or past its caller's share): long enough for the served connections to run, and for
# a client's head to follow its connect (a round trip) where the kernel does not wait for it.
_CROWDED_PAUSE_S: Final = 0.02
# HTTP/2 frames, for a newcomer's buffer (`_whole_h2_head`): a frame's header is 9 bytes; a
# header block is a HEADERS frame and its CONTINUATION frames, the last flagged END_HEADERS.
_H2_FRAME_HEADER: Final = 9
_H2_BLOCK_FRAMES: Final = frozenset({0x1, 0x9})
_H2_END_HEADERS: Final = 0x4
# A client writes its head and its body right after its connect: a second covers a slow
# link's first round trips. Before it, a connection that has not sent its request yet is not
# closed for a newcomer that has not either (issue 18.2: a flood's renewed connections
# would close a caller's connection before its head comes), and a body's rate says nothing
# yet about whether it can arrive within LIM-H5 (`_Body.doomed`).
ROOM_GRACE_S: Final = 1.0
# How long the kernel holds a new connection that has sent nothing (`defer_accept`): the
# SYN-ACK is sent again after a second and the connection is accepted at the peer's answer.
# A client writes its request right after its connect; one that stays silent is accepted a
# second late and then bounded by LIM-H3 as before.
DEFER_ACCEPT_S: Final = 1
# After a flood, the heap's free pages go back to the system (issue 18.3) once this many
# connections have closed and then none for `TRIM_QUIET_S`: one trim when a flood ends,
# none while it lasts (each costs a walk of the heap) nor for the odd connection.
TRIM_AFTER_CLOSES: Final = 16
TRIM_QUIET_S: Final = 1.0
# Accept errors that say "not now" (descriptors or buffers exhausted), not "never".
_TRANSIENT_ACCEPT: Final = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.ECONNABORTED, errno.EPROTO}
)


def _resident_kib() -> int:
    """The process's resident memory (Linux), 0 when it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * (os.sysconf("SC_PAGE_SIZE") // 1024)


def _hypercorn_config(config: Config) -> HypercornConfig:
    http = config.service.http
    hc = HypercornConfig()
    hc.keep_alive_timeout = float(http.idle_timeout_s)
    hc.h11_max_incomplete_size = HEADER_BLOCK_BYTES
    hc.h2_max_header_list_size = HEADER_BLOCK_BYTES
    hc.h2_max_concurrent_streams = http.max_streams
    hc.include_server_header = False
    hc.include_date_header = False
    hc.accesslog = None
    hc.errorlog = None  # our own JSON lines only; app failures are logged by the wrapper
    hc.graceful_timeout = config.service.shutdown_ms / 1000
    return hc


class _RefusingH2Connection(h2.connection.H2Connection):
    """h2's connection, with a stream beyond LIM-H4 refused alone (RFC 9113 §5.1.2:
    REFUSED_STREAM) instead of the whole connection ended with PROTOCOL_ERROR, which loses
    the streams in flight. Put in place of hypercorn's own by a class change (`_Replay`)."""

    def _receive_headers_frame(self, frame: Any) -> Any:
        try:
            return super()._receive_headers_frame(frame)
        except h2.exceptions.TooManyStreamsError:
            stream_id = frame.stream_id
            if stream_id % 2 == 0 or stream_id <= self.highest_inbound_stream_id:
                raise  # not a new stream of the client's: h2's own verdict stands
        try:
            # Decoded and dropped: HPACK's table must follow every header block.
            self.decoder.decode(frame.data, raw=True)
        except hpack.HPACKError as exc:
            raise h2.exceptions.ProtocolError("undecodable header block") from exc
        self.highest_inbound_stream_id = stream_id
        self._closed_streams[stream_id] = h2.stream.StreamClosedBy.SEND_RST_STREAM
        reset = hyperframe.frame.RstStreamFrame(stream_id)
        reset.error_code = h2.errors.ErrorCodes.REFUSED_STREAM
        return [reset], []


def refuse_streams_alone(connection: h2.connection.H2Connection) -> None:
    """Make hypercorn's h2 connection refuse a stream beyond LIM-H4 alone
    (`_RefusingH2Connection`); the h2 internals this leans on are named by
    `tests/test_http_internals.py`."""
    connection.__class__ = _RefusingH2Connection
    # h2 dispatches frames through methods bound when it was made.
    table = connection._frame_dispatch_table
    table[hyperframe.frame.HeadersFrame] = connection._receive_headers_frame


_STATUS_TEXT: Final = {
    400: b"Bad Request",
    417: b"Expectation Failed",
    431: b"Request Header Fields Too Large",
    501: b"Not Implemented",
    505: b"HTTP Version Not Supported",
}
_CONTINUE_LINE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"
_PEEK: Final = stdlib_socket.MSG_PEEK | stdlib_socket.MSG_DONTWAIT
_LINGER_S: Final = 0.5
_LINGER_BYTES: Final = 65536


class _Replay(trio.abc.HalfCloseableStream):
    """The accepted stream with the bytes already read handed back first, and every byte
    passed through the connection's gate (`rypsok.mcp.http_framing`) before hypercorn reads it.

    No `do_handshake`: hypercorn takes a stream without one for cleartext (h2c by prior
    knowledge, or HTTP/1.1).
    """

    def __init__(
        self,
        stream: trio.SocketStream,
        first: bytes,
        connection: _Connection,
        refusals: RefusalLog,
    ) -> None:
        self._stream = stream
        self._connection = connection
        self._refusals = refusals
        self.socket = stream.socket
        self.server: TCPServer | None = None
        self._h2_swapped = False
        if connection.h2 is not None:
            # The preface alone first: hypercorn makes its HTTP/2 protocol object from it,
            # and `receive_some` changes that object's h2 class before the first frame.
            self._first = first[: len(H2_PREFACE)]
            self._pending = first[len(H2_PREFACE) :]
        else:
            self._first = b""
            self._pending = first  # through the gate like every later byte

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        connection = self._connection
        if self._first:
            data, self._first = self._first, b""
            await trio.lowlevel.checkpoint()
            return data
        while True:
            if self._pending:
                data, self._pending = self._pending, b""
            else:
                try:
                    data = bytes(await self._stream.receive_some(max_bytes))
                except trio.BrokenResourceError:
                    connection.peer_gone()
                    raise
                if not data:
                    connection.peer_gone()
                    return data
            if connection.h2 is not None:
                return await self._h2(data)
            passed = await self._http1(data)
            if passed is not None:
                return passed

    async def _h2(self, data: bytes) -> bytes:
        connection = self._connection
        scanner = connection.h2
        assert scanner is not None
        if not self._h2_swapped and self.server is not None:
            protocol = getattr(self.server.protocol, "protocol", None)
            h2_connection = getattr(protocol, "connection", None)
            if isinstance(h2_connection, h2.connection.H2Connection):
                refuse_streams_alone(h2_connection)
                self._h2_swapped = True
        if not scanner.feed(data):
            # LIM-H7 passed by the fragments so far: closed before h2 buffers any more.
            self._refusals.refuse("header_too_large", connection.family)
            connection.peer_gone()
            return b""
        connection.head_started(scanner.in_block)
        return data

    async def _http1(self, data: bytes) -> bytes | None:
        """What hypercorn may read of `data`: b"" to close, None when it must wait."""
        connection = self._connection
        gate = connection.gate
        assert gate is not None
        passed = gate.feed(data)
        connection.head_started(gate.head_started)
        if passed:
            # A complete head (or a body's bytes) on its way to the app: not a connection
            # waiting for a request, for the eviction at the cap.
            connection.ready = True
            return passed
        if gate.refused is None:
            return None
        refusal = gate.refused
        if refusal.reason is not None:
            self._refusals.refuse(refusal.reason, connection.family)
        if connection.in_flight == 0 and not gate.in_body:
            await self._answer_and_linger(refusal.status)
        connection.peer_gone()
        return b""

    async def _answer_and_linger(self, status: int) -> None:
        """Answer a refused head and close: the write side first, then what the peer still
        sends is read (bounded) so that the close sends no reset that would lose the answer."""
        head = b"HTTP/1.1 %d %s\r\ncontent-length: 0\r\nconnection: close\r\n\r\n" % (
            status,
            _STATUS_TEXT[status],
        )
        assert self.server is not None
        try:
            async with self.server.send_lock:
                await self._stream.send_all(head)
            await self._stream.send_eof()
            read = 0
            with trio.move_on_after(_LINGER_S):
                while read < _LINGER_BYTES:
                    chunk = await self._stream.receive_some(_RECEIVE)
                    if not chunk:
                        break
                    read += len(chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def send_continue(self) -> None:
        """`100 Continue`, once the app has decided to read the body of a request that asked
        for it (the gate held `Expect` back from h11)."""
        gate = self._connection.gate
        if gate is None or not gate.expects_continue or self.server is None:
            return
        gate.expects_continue = False
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            async with self.server.send_lock:
                await self._stream.send_all(_CONTINUE_LINE)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        # hypercorn hands over the empty end of every HTTP/1 message with a length: sending
        # nothing needs no trip through the scheduler.
        if data:
            await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def aclose(self) -> None:
        await self._stream.aclose()


class _NoIdleTask:
    """Stands in for hypercorn's keep-alive timer of a connection.

    hypercorn starts a task when a connection goes idle and cancels it when a request comes:
    a task started and ended per request. The watchdog below keeps the same bound (LIM-H3,
    closing on shutdown too) with one task for the connection's whole life.
    """

    async def restart(self, task_group: Any, action: Any) -> None:
        pass

    async def stop(self) -> None:
        pass


_NO_IDLE_TASK: Final = _NoIdleTask()


class _Connection:
    """One accepted connection, from its accept: for the eviction at the cap, the watchdog
    and the shutdown."""

    __slots__ = (
        "bodies",
        "closed_by_peer",
        "evicted",
        "family",
        "fd",
        "gate",
        "h2",
        "head_since",
        "holder",
        "in_flight",
        "quiet_since",
        "ready",
        "ready_since",
        "replay",
        "scope",
        "scopes",
        "wake",
    )

    def __init__(self, family: str, fd: int) -> None:
        self.family = family
        self.fd = fd
        self.ready = False  # a complete head passed to hypercorn, its app not yet started
        self.ready_since = 0.0  # when `ready` was last set (HTTP/2: it holds for a grace)
        self.in_flight = 0
        # Since when it has waited without a request running: its accept, or the end of its
        # last request. The oldest such connection makes room at the cap.
        self.quiet_since = trio.current_time()
        self.head_since: float | None = None  # a request head begun, not yet complete
        self.closed_by_peer = False
        self.evicted = False
        self.holder: str | None = None  # the caller whose token its requests carried
        self.wake = trio.Event()
        self.scope = trio.CancelScope()  # the whole connection
        self.scopes: set[trio.CancelScope] = set()  # HTTP/1 requests running
        self.gate: Http1RequestParser | None = None
        self.h2: H2FrameParser | None = None
        self.replay: _Replay | None = None
        self.bodies: list[_Body] = []  # requests running that still read their body

    def peer_gone(self) -> None:
        # hypercorn keeps a closed connection's task until its keep-alive timer ends; the
        # watchdog ends it now, so that the permit (LIM-H1) is free again at once. An HTTP/1
        # request still running has nobody to answer: its call is cancelled (REQ-MCP-007).
        self.closed_by_peer = True
        for scope in self.scopes:
            scope.cancel()
        self.wake.set()

    def head_started(self, started: bool) -> None:
        if started and self.head_since is None:
            self.head_since = trio.current_time()
            self.wake.set()  # the watchdog's deadline moves closer
        elif not started:
            self.head_since = None

    def request_ended(self) -> None:
        # The watchdog is not woken: it finds the new time when its own deadline comes.
        self.quiet_since = trio.current_time()
        self.ready = False

    def waiting_head(self) -> bytes | None:
        """A whole request head already in the socket's buffer and not read yet, else None:
        a new connection's (its task not having run since its accept), HTTP/1 or HTTP/2
        (`_waiting_request`), or a kept-alive HTTP/1 connection's next one (its task not
        having read since it came, the gate between requests)."""
        gate = self.gate
        if self.h2 is not None:
            return None
        if gate is not None and (self.in_flight or gate.head_started or gate.in_body):
            return None
        head = _waiting_request(_peek(self.fd))
        if gate is not None and head == b"":
            return None  # an HTTP/2 preface after HTTP/1 requests is no request
        return head

    def protected(self, now: float) -> bool:
        """Whether a complete request head has been read and its request is about to start.
        Over HTTP/2 the first bytes after the preface count so for `ROOM_GRACE_S`: a header
        block reaches the app within it, and a connection that sent its preface and
        SETTINGS and nothing else must not hold its slot as one about to start until
        LIM-H3 ends it."""
        if not self.ready:
            return False
        return self.h2 is None or now - self.ready_since < ROOM_GRACE_S


def _peek(fd: int) -> bytes:
    """What the socket `fd` has received and nobody has read yet (nothing is consumed)."""
    probe = stdlib_socket.socket(fileno=fd)
    try:
        return probe.recv(HEADER_BLOCK_BYTES, _PEEK)
    except OSError:
        return b""
    finally:
        probe.detach()  # the descriptor stays its owner's


def _whole_http1_head(peeked: bytes) -> bytes | None:
    """The first HTTP/1 head of `peeked` when it is whole, else None."""
    if peeked.startswith(H2_PREFACE[:3]):
        return None
    head, found, _ = peeked.partition(b"\r\n\r\n")
    return head if found else None


def _whole_h2_head(peeked: bytes) -> bool:
    """Whether `peeked` holds the HTTP/2 preface and, after it, a whole header block: frames
    each wholly there up to a HEADERS or CONTINUATION frame that ends the block (an h2c
    client writes its preface, SETTINGS and first request together)."""
    if not peeked.startswith(H2_PREFACE):
        return False
    at = len(H2_PREFACE)
    while at + _H2_FRAME_HEADER <= len(peeked):
        length = int.from_bytes(peeked[at : at + 3], "big")
        kind, flags = peeked[at + 3], peeked[at + 4]
        at += _H2_FRAME_HEADER + length
        if at > len(peeked):
            return False
        if kind in _H2_BLOCK_FRAMES and flags & _H2_END_HEADERS:
            return True
    return False


def _waiting_request(peeked: bytes) -> bytes | None:
    """The whole request head at the start of `peeked`: an HTTP/1 head, b"" for an HTTP/2
    preface and header block (its caller is not known without HPACK), else None."""
    head = _whole_http1_head(peeked)
    if head is None and _whole_h2_head(peeked):
        return b""
    return head


def _authorization(head: bytes) -> bytes | None:
    """The Authorization field of an HTTP/1 head, unchecked (the gate and the app check the
    head; this only tells the accept loop whose connection it probably is)."""
    for line in head.split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if colon and name.lower() == b"authorization":
            return value.strip()
    return None


class _Body:
    """A request's body as the app reads it, for the room made at the cap (issue 18.2): a
    body that, at the rate it has come so far, would not be whole before LIM-H5 ends the
    request is doomed, and its connection may make room once `ROOM_GRACE_S` has passed."""

    __slots__ = ("deadline", "expected", "received", "started", "whole")

    def __init__(self, started: float, expected: int, deadline: float) -> None:
        self.started = started
        self.expected = expected  # its Content-Length, else the most it may be (LIM-H2)
        self.received = 0
        self.deadline = deadline
        self.whole = False  # read to its end (or the peer gone): no longer counted

    def doomed(self, now: float) -> bool:
        elapsed = now - self.started
        if elapsed < ROOM_GRACE_S:
            return False
        if not self.received:
            return True
        # When the rest would come at the rate so far; past LIM-H5, the request is lost.
        remaining = max(self.expected - self.received, 0)
        return now + remaining * elapsed / self.received > self.deadline


class _ConnectionApp:
    """The app as one connection sees it: each request counted while it runs."""

    def __init__(self, listener: Listener, connection: _Connection) -> None:
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
        body = _Body(now, _expected_length(scope, listener.max_body), now + listener.request_s)
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
            listener.calls.ended()


def _expected_length(scope: MutableMapping[str, Any], most: int) -> int:
    """A request's declared body length, else (chunked, HTTP/2 without one) `most`."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            with contextlib.suppress(ValueError):
                return min(int(value), most)
            break
    return most


def _room_order(connection: _Connection) -> tuple[bool, float]:
    return (connection.in_flight > 0, connection.quiet_since)


class Listener:
    """The accept loop, the connection bounds and the hand-over to hypercorn."""

    def __init__(self, app: McpHttpApp, config: Config) -> None:
        http = config.service.http
        self.app = app
        # The app's own, so that the gate's refusals and the listener's share their lines.
        self.refusals = app.refusals if isinstance(app, McpHttpApp) else RefusalLog()
        self._hconfig = _hypercorn_config(config)
        self._context = WorkerContext(None)
        self._max_connections = http.max_connections
        self._idle_s = float(http.idle_timeout_s)
        self._head_s = float(http.head_timeout_s)
        self.request_s = float(http.request_timeout_s)  # LIM-H5
        self.max_body = http.max_request_bytes  # LIM-H2
        # Who a newcomer at the cap is, from the token of a head already in its buffer.
        self._callers = app.callers if isinstance(app, McpHttpApp) else None
        # A caller's share of the connections (issue 18.2): all of them with one caller (or
        # none), else an equal part, so that another caller always finds room.
        callers = len(http.auth.callers)
        self._share = max(1, http.max_connections // callers) if callers > 1 else math.inf
        self._held: dict[str, int] = {}
        self.connections = 0
        self._all: set[_Connection] = set()  # every accepted connection not yet closed
        self._open: set[_Connection] = set()  # past the first bytes, for the shutdown
        self._silent: set[trio.CancelScope] = set()  # waiting for their first bytes
        self.calls = Activity()  # requests running; the drain waits for them
        self._last_accept_log = -math.inf
        self.stopping = False
        self._closed = 0  # connections closed since the last trim (`return_memory`)
        self._closing = trio.Event()  # set when one closes

    @property
    def in_flight(self) -> int:
        """Requests running now (statistics, tests)."""
        return self.calls.count

    # -- room at the cap ----------------------------------------------------------------------

    def _evict(self, connection: _Connection) -> None:
        """Close a connection with no request running, to make room (counted, not logged per
        connection: a flood would write a line each)."""
        connection.evicted = True
        self._forget(connection)
        self.refusals.refuse("connection_evicted", connection.family)
        connection.scope.cancel()

    def _forget(self, connection: _Connection) -> None:
        if connection in self._all:
            self._all.discard(connection)
            self.connections -= 1
            if connection.holder is not None:
                self._held[connection.holder] -= 1
            self._closed += 1
            self._closing.set()

    def _longest_waiting(
        self, holder: str | None = None, *, but: Any = None, settled: bool = False
    ) -> Any:
        """The connection that has waited longest without a request (of `holder` when
        given; `settled`: for `ROOM_GRACE_S` at least), else one whose requests' bodies are
        doomed (`_Body.doomed`), or None: one with a request running or complete and about
        to run is never chosen."""
        now = trio.current_time()
        since = now - ROOM_GRACE_S if settled else math.inf
        candidates = [
            connection
            for connection in self._all
            if connection is not but
            and (holder is None or connection.holder == holder)
            and connection.quiet_since <= since
        ]
        # Those without a request first: closing them loses nothing at all.
        candidates.sort(key=_room_order)
        for connection in candidates:
            if self._can_make_room(connection, now):
                return connection
        return None

    def _can_make_room(self, connection: _Connection, now: float) -> bool:
        """Whether closing `connection` loses no request: it has none running and none
        complete and about to run (its head passed through the gate, or whole in its
        socket's buffer unread: under a flood a new connection can wait many scheduling
        rounds before its first read, it is not one that waits), or (issue 18.2) one whose
        caller holds its share (it would be refused), or only requests whose bodies cannot
        arrive in time (`_Body.doomed`: LIM-H5 would end them anyway)."""
        if connection.in_flight:
            bodies = connection.bodies
            return len(bodies) == connection.in_flight and all(b.doomed(now) for b in bodies)
        if connection.protected(now):
            return False
        head = connection.waiting_head()
        return head is None or self._past_share(self._caller_of(head), connection)

    def _caller_of(self, head: bytes | None) -> str | None:
        """The caller an HTTP/1 head names by its token, when there are shares to keep."""
        if not head or self._callers is None or self._share == math.inf:
            return None  # b"": an HTTP/2 request, its token in an HPACK-encoded block
        return self._callers.identify(_authorization(head))

    def _past_share(self, caller: str | None, connection: _Connection | None = None) -> bool:
        """Whether `caller` holds its share already (`connection` not one of them)."""
        if caller is None or (connection is not None and connection.holder == caller):
            return False
        return self._held.get(caller, 0) >= self._share

    def _claimed(self, connection: _Connection, first: bytes) -> bool:
        """The claim (`claim`) of the caller a connection's first bytes name, when they hold
        a whole head; True when they name none (the app's claim decides later)."""
        caller = self._caller_of(_whole_http1_head(first))
        return caller is None or self.claim(connection, caller)

    def claim(self, connection: _Connection, caller: str) -> bool:
        """The gate's call once a request's token names its caller: the connection is then
        the caller's. False when the caller already holds its share and none of those
        connections is waiting (the request is refused, 503)."""
        if connection.holder == caller:
            return True
        if self._held.get(caller, 0) >= self._share:
            victim = self._longest_waiting(caller, but=connection)
            if victim is None:
                return False
            self._evict(victim)
        if connection.holder is not None:
            self._held[connection.holder] -= 1
        connection.holder = caller
        self._held[caller] = self._held.get(caller, 0) + 1
        return True

    # -- accepting ------------------------------------------------------------------------

    async def accept_loop(self, sock: Any, nursery: trio.Nursery) -> None:
        family = "ipv6" if sock.family == stdlib_socket.AF_INET6 else "ipv4"
        # The same listening descriptor, for the accepts after the first of a wake-up.
        backlog = stdlib_socket.socket(fileno=sock.fileno())
        try:
            while True:
                try:
                    client, _ = await sock.accept()
                except OSError as exc:
                    await self._accept_failed(exc)
                    continue
                refused = not self._admit(client, family, nursery)
                # trio's accept ends with a checkpoint that no cancel interrupts: the shutdown
                # may have cancelled this loop and closed the socket meanwhile, and an accept
                # on its descriptor would fail (EBADF) instead of the loop ending.
                await trio.lowlevel.checkpoint_if_cancelled()
                # What else the listen backlog holds, taken now: trio's accept is one per
                # scheduling round, so under a flood renewing itself a caller's connection
                # would wait in the backlog one round per connection queued before it,
                # each round running every connection's work (issue 18.2).
                for _ in range(_ACCEPT_BURST):
                    try:
                        raw, _ = backlog.accept()
                    except BlockingIOError:
                        break
                    except OSError as exc:
                        await self._accept_failed(exc)
                        break
                    raw_client = trio.socket.from_stdlib_socket(raw)
                    refused = not self._admit(raw_client, family, nursery) or refused
                if refused:
                    # A newcomer of this wake-up was closed unanswered (no room, or past its
                    # caller's share): a flood renewing itself. The next ones wait in the
                    # backlog a moment: the connections already served get scheduling
                    # rounds without a burst of refusals in each (a flood closed at once
                    # reconnects at once, and a caller's request takes tens of rounds), and
                    # where the kernel does not hold connections until their bytes come,
                    # their heads are there at their accept.
                    await trio.sleep(_CROWDED_PAUSE_S)
        finally:
            backlog.detach()  # the descriptor stays the listening socket's

    async def _accept_failed(self, exc: OSError) -> None:
        """An accept error that says "not now" (descriptors exhausted): back off, logged at
        most once per interval; any other is raised."""
        if exc.errno not in _TRANSIENT_ACCEPT:
            raise exc
        now = trio.current_time()
        if now - self._last_accept_log >= ACCEPT_LOG_INTERVAL_S:
            self._last_accept_log = now
            telemetry.warn("accept_failed", error=errno.errorcode.get(exc.errno or 0, ""))
        await trio.sleep(ACCEPT_BACKOFF_S)

    def _admit(self, client: Any, family: str, nursery: trio.Nursery) -> bool:
        """Serve a new connection, making room at the cap; False when it was closed
        unanswered (`too_many_connections`, `caller_share`)."""
        # Whose it is, when its head is in its buffer already (issue 18.2): a flood's
        # renewed connections queue in the backlog with their heads, and are known here,
        # before hypercorn parses them and the app answers them.
        crowded = self.connections >= self._max_connections
        shared = self._callers is not None and self._share != math.inf
        head = _waiting_request(_peek(client.fileno())) if crowded or shared else None
        holder = self._caller_of(head)
        victim = None
        if self._past_share(holder):
            # Its caller holds its share: one of its own connections makes room, else the
            # newcomer goes at once, unanswered (a flood's renewed connections would
            # otherwise take every room made, or fill the rest of the slots waiting for
            # their 503).
            victim = self._longest_waiting(holder)
            if victim is None:
                self.refusals.refuse("caller_share", family)
                client.close()
                return False
        elif crowded:
            # At the cap room is made, not refused: the connection that has waited
            # longest without a request goes; only when every connection has a request
            # running is the new one closed unanswered. A newcomer without its request
            # yet makes room only among connections settled past the grace.
            victim = self._longest_waiting(settled=head is None)
            if victim is None:
                self.refusals.refuse("too_many_connections", family)
                client.close()
                return False
        if victim is not None:
            self._evict(victim)
        connection = _Connection(family, client.fileno())
        self._all.add(connection)
        self.connections += 1
        if holder is not None:
            self.claim(connection, holder)
        nursery.start_soon(self._serve_connection, client, connection)
        return True

    async def _serve_connection(self, client: Any, connection: _Connection) -> None:
        stream = trio.SocketStream(client)
        family = connection.family
        try:
            with connection.scope:
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
                    if connection.holder is None and not self._claimed(connection, first):
                        # Its caller holds its share, each connection with a request: it
                        # goes before hypercorn parses it (its head came after the accept).
                        self.refusals.refuse("caller_share", family)
                        return
                app = ASGIWrapper(cast("Any", _ConnectionApp(self, connection)))
                replay = _Replay(stream, first, connection, self.refusals)
                connection.replay = replay
                # cleartext: hypercorn's no-TLS path
                server = TCPServer(
                    app, self._hconfig, self._context, ConnectionState({}), cast("Any", replay)
                )
                replay.server = server
                server.idle_task = cast("Any", _NO_IDLE_TASK)
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
        finally:
            self._forget(connection)
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _first_bytes(
        self, stream: trio.SocketStream, connection: _Connection
    ) -> bytes | None:
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
                        chunk = await stream.receive_some(_RECEIVE)
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

    async def _watchdog(self, connection: _Connection, scope: trio.CancelScope) -> None:
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
            if (
                connection.closed_by_peer
                or self.stopping
                or now - connection.quiet_since >= self._idle_s
            ):
                scope.cancel()
                return

    # -- memory ---------------------------------------------------------------------------

    async def return_memory(
        self,
        trim: Callable[[], object] | None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Hand the allocator's free memory back once a flood's connections have closed
        (issue 18.3): what the connections held is freed as they close, but glibc keeps it
        for the next allocations, so without this the process would stay at its flood
        size. `trim` is `malloc_trim` (None: nothing to do here)."""
        task_status.started()
        if trim is None:
            return
        while True:
            await self._closing.wait()
            # The closes stop first: no trim while a flood goes on (each walks the heap).
            quiet = False
            while not quiet:
                self._closing = trio.Event()
                with trio.move_on_after(TRIM_QUIET_S) as timer:
                    await self._closing.wait()
                quiet = timer.cancelled_caught
            if self._closed < TRIM_AFTER_CLOSES:
                continue
            closed, self._closed = self._closed, 0
            before = _resident_kib()
            began = time.perf_counter()
            # The cycles the connections left (hypercorn's objects refer to one another)
            # wait for a full collection; freed first, their memory is the allocator's
            # to hand back, and the next flood does not add to it.
            gc.collect()
            trim()
            telemetry.debug(
                "memory_returned",
                connections=closed,
                released_kib=before - _resident_kib(),
                ms=round((time.perf_counter() - began) * 1000, 1),
            )

    # -- stopping -------------------------------------------------------------------------

    async def drain(self, deadline: float) -> None:
        """New requests on open connections are refused; wait for those running."""
        self.stopping = True
        await self._context.terminated.set()
        # Idle connections close now, and those that have not sent their first bytes; busy
        # ones once their request is answered (hypercorn keeps no connection alive after
        # `terminated`).
        for scope in self._silent:
            scope.cancel()
        for connection in self._open:
            connection.wake.set()
        with trio.move_on_at(deadline):
            await self.calls.idle.wait()


def defer_accept(sock: stdlib_socket.socket) -> bool:
    """Have the kernel hold a new connection until its first bytes come (`TCP_DEFER_ACCEPT`,
    Linux), `DEFER_ACCEPT_S` at most: a connection is then the listener's with its request
    head in its buffer, known at its accept (issue 18.2). False where the system has no
    such option; the listener then also takes connections before their first bytes."""
    option = getattr(stdlib_socket, "TCP_DEFER_ACCEPT", None)
    if option is None:
        return False
    try:
        sock.setsockopt(stdlib_socket.IPPROTO_TCP, option, DEFER_ACCEPT_S)
    except OSError:
        return False
    return True


def listening_socket(bind: str, port: int | None = None) -> stdlib_socket.socket:
    """The bound, listening socket of `[service.http] bind` (`port` replaces its port).

    Bound before the event loop starts, so that an address in use is a plain error.
    """
    parsed = parse_bind(bind)
    family = stdlib_socket.AF_INET6 if parsed.host.version == 6 else stdlib_socket.AF_INET
    sock = stdlib_socket.socket(family, stdlib_socket.SOCK_STREAM)
    try:
        sock.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_REUSEADDR, 1)
        if family == stdlib_socket.AF_INET6:
            sock.setsockopt(stdlib_socket.IPPROTO_IPV6, stdlib_socket.IPV6_V6ONLY, 1)
        sock.bind((str(parsed.host), parsed.port if port is None else port))
        defer_accept(sock)
        sock.listen(_BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


async def serve_http(
    service: ToolService,
    config: Config,
    callers: Callers,
    *,
    stop: trio.Event,
    port: int | None = None,
    session_ttl_s: float = SESSION_TTL_S,
    listen_socket: Any = None,
    counters_interval_s: float = 60.0,
    trim: Callable[[], object] | None = None,
    task_status: trio.TaskStatus[tuple[int, Listener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve MCP over HTTP until `stop`, then shut down within `service.shutdown_ms`.

    `port` replaces the configured one (tests bind port 0); `listen_socket` replaces the
    socket itself (a test's socket whose accept fails); `counters_interval_s` is the minute
    of the `counters` event; `trim` returns the allocator's free memory after a flood
    (`malloc_trim`, which `run_http` passes; None: kept).
    """
    if listen_socket is None:
        listen_socket = listening_socket(config.service.http.bind, port)
    sock = (
        trio.socket.from_stdlib_socket(listen_socket)
        if isinstance(listen_socket, stdlib_socket.socket)
        else listen_socket
    )
    host, bound_port = sock.getsockname()[:2]
    app = McpHttpApp(service, config, callers, session_ttl_s=session_ttl_s, bound_port=bound_port)
    listener = Listener(app, config)
    shown = f"[{host}]:{bound_port}" if ":" in host else f"{host}:{bound_port}"
    telemetry.info("listening", address=shown, transport="http", callers=len(callers))
    shutdown_ms = config.service.shutdown_ms
    async with trio.open_nursery() as nursery:
        await nursery.start(telemetry.run_counters_reporter, counters_interval_s)
        await nursery.start(app.refusals.run)
        await nursery.start(listener.return_memory, trim)
        async with trio.open_nursery() as connections:
            accepting = trio.CancelScope()

            async def accept() -> None:
                with accepting:
                    await listener.accept_loop(sock, connections)

            connections.start_soon(accept)
            task_status.started((bound_port, listener))
            await stop.wait()
            stopped_at = trio.current_time()
            accepting.cancel()
            sock.close()  # from here a new connection is refused by the kernel
            telemetry.info("shutdown_started", in_flight=listener.calls.count)
            grace = max(shutdown_ms - _EXIT_MARGIN_MS, 0) / 1000
            await listener.drain(stopped_at + grace)
            # What still runs (idle connections, cancelled calls) ends with the nursery.
            connections.cancel_scope.cancel()
        app.refusals.flush(final=True)
        nursery.cancel_scope.cancel()


async def _serve_process(
    config: Config,
    callers: Callers,
    sock: stdlib_socket.socket,
    service: Callable[[], Rypsok],
) -> None:
    async with serving(service, (signal.SIGTERM, signal.SIGINT)) as (rypsok, stop):
        await serve_http(rypsok, config, callers, stop=stop, listen_socket=sock, trim=malloc_trim())


def run_http(
    config: Config,
    env: Mapping[str, str],
    *,
    service: Callable[[], Rypsok] | None = None,
) -> int:
    """`rypsok serve --transport http`: serve until SIGTERM; exit code 0.

    The tokens are read once, here; the configuration was validated with the same reading.
    `service` builds the core to serve (`default_service`, the production one, when None).
    """
    callers = Callers.from_config(config, env)
    try:
        sock = listening_socket(config.service.http.bind)
    except OSError as exc:
        telemetry.error(
            "listen_failed",
            address=config.service.http.bind,
            error=errno.errorcode.get(exc.errno or 0, "OSError"),
            note="another process may hold the port; change service.http.bind",
        )
        return 1
    previous = signal.getsignal(signal.SIGTERM)
    _early.install()
    try:
        built = service or default_service(config, env)
        trio.run(_serve_process, config, callers, sock, built)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0
