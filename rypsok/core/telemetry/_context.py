"""The per-call context: a request id and the caller, carried by a contextvar.

Trio copies the current context into every task it starts, so the events of child tasks
(one per engine) started inside a call carry that call's id without being handed it.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
import time
from typing import Final

import attrs

__all__ = [
    "LOCAL_CALLER",
    "CallContext",
    "call_scope",
    "current_call",
    "current_caller",
    "current_request_id",
    "new_request_id",
]

# The caller of every call over stdio, and over HTTP on a listener without callers.
LOCAL_CALLER: Final = "local"


@attrs.frozen(kw_only=True)
class CallContext:
    request_id: str
    caller: str


_CALL: Final[contextvars.ContextVar[CallContext | None]] = contextvars.ContextVar(
    "rypsok_call", default=None
)
_SEQUENCE = itertools.count(1)
_SEQUENCE_LOCK = threading.Lock()


def new_request_id() -> str:
    """The start time in milliseconds since the epoch and a process-wide sequence number.

    The sequence alone makes the id unique within the process; the time makes ids of two
    runs of the process unlikely to meet in one log file.
    """
    with _SEQUENCE_LOCK:
        sequence = next(_SEQUENCE)
    millis = time.time_ns() // 1_000_000
    return f"{millis:011x}-{sequence:06x}"


class call_scope:  # lower case: used like the function it replaced
    """Mark everything logged inside as part of one tool call of `caller`; yields its id.

    A class rather than a generator: it is entered on every call of every tool.
    """

    __slots__ = ("_context", "_token")

    def __init__(self, caller: str) -> None:
        self._context = CallContext(request_id=new_request_id(), caller=caller)

    def __enter__(self) -> str:
        self._token = _CALL.set(self._context)
        return self._context.request_id

    def __exit__(self, *exc_info: object) -> None:
        _CALL.reset(self._token)


def current_call() -> CallContext | None:
    return _CALL.get()


def current_request_id() -> str | None:
    context = _CALL.get()
    return None if context is None else context.request_id


def current_caller() -> str | None:
    context = _CALL.get()
    return None if context is None else context.caller
