"""Tool refusals written in aggregate: a caller past its rate limit costs the log one line per
caller, tool and reason per interval, whatever its rate (REQ-OBS-007 keeps the totals in
`counters`).

A refusal of a call is written as a `refused` line with its `reason` (the facade's and the
dispatcher's). The first of a caller, tool and reason is written at once; those after it
within `TOOL_REFUSAL_LOG_INTERVAL_S` are counted and written as one line with their `count`
when the interval ends. The refused call's own `call` line (its error and the same reason)
is folded into that count: a call that is served keeps its own line. A `refused` line
without a `reason` (a step of a served call refused, such as a fetch's redirect) is written
as before.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Final

from ._aggregate import AggregatedLines
from ._context import current_call

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["TOOL_REFUSAL_LOG_INTERVAL_S", "ToolRefusals"]

TOOL_REFUSAL_LOG_INTERVAL_S: Final = 10.0
# Calls whose refusal was noted and whose `call` line is still to come (bounded: a call that
# ends without one leaves its entry only until this many newer ones push it out).
_FOLDED_CALLS: Final = 1024


class ToolRefusals:
    """The aggregation of the `refused` lines of tool calls, and the folding of their
    `call` lines; `write` writes one line (event, fields, and the caller it is about)."""

    def __init__(
        self,
        write: Callable[[str, Mapping[str, object], str | None], None],
        clock: Callable[[], float],
    ) -> None:
        self._clock = clock
        self._lines = AggregatedLines(TOOL_REFUSAL_LOG_INTERVAL_S, self._write_refused)
        self._write = write
        self._folded: OrderedDict[str, tuple[object, object]] = OrderedDict()

    def _write_refused(self, fields: Mapping[str, object]) -> None:
        line = dict(fields)
        caller = line.pop("caller", None)
        self._write("refused", line, caller if isinstance(caller, str) else None)

    def absorbs(self, event: str, fields: Mapping[str, object]) -> bool:
        """Whether the line `event` with `fields` is this aggregation's to write (or to
        fold); False for every other line, which is written as usual."""
        if event == "refused":
            if "reason" not in fields:
                return False
            context = current_call()
            caller = None if context is None else context.caller
            tool, reason = fields.get("tool"), fields["reason"]
            if context is not None:
                self._folded[context.request_id] = (tool, reason)
                if len(self._folded) > _FOLDED_CALLS:
                    self._folded.popitem(last=False)
            line = {**fields, "caller": caller} if caller is not None else dict(fields)
            self._lines.note((caller, tool, reason), self._clock(), line)
            return True
        if event == "call" and "reason" in fields and self._folded:
            context = current_call()
            if context is None:
                return False
            refused = self._folded.pop(context.request_id, None)
            return refused == (fields.get("tool"), fields["reason"])
        return False

    def reset(self) -> None:
        """Forget every key and every count not yet written (a new run of the event loop:
        its clock is not the last one's)."""
        self._lines = AggregatedLines(TOOL_REFUSAL_LOG_INTERVAL_S, self._write_refused)
        self._folded.clear()

    def flush(self, *, final: bool = False) -> None:
        """Write the lines whose interval has ended (`final`: all, at the shutdown)."""
        self._lines.flush(self._clock(), final=final)
