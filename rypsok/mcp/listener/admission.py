"""Who gets a connection (LIM-H1): the table of accepted connections, the room made at the
cap and each caller's share.

At the cap a new connection makes room: the connection that has waited longest without a
request (none running, none complete and waiting to run) is closed (`connection_evicted`),
else one whose request bodies cannot arrive within LIM-H5 at their rate so far
(`Body.doomed`); only when there is none is the new one closed unanswered
(`too_many_connections`). A newcomer that has not sent its whole head yet makes room only
among connections that have waited `ROOM_GRACE_S`. With two callers or more a caller holds
at most its share of the connections (`claim`): a newcomer whose whole head is in its buffer
at its accept, or in its first read, is known by its token there and closed at once past its
share (`caller_share`); otherwise the app's gate claims it (503).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import trio

from rypsok.mcp.listener.connection import ROOM_GRACE_S, Connection
from rypsok.mcp.listener.heads import (
    Socket,
    authorization,
    peek,
    waiting_request,
    whole_http1_head,
)
from rypsok.mcp.probes import needs_no_token

if TYPE_CHECKING:
    from rypsok.config.schema import Config
    from rypsok.mcp.caller_tokens import Callers
    from rypsok.mcp.http_app import RefusalLog
    from rypsok.mcp.listener.memory import MemoryReturn

__all__ = ["Admission"]


def _room_order(connection: Connection) -> tuple[bool, float]:
    return (connection.in_flight > 0, connection.quiet_since)


class Admission:
    """The accepted connections not yet closed, and the decisions on who holds one."""

    def __init__(
        self,
        config: Config,
        callers: Callers | None,
        refusals: RefusalLog,
        memory: MemoryReturn,
        *,
        cap: int | None = None,
    ) -> None:
        http = config.service.http
        # `max_connections`, or fewer when the descriptor limit allows fewer (`descriptors`).
        self.cap = http.max_connections if cap is None else cap
        self.refusals = refusals
        self._memory = memory
        # Who a newcomer at the cap is, from the token of a head already in its buffer.
        self._callers = callers
        # A caller's share of the connections: all of them with one caller (or none), else
        # an equal part, so that another caller always finds room.
        count = len(http.auth.callers)
        self.share = max(1, self.cap // count) if count > 1 else math.inf
        self._held: dict[str, int] = {}
        self.connections = 0
        self._all: set[Connection] = set()  # every accepted connection not yet closed

    def admit(self, client: Socket, family: str) -> Connection | None:
        """The new connection of `client`, room made for it at the cap; None when it is to
        be closed unanswered (`too_many_connections`, `caller_share`: the caller closes it,
        the owner of its socket until a connection holds it)."""
        # Whose it is, when its head is in its buffer already: a flood's renewed
        # connections queue in the backlog with their heads, and are known here, before
        # hypercorn parses them and the app answers them.
        crowded = self.connections >= self.cap
        shared = self._callers is not None and self.share != math.inf
        head = waiting_request(peek(client)) if crowded or shared else None
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
                return None
        elif crowded:
            if self.tokenless(head):
                # A request no caller's token opens would only be answered 401: at the cap
                # it makes no room, it goes at once (a tokenless flood renewing itself
                # costs an accept and a peek each, and a caller behind it in the backlog
                # is reached within a few bursts).
                self.refusals.refuse("too_many_connections", family)
                return None
            # At the cap room is made, not refused: the connection that has waited
            # longest without a request goes; only when every connection has a request
            # running is the new one closed unanswered. A newcomer without its request
            # yet makes room only among connections settled past the grace.
            victim = self._longest_waiting(settled=head is None)
            if victim is None:
                self.refusals.refuse("too_many_connections", family)
                return None
        if victim is not None:
            self._evict(victim)
        connection = Connection(family, client)
        connection.tokenless = self.tokenless(head)
        self._all.add(connection)
        self.connections += 1
        if holder is not None:
            self.claim(connection, holder)
        return connection

    def make_room(self) -> bool:
        """Close the connection that has waited longest without a request, settled past
        the grace, for a newcomer the system has no descriptor for (`EMFILE`); False when
        every connection has a request."""
        victim = self._longest_waiting(settled=True)
        if victim is None:
            return False
        self._evict(victim)
        return True

    def _evict(self, connection: Connection) -> None:
        """Close a connection with no request running, to make room (counted, not logged per
        connection: a flood would write a line each)."""
        connection.evicted = True
        self.forget(connection)
        self.refusals.refuse("connection_evicted", connection.family)
        connection.scope.cancel()

    def forget(self, connection: Connection) -> None:
        """The connection is closing: it no longer counts, nor can it make room."""
        if connection in self._all:
            self._all.discard(connection)
            self.connections -= 1
            if connection.holder is not None:
                self._held[connection.holder] -= 1
            self._memory.connection_closed()

    def _longest_waiting(
        self, holder: str | None = None, *, but: Any = None, settled: bool = False
    ) -> Any:
        """The connection that has waited longest without a request (of `holder` when
        given; `settled`: for `ROOM_GRACE_S` at least), else one whose requests' bodies are
        doomed (`Body.doomed`), or None: one with a request running or complete and about
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

    def _can_make_room(self, connection: Connection, now: float) -> bool:
        """Whether closing `connection` loses no request: its request carries no caller's
        token (`Connection.tokenless`: it would be refused), or it has none running and none
        complete and about to run (its head passed through the gate, or whole in its
        socket's buffer unread: under a flood a new connection can wait many scheduling
        rounds before its first read, it is not one that waits), or one whose caller holds
        its share (it would be refused), or only requests whose bodies cannot arrive in
        time (`Body.doomed`: LIM-H5 would end them anyway)."""
        if connection.tokenless:
            return True  # its request would be refused 401: nothing is lost
        if connection.in_flight:
            bodies = connection.bodies
            return len(bodies) == connection.in_flight and all(b.doomed(now) for b in bodies)
        if connection.protected(now):
            return False
        head = connection.waiting_head()
        return head is None or self._past_share(self._caller_of(head), connection)

    def tokenless(self, head: bytes | None) -> bool:
        """Whether a whole HTTP/1 head carries no caller's token where tokens are needed
        (a CORS preflight and a health probe, which carry none by design, aside, judged as
        the app routes them, `rypsok.mcp.probes`: a probe at the cap makes room as a
        caller's request does, so that an orchestrator sees the process alive through a
        flood)."""
        callers = self._callers
        if not head or callers is None or not callers.required:
            return False
        if callers.identify(authorization(head)) is not None:
            return False
        # The app's own judgement of what it answers without a token, on the raw head.
        return not needs_no_token(head)

    def _caller_of(self, head: bytes | None) -> str | None:
        """The caller an HTTP/1 head names by its token, when there are shares to keep."""
        if not head or self._callers is None or self.share == math.inf:
            return None  # b"": an HTTP/2 request, its token in an HPACK-encoded block
        return self._callers.identify(authorization(head))

    def _past_share(self, caller: str | None, connection: Connection | None = None) -> bool:
        """Whether `caller` holds its share already (`connection` not one of them)."""
        if caller is None or (connection is not None and connection.holder == caller):
            return False
        return self._held.get(caller, 0) >= self.share

    def claimed(self, connection: Connection, first: bytes) -> bool:
        """The claim (`claim`) of the caller a connection's first bytes name, when they hold
        a whole head; True when they name none (the app's claim decides later)."""
        caller = self._caller_of(whole_http1_head(first))
        return caller is None or self.claim(connection, caller)

    def claim(self, connection: Connection, caller: str) -> bool:
        """The gate's call once a request's token names its caller: the connection is then
        the caller's. False when the caller already holds its share and none of those
        connections is waiting (the request is refused, 503)."""
        if connection.holder == caller:
            return True
        if self._held.get(caller, 0) >= self.share:
            victim = self._longest_waiting(caller, but=connection)
            if victim is None:
                return False
            self._evict(victim)
        if connection.holder is not None:
            self._held[connection.holder] -= 1
        connection.holder = caller
        connection.tokenless = False
        self._held[caller] = self._held.get(caller, 0) + 1
        return True
