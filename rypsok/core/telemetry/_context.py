"""The per-call context: a request id and the caller, carried by a contextvar.

Trio copies the current context into every task it starts, so the events of child tasks
(one per engine) started inside a call carry that call's id without being handed it.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterator

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


@contextmanager
def call_scope(caller: str) -> Iterator[str]:
    """Mark everything logged inside as part of one tool call of `caller`; yields its id."""
    context = CallContext(request_id=new_request_id(), caller=caller)
    token = _CALL.set(context)
    try:
        yield context.request_id
    finally:
        _CALL.reset(token)


def current_call() -> CallContext | None:
    return _CALL.get()


def current_request_id() -> str | None:
    context = _CALL.get()
    return None if context is None else context.request_id


def current_caller() -> str | None:
    context = _CALL.get()
    return None if context is None else context.caller
