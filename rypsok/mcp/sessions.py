"""Sessions of the handshake-based revisions over HTTP: bounded (LIM-H6) and expiring.

A session is the state `initialize` creates for one client: its own dispatcher (which holds the
negotiated revision) and the caller that opened it. A session is bound to that caller: another
caller's token does not reach it. A session with no traffic for `ttl_s` is gone; DELETE ends one
at once. The bound counts live sessions only, so an expired one frees its slot.

Implements REQ-SEC-024.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Final

import trio

if TYPE_CHECKING:
    from rypsok.mcp.protocol import Dispatcher

__all__ = ["SESSION_TTL_S", "Session", "SessionTable"]

SESSION_TTL_S: Final = 300.0  # without traffic (troubleshooting: 503)


class Session:
    __slots__ = ("caller", "dispatcher", "last_seen", "session_id")

    def __init__(self, session_id: str, caller: str, dispatcher: Dispatcher, now: float) -> None:
        self.session_id = session_id
        self.caller = caller
        self.dispatcher = dispatcher
        self.last_seen = now


class SessionTable:
    def __init__(self, max_sessions: int, ttl_s: float = SESSION_TTL_S) -> None:
        self._max = max_sessions
        self._ttl = ttl_s
        self._sessions: dict[str, Session] = {}  # oldest traffic first (moved on each touch)

    def _expire(self, now: float) -> None:
        while self._sessions:
            oldest = next(iter(self._sessions.values()))
            if now - oldest.last_seen < self._ttl:
                return
            del self._sessions[oldest.session_id]

    def __len__(self) -> int:
        self._expire(trio.current_time())
        return len(self._sessions)

    def open(self, caller: str, dispatcher: Dispatcher) -> Session | None:
        """A new session, or None when LIM-H6 sessions are live (answer 503)."""
        now = trio.current_time()
        self._expire(now)
        if len(self._sessions) >= self._max:
            return None
        # 128 random bits, visible ASCII as the transport requires.
        session = Session(secrets.token_urlsafe(24), caller, dispatcher, now)
        self._sessions[session.session_id] = session
        return session

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
        del self._sessions[session_id]
        return True
