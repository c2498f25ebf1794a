"""Lines written in aggregate: what a flood repeats costs the log a line per interval.

The first line of a key is written at once; those after it within the key's interval are
counted, and written as one line with their `count` when the interval ends (`flush`, which
the owner calls from a timer, and at shutdown with `final`). The counters keep the totals;
this only bounds the lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Mapping

__all__ = ["AggregatedLines"]


class AggregatedLines:
    """The lines of one event, aggregated per key (each key with the fields of its line);
    `write` writes one line's fields (`count` among them)."""

    def __init__(self, interval_s: float, write: Callable[[Mapping[str, object]], None]) -> None:
        self.interval_s = interval_s
        self._write = write
        self._logged_at: dict[Hashable, float] = {}
        self._pending: dict[Hashable, int] = {}
        self._fields: dict[Hashable, Mapping[str, object]] = {}

    def note(self, key: Hashable, now: float, fields: Mapping[str, object]) -> None:
        """One more occurrence of `key` (whose line carries `fields`) at `now`."""
        last = self._logged_at.get(key)
        if last is None or now - last >= self.interval_s:
            self._logged_at[key] = now
            count = self._pending.pop(key, 0) + 1
            self._fields.pop(key, None)
            self._write({**fields, "count": count})
        else:
            self._pending[key] = self._pending.get(key, 0) + 1
            self._fields[key] = fields

    def flush(self, now: float, *, final: bool = False) -> None:
        """The line of each key whose interval has ended with occurrences not yet written
        (`final`: every such key, at the shutdown)."""
        for key, count in list(self._pending.items()):
            if final or now - self._logged_at[key] >= self.interval_s:
                del self._pending[key]
                self._logged_at[key] = now
                self._write({**self._fields.pop(key), "count": count})
