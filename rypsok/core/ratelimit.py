"""Tool invocation limits (REQ-MCP-010, LIM-C6..C8), kept per caller (REQ-SEC-019).

A sliding window: a call is admitted when fewer than `per_minute` calls of the same caller
were admitted in the 60 seconds before it, so no 60-second window ever holds more than
`per_minute` admitted calls. (A token bucket of the same capacity would let almost twice
the limit through in one minute: a full bucket, then its refill.) Refused calls consume
nothing. Times are kept as integer nanoseconds so that every answer is exact.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Final

import attrs

__all__ = ["WINDOW_S", "RateLimiterStatistics", "ToolRateLimiter"]

WINDOW_S: Final = 60
_WINDOW_NS: Final = WINDOW_S * 1_000_000_000
_NS_PER_MS: Final = 1_000_000


def _exact_ns(seconds: float) -> int:
    """The float's own binary value in nanoseconds, rounded once to the nearest (a tie to the
    even one): what `round(Fraction(seconds) * 10**9)` gives, in integers alone."""
    numerator, denominator = seconds.as_integer_ratio()
    quotient, remainder = divmod(numerator * 1_000_000_000, denominator)
    twice = 2 * remainder
    if twice > denominator or (twice == denominator and quotient & 1):
        quotient += 1
    return quotient


@attrs.frozen(kw_only=True)
class RateLimiterStatistics:
    per_minute: int
    callers: int  # callers whose window held an admitted call at the last check


class ToolRateLimiter:
    """One tool's limit; one instance per tool, shared by every transport of the process.

    A caller's state is dropped at the first check after its last admitted call left the
    window, so memory is bounded by the callers active within the last minute.
    """

    def __init__(self, per_minute: int) -> None:
        if isinstance(per_minute, bool) or not isinstance(per_minute, int) or per_minute < 1:
            raise ValueError("per_minute must be a positive integer")
        self._limit = per_minute
        # Admission times per caller, oldest first; the callers in order of their latest
        # admission, so the ones whose window is empty are always at the front.
        self._calls: OrderedDict[str, deque[int]] = OrderedDict()
        self._latest_ns: int | None = None

    @property
    def per_minute(self) -> int:
        return self._limit

    def check(self, caller: str, now: float) -> int | None:
        """None admits the call (and counts it); otherwise the milliseconds until one would be.

        `now` is the Trio clock, in seconds. The answer is at least 1 and waiting exactly that
        long is enough for the next check to admit.
        """
        now_ns = self._to_ns(now)
        self._expire(now_ns)
        calls = self._calls.get(caller)
        if calls is not None:
            self._drop_expired(calls, now_ns)
        if calls is not None and len(calls) >= self._limit:
            # Admitted again once the oldest call in the window has left it.
            wait_ns = calls[0] + _WINDOW_NS - now_ns
            return max(1, -(-wait_ns // _NS_PER_MS))
        if calls is None:
            calls = deque()
            self._calls[caller] = calls
        else:
            self._calls.move_to_end(caller)
        calls.append(now_ns)
        return None

    async def admit(self, caller: str, now: float) -> int | None:
        """`check`, awaitable: the interface the shared limiter of [coordination] also has."""
        return self.check(caller, now)

    def statistics(self) -> RateLimiterStatistics:
        return RateLimiterStatistics(per_minute=self._limit, callers=len(self._calls))

    def _to_ns(self, now: float) -> int:
        now_ns = _exact_ns(now)
        # The Trio clock never goes back; a caller handing an older time is held to the
        # latest one seen so that each caller's times stay in order.
        if self._latest_ns is not None and now_ns < self._latest_ns:
            return self._latest_ns
        self._latest_ns = now_ns
        return now_ns

    def _drop_expired(self, calls: deque[int], now_ns: int) -> None:
        while calls and calls[0] + _WINDOW_NS <= now_ns:
            calls.popleft()

    def _expire(self, now_ns: int) -> None:
        """Forget callers whose every call has left the window (the front of the order)."""
        while self._calls:
            caller, calls = next(iter(self._calls.items()))
            if calls[-1] + _WINDOW_NS > now_ns:
                return
            del self._calls[caller]
