"""JSON log lines on standard error: one object per line, written whole.

Nothing here writes to stdout, which belongs to the stdio transport. A value that cannot be
serialised is replaced by its type name, never by its text: the text of an arbitrary object
(an exception, a response, a page) can carry external content or a secret.

Implements REQ-OBS-005 and REQ-OBS-006.
"""

from __future__ import annotations

import atexit
import enum
import json
import sys
import threading
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, TextIO

import attrs
import trio

from ._context import current_call
from ._refusals import ToolRefusals
from ._secret import REDACTED, Secret
from ._writer import BackgroundWriter

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "LEVELS",
    "TOOL_REFUSALS",
    "configure",
    "debug",
    "error",
    "exception_fields",
    "info",
    "is_enabled",
    "log",
    "log_exception",
    "log_query",
    "warn",
]

# Most severe first; a configured level lets through itself and everything above it.
LEVELS: Final = ("error", "warn", "info", "debug")
_RANK: Final = {name: rank for rank, name in enumerate(LEVELS)}

# Fields the logger writes itself; an event field of the same name is renamed, not lost.
_RESERVED: Final = frozenset({"timestamp", "level", "event", "request_id", "caller"})
_MAX_INNER: Final = 8


@attrs.frozen(kw_only=True)
class _Settings:
    rank: int
    log_queries: bool
    stream: TextIO | None
    writer: BackgroundWriter | None = None


_settings = _Settings(rank=_RANK["info"], log_queries=False, stream=None)
_write_lock = threading.Lock()
# The one writer thread of the process, started by the first `configure(background=True)`.
_background: BackgroundWriter | None = None
# How long the process's exit waits for queued lines: enough for a reader that reads, a
# small part of the exit reserve (LIM-O1) for one that does not.
_EXIT_FLUSH_S: Final = 0.2


def configure(
    level: str = "info",
    log_queries: bool = False,
    stream: TextIO | None = None,
    *,
    background: bool = False,
) -> None:
    """Set the level (LIM-P2) and the debug query switch (LIM-P3); `stream` None is stderr.

    With `background` (what `serve` uses), lines go through the writer thread of
    `_writer`: a reader that stops reading costs log lines, counted, never a call.
    Without it a line is written before `log` returns, which tests rely on.

    Turning the query switch on is announced at once with a warning, so that an operator
    who left it on sees it at every start (REQ-PRIV-004).
    """
    global _settings
    if level not in _RANK:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}")
    writer = _background_writer() if background else None
    _settings = _Settings(
        rank=_RANK[level], log_queries=bool(log_queries), stream=stream, writer=writer
    )
    if log_queries:
        log(
            "warn",
            "log_queries_enabled",
            effective=level == "debug",
            note="query text is written to the log at level debug; turn it off after diagnosis",
        )


def is_enabled(level: str) -> bool:
    return _rank(level) <= _settings.rank


def log(level: str, event: str, /, **fields: object) -> None:
    """Write one event if `level` passes the configured level; never raises for a value.
    A tool call's refusal, and the refused call's own line, go through `TOOL_REFUSALS`."""
    settings = _settings
    if _rank(level) > settings.rank:
        return
    if event in _AGGREGATED and TOOL_REFUSALS.absorbs(event, fields):
        return
    _emit(settings, level, event, fields, ())


def _write_aggregated(event: str, fields: Mapping[str, object], caller: str | None) -> None:
    own = () if caller is None else (("caller", caller),)
    settings = _settings
    if _rank("info") <= settings.rank:
        _emit(settings, "info", event, dict(fields), own)


def _now() -> float:
    """Trio's clock inside a run (a MockClock in the tests), the monotonic one outside."""
    try:
        return trio.current_time()
    except RuntimeError:
        return time.monotonic()


_AGGREGATED: Final = frozenset({"refused", "call"})
TOOL_REFUSALS: Final = ToolRefusals(_write_aggregated, _now)


def error(event: str, /, **fields: object) -> None:
    log("error", event, **fields)


def warn(event: str, /, **fields: object) -> None:
    log("warn", event, **fields)


def info(event: str, /, **fields: object) -> None:
    log("info", event, **fields)


def debug(event: str, /, **fields: object) -> None:
    log("debug", event, **fields)


def log_query(event: str, query: str, /, **fields: object) -> None:
    """A debug event with the query text, written only in the operator's debug mode."""
    settings = _settings
    if settings.rank < _RANK["debug"] or not settings.log_queries:
        return
    _emit(settings, "debug", event, fields, (("query", query),))


def log_exception(
    event: str, exc: BaseException, /, *, level: str = "error", **fields: object
) -> None:
    """One event naming the exception's type; its message and traceback are never written."""
    settings = _settings
    if _rank(level) > settings.rank:
        return
    _emit(settings, level, event, fields, tuple(exception_fields(exc).items()))


def exception_fields(exc: BaseException) -> dict[str, object]:
    """`exception` (the type) and, for a group, `inner` (its leaves' types, bounded)."""
    result: dict[str, object] = {"exception": _type_name(type(exc))}
    if isinstance(exc, BaseExceptionGroup):
        inner: list[str] = []
        _leaf_types(exc, inner)
        result["inner"] = inner
    return result


def _leaf_types(group: BaseExceptionGroup[BaseException], into: list[str]) -> None:
    for member in group.exceptions:
        if len(into) >= _MAX_INNER:
            return
        if isinstance(member, BaseExceptionGroup):
            _leaf_types(member, into)
        else:
            name = _type_name(type(member))
            if name not in into:
                into.append(name)


