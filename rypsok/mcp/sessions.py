"""Sessions of the handshake-based revisions over HTTP: bounded (LIM-H6) and expiring.

A session is the state `initialize` creates for one client: its own dispatcher (which holds the
negotiated revision) and the caller that opened it. A session is bound to that caller: another
caller's token does not reach it. A session with no traffic for `ttl_s` is gone; DELETE ends one
at once. The bound counts live sessions only, so an expired one frees its slot.

With two callers or more each holds at most its share of the sessions (`max_sessions` /
callers, as connections have theirs): one caller's handshakes cannot take the sessions the
others need. A caller at its share is told when its oldest session will have expired, even
when the table is full as well: no other session's end lets it open one sooner.

Implements REQ-SEC-024.
"""

from __future__ import annotations

import math
import secrets
from typing import TYPE_CHECKING, Final

import attrs
import trio

if TYPE_CHECKING:
    from rypsok.mcp.protocol import Dispatcher

__all__ = ["SESSION_TTL_S", "Session", "SessionTable", "SessionsFull"]

SESSION_TTL_S: Final = 300.0  # without traffic (troubleshooting: 503)


class Session:
    __slots__ = ("caller", "dispatcher", "last_seen", "session_id")

    def __init__(self, session_id: str, caller: str, dispatcher: Dispatcher, now: float) -> None:
        self.session_id = session_id
        self.caller = caller
        self.dispatcher = dispatcher
        self.last_seen = now


@attrs.frozen
class SessionsFull:
    """No session opened: LIM-H6 sessions are live (`share` False), or the caller holds its
    share of them (`share` True; `retry_after_ms`: until its oldest session expires)."""

    share: bool
    retry_after_ms: int


class SessionTable:
    def __init__(self, max_sessions: int, ttl_s: float = SESSION_TTL_S, callers: int = 0) -> None:
        self._max = max_sessions
        self._ttl = ttl_s
        # A caller's share: all of them with one caller (or none), else an equal part.
        self.share = max(1, max_sessions // callers) if callers > 1 else math.inf
        self._sessions: dict[str, Session] = {}  # oldest traffic first (moved on each touch)
        self._held: dict[str, int] = {}  # live sessions per caller

    def _expire(self, now: float) -> None:
        while self._sessions:
            oldest = next(iter(self._sessions.values()))
            if now - oldest.last_seen < self._ttl:
                return
            self._drop(oldest)

    def _drop(self, session: Session) -> None:
        del self._sessions[session.session_id]
        held = self._held[session.caller] - 1
        if held:
            self._held[session.caller] = held
        else:
            del self._held[session.caller]

    def held(self, caller: str) -> int:
        """The caller's live sessions."""
        self._expire(trio.current_time())
        return self._held.get(caller, 0)

    def __len__(self) -> int:
        self._expire(trio.current_time())
        return len(self._sessions)

    def open(self, caller: str, dispatcher: Dispatcher) -> Session | SessionsFull:
        """A new session, or why there is none (answer 503)."""
        now = trio.current_time()
        self._expire(now)
        # The share is judged first: a caller at its share opens nothing before its own
        # oldest session expires, however many the others free, so that is its true wait.
        if self._held.get(caller, 0) >= self.share:
            return SessionsFull(share=True, retry_after_ms=self._oldest_ends_ms(caller, now))
        if len(self._sessions) >= self._max:
            return SessionsFull(share=False, retry_after_ms=self._oldest_ends_ms(None, now))
        # 128 random bits, visible ASCII as the transport requires.
        session = Session(secrets.token_urlsafe(24), caller, dispatcher, now)
        self._sessions[session.session_id] = session
        self._held[caller] = self._held.get(caller, 0) + 1
        return session

    def _oldest_ends_ms(self, caller: str | None, now: float) -> int:
        """When the oldest live session (of `caller`, when given) expires, from `now`."""
        for session in self._sessions.values():  # oldest traffic first
            if caller is None or session.caller == caller:
                return max(1, math.ceil((session.last_seen + self._ttl - now) * 1000))
        return 1

    def get(self, session_id: str, caller: str) -> Session | None:
        """The live session of this id and caller, its clock restarted; None otherwise."""
        now = trio.current_time()
        self._expire(now)
        session = self._sessions.get(session_id)
        if session is None or session.caller != caller:
            return None
        session.last_seen = now
        # Keep the dict in traffic order so that expiry only looks at its head.
        del self._sessions[session_id]
        self._sessions[session_id] = session
        return session

    def close(self, session_id: str, caller: str) -> bool:
        session = self.get(session_id, caller)
        if session is None:
            return False
        self._drop(session)
        return True
