"""A provider's pace: its rate with a burst (LIM-C9) and its concurrency (LIM-C2), in-process.

The rate is a token bucket written as its equivalent virtual schedule (GCRA): each admitted
call moves the engine's "theoretical arrival time" (TAT) one interval (60 / rate_per_minute s)
later, and a call may start once that time is at most (burst − 1) intervals ahead of now.
All of it is exact, so no rounding lets a call in early: every time is kept as an integer
count of one unit, 1 / (the interval's denominator × 2**1074) s, in which every float of
the clock and every multiple of the interval is a whole number.
A call whose turn would come after its deadline is refused at once and takes no turn: it is
not made, and the pipeline reports the engine skipped with reason rate_limited.

The engines' registry keeps one per engine; the shared store's limiters (coordination) keep
one as the process's share while the store cannot decide. Both import it from here, below
them, so that neither imports the other.

Implements REQ-CMP-002 and REQ-AGG-005.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final, Protocol

import attrs
import trio

if TYPE_CHECKING:
    from fractions import Fraction

__all__ = ["EngineLimiter", "LimiterStatistics", "PaceRecord"]


class PaceRecord(Protocol):
    """What a limiter reads of an engine's admission record (`engines.base.AdmissionRecord`)."""

    @property
    def rate_per_minute(self) -> int: ...

    @property
    def burst(self) -> int: ...

    @property
    def concurrency(self) -> int: ...

    @property
    def interval_s(self) -> Fraction: ...


@attrs.frozen(kw_only=True)
class LimiterStatistics:
    rate_per_minute: int
    burst: int
    concurrency: int
    in_flight: int
    admitted: int
    refused: int


# Every finite float is a whole multiple of 2**-1074 s (the smallest subnormal).
_FLOAT_BITS: Final = 1074


class _Units:
    """Exact times as integers: `count(t)` is the float `t` in units of 1 / `per_second` s,
    where `per_second` = `denominator` × 2**1074, so that both any float and any multiple
    of 1 / `denominator` s are whole numbers of units."""

    def __init__(self, denominator: int) -> None:
        self._denominator = denominator
        self.per_second: Final = denominator << _FLOAT_BITS

    def count(self, t: float) -> int:
        numerator, power_of_two = t.as_integer_ratio()
        # power_of_two is 2**k with k ≤ 1074: the float is numerator / 2**k seconds.
        return (numerator * self._denominator) << (_FLOAT_BITS + 1 - power_of_two.bit_length())

    def of(self, seconds: Fraction) -> int:
        """A duration whose denominator divides `denominator`, in units."""
        return seconds.numerator * (self.per_second // seconds.denominator)

    def not_before(self, units: int) -> float:
        """The earliest float at or after the exact time `units` (never wake before it)."""
        f = units / self.per_second  # correctly rounded: the nearest float
        return f if self.count(f) >= units else math.nextafter(f, math.inf)


class EngineLimiter:
    """Rate and concurrency of one engine, shared by every call of the process."""

    def __init__(self, record: PaceRecord, *, per_engine_in_flight: int, share: int = 1) -> None:
        """`share` > 1 keeps this process to 1/share of the record's rate and burst: the
        fallback of a process that shares the provider with others ([coordination])."""
        if record.rate_per_minute < 1 or record.burst < 1 or share < 1:
            raise ValueError("an engine's rate, burst and share are at least 1")
        self._rate = record.rate_per_minute
        self._burst = max(1, record.burst // share)
        interval: Fraction = record.interval_s * share
        self._units = _Units(interval.denominator)
        self._interval = self._units.of(interval)
        self._tolerance = self._interval * (self._burst - 1)
        self._tat: int | None = None  # in units; None: the bucket is full
        self._concurrency = max(1, min(record.concurrency, per_engine_in_flight))  # LIM-C2
        self._slots = trio.Semaphore(self._concurrency)
        self._admitted = 0
        self._refused = 0

    @property
    def concurrency(self) -> int:
        return self._concurrency

    def next_turn(self, now: float) -> float:
        """When a call asked now would be admitted (now itself when a turn is free)."""
        return self._units.not_before(self._turn(self._units.count(now)))

    def _turn(self, now: int) -> int:
        if self._tat is None:
            return now
        return max(now, self._tat - self._tolerance)

    def follow(self, tat: float) -> None:
        """Take the schedule up to `tat` as spent: a turn decided here later starts no earlier
        than one after a schedule that ends at `tat`. The shared store's answers set it, so
        that a process left to decide alone starts from the shared bucket as the store last
        showed it, never from a bucket that refilled meanwhile (coordination)."""
        units = self._units.count(tat)
        if self._tat is None or units > self._tat:
            self._tat = units

    def ahead(self, now: float) -> float:
        """How far the schedule runs past `now`, in seconds (0: the bucket is full)."""
        if self._tat is None:
            return 0.0
        return max(0.0, self._units.not_before(self._tat) - now)

    async def admit(self, deadline: float) -> bool:
        """Wait for the engine's turn; False at once when the turn would come after `deadline`.

        A refused call takes no turn. A call cancelled while it waits gives its turn back
        when no later call has taken one behind it, so cancellation never costs capacity
        that a later call could have used, and never lets two calls share one turn.
        """
        now = self._units.count(trio.current_time())
        turn = self._turn(now)
        if not math.isinf(deadline) and turn > self._units.count(deadline):
            self._refused += 1
            return False
        previous = self._tat
        mine = max(now, previous if previous is not None else now) + self._interval
        self._tat = mine
        self._admitted += 1
        if turn > now:
            try:
                await trio.sleep_until(self._units.not_before(turn))
            except trio.Cancelled:
                if self._tat == mine:
                    self._tat = previous
                    self._admitted -= 1
                raise
        return True

    def slot(self) -> trio.Semaphore:
        """Hold one of the engine's in-flight places (LIM-C2) for the length of a request:
        `async with limiter.slot()`. The semaphore itself, whose `async with` takes a place
        (a checkpoint) and gives it back, with no context manager of its own around it: a
        request pays for no async generator."""
        return self._slots

    def statistics(self) -> LimiterStatistics:
        return LimiterStatistics(
            rate_per_minute=self._rate,
            burst=self._burst,
            concurrency=self._concurrency,
            in_flight=self._concurrency - self._slots.value,
            admitted=self._admitted,
            refused=self._refused,
        )