def _type_name(cls: type[BaseException]) -> str:
    module = getattr(cls, "__module__", "")
    name = getattr(cls, "__qualname__", cls.__name__)
    return name if module in ("builtins", "") else f"{module}.{name}"


def _rank(level: str) -> int:
    try:
        return _RANK[level]
    except KeyError:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}") from None


def _emit(
    settings: _Settings,
    level: str,
    event: str,
    fields: dict[str, object],
    own: tuple[tuple[str, object], ...],
) -> None:
    record: dict[str, object] = {"timestamp": _timestamp(), "level": level, "event": event}
    context = current_call()
    if context is not None:
        record["request_id"] = context.request_id
        record["caller"] = context.caller
    reserved = _RESERVED.union(name for name, _ in own) if own else _RESERVED
    for name, value in fields.items():
        record[f"field_{name}" if name in reserved else name] = value
    record.update(own)
    line = _encode(record) + "\n"
    if settings.writer is not None:
        settings.writer.put(line)
        return
    stream = settings.stream if settings.stream is not None else sys.stderr
    with _write_lock:
        try:
            stream.write(line)
            stream.flush()
        except (OSError, ValueError):
            # A closed or broken stderr cannot be reported anywhere; the call goes on.
            pass


def _background_writer() -> BackgroundWriter:
    global _background
    if _background is None:
        # Imported here: the counters module imports this one for its minute's event.
        from ._counters import COUNTERS

        _background = BackgroundWriter(_current_stream, _dropped_notice, COUNTERS.log_lines_dropped)
        atexit.register(_background.flush, _EXIT_FLUSH_S)
    return _background


def _current_stream() -> TextIO:
    settings = _settings
    return settings.stream if settings.stream is not None else sys.stderr


def _dropped_notice(count: int, total: int) -> str:
    """The line that follows lost lines, whatever the level: the log says it has a gap."""
    record: dict[str, object] = {
        "timestamp": _timestamp(),
        "level": "warn",
        "event": "log_lines_dropped",
        "count": count,
        "total": total,
    }
    return _encode(record) + "\n"


# The formatted second of the last line: most lines share theirs with the one before, and
# formatting a datetime is the dearest part of a line. A tuple, replaced whole (threads).
_last_second: tuple[int, str] = (-1, "")


def _timestamp() -> str:
    global _last_second
    now = time.time_ns()
    seconds, nanos = divmod(now, 1_000_000_000)
    cached, text = _last_second
    if cached != seconds:
        text = f"{datetime.fromtimestamp(seconds, UTC):%Y-%m-%dT%H:%M:%S}"
        _last_second = (seconds, text)
    return f"{text}.{nanos // 1_000_000:03d}Z"


def _encode(record: dict[str, object]) -> str:
    # Broad on purpose: a hostile or broken object (a mapping whose items() raises, a cycle,
    # a NaN, an int too long to print) must cost its field, not the line nor the call.
    try:
        return _flat(record) or _dumps(record)
    except Exception:
        pass
    safe: dict[str, object] = {}
    for name, value in record.items():
        try:
            _dumps(value)
        except Exception:
            value = f"<unserialisable {type(value).__name__}>"
        safe[name] = value
    return _dumps(safe)


def _dumps(value: object) -> str:
    return _ENCODER.encode(value)


def _flat(record: dict[str, object]) -> str | None:
    """The line of a record whose values are all strings, exact ints, finite floats, booleans
    or None (nearly every event), written as `_ENCODER` writes it but without building an
    encoder per line; None for anything else, which `_ENCODER` then writes."""
    parts = []
    for name, value in record.items():
        kind = type(value)
        if kind is str:
            text = _quote(value)  # type: ignore[arg-type]
        elif kind is int:
            text = int.__repr__(value)  # ValueError past the digit limit
        elif value is None:
            text = "null"
        elif value is True:
            text = "true"
        elif value is False:
            text = "false"
        elif kind is float and _FINITE_MIN <= value <= _FINITE_MAX:  # type: ignore[operator]
            text = float.__repr__(value)
        else:
            return None
        key = _KEYS.get(name)
        if key is None:
            key = _quote(name) + ": "
            if len(_KEYS) < _KEYS_MAX:  # names come from the code; bounded all the same
                _KEYS[name] = key
        parts.append(key + text)
    return "{" + ", ".join(parts) + "}"


# The C string escaper the encoder itself uses with ensure_ascii.
_quote: Final = json.encoder.encode_basestring_ascii
_FINITE_MIN: Final = -sys.float_info.max
_FINITE_MAX: Final = sys.float_info.max
_KEYS: dict[str, str] = {}
_KEYS_MAX: Final = 512


def _default(value: object) -> object:
    if isinstance(value, Secret):
        return REDACTED
    if isinstance(value, enum.Enum):
        inner = value.value
        if isinstance(inner, str | int | float | bool) or inner is None:
            return inner
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, BaseException):
        return {"exception": _type_name(type(value))}
    # Never str() or repr(): either can carry external text.
    return f"<{type(value).__name__}>"


# ASCII only, so that no encoding of stderr can fail on a line; no NaN, which is not JSON.
# One encoder for every line: `json.dumps` with options builds a new one per call.
_ENCODER: Final = json.JSONEncoder(default=_default, allow_nan=False, ensure_ascii=True)
