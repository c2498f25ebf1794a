"""One accepted connection's state, from its accept to its close: what the room made at the
cap (`admission`), the watchdog and the shutdown read of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import trio

from rypsok.mcp.listener.heads import Socket, peek, waiting_request

if TYPE_CHECKING:
    from rypsok.mcp.http_framing import H2FrameParser, Http1RequestParser
    from rypsok.mcp.listener.stream import Replay

__all__ = ["ROOM_GRACE_S", "Body", "Connection"]

# A client writes its head and its body right after its connect: a second covers a slow
# link's first round trips. Before it, a connection that has not sent its request yet is not
# closed for a newcomer that has not either (a flood's renewed connections would close a
# caller's connection before its head comes), and a body's rate says nothing yet about
# whether it can arrive within LIM-H5 (`Body.doomed`).
ROOM_GRACE_S: Final = 1.0


class Connection:
    """One accepted connection, from its accept: for the eviction at the cap, the watchdog
    and the shutdown."""

    __slots__ = (
        "bodies",
        "closed_by_peer",
        "ended",
        "evicted",
        "family",
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
        "sock",
        "tokenless",
        "wake",
    )

    def __init__(self, family: str, sock: Socket) -> None:
        self.family = family
        # Its socket, read here only through the object that owns the descriptor: once the
        # connection's task (or hypercorn through it) closes it, a peek finds nothing.
        self.sock = sock
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
        # Its first request carries no caller's token (read at its accept or first read):
        # it would only be refused, so it may make room at the cap, until a caller claims it.
        self.tokenless = False
        self.wake = trio.Event()
        self.ended = trio.Event()  # its serving is over (the shutdown's drain waits for it)
        self.scope = trio.CancelScope()  # the whole connection
        self.scopes: set[trio.CancelScope] = set()  # HTTP/1 requests running
        self.gate: Http1RequestParser | None = None
        self.h2: H2FrameParser | None = None
        self.replay: Replay | None = None
        self.bodies: list[Body] = []  # requests running that still read their body

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

    @property
    def settled(self) -> bool:
        """Whether all its answers are written (`Replay.settled`; true before hypercorn has
        it)."""
        return self.replay is None or self.replay.settled

    def request_ended(self) -> None:
        # The watchdog is not woken: it finds the new time when its own deadline comes.
        self.quiet_since = trio.current_time()
        self.ready = False

    def waiting_head(self) -> bytes | None:
        """A whole request head already in the socket's buffer and not read yet, else None:
        a new connection's (its task not having run since its accept), HTTP/1 or HTTP/2
        (`waiting_request`), or a kept-alive HTTP/1 connection's next one (its task not
        having read since it came, the gate between requests)."""
        gate = self.gate
        if self.h2 is not None:
            return None
        if gate is not None and (self.in_flight or gate.head_started or gate.in_body):
            return None
        head = waiting_request(peek(self.sock))
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


class Body:
    """A request's body as the app reads it, for the room made at the cap: a body that, at
    the rate it has come so far, would not be whole before LIM-H5 ends the request is
    doomed, and its connection may make room once `ROOM_GRACE_S` has passed."""

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
