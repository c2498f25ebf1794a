"""Provider admission limiters and tool limits kept in the shared store.

Each has exactly the semantics of its in-process twin (`EngineLimiter`, `ToolRateLimiter`),
decided by one script on the server's clock, in integer microseconds:

- an engine's admission is GCRA: a theoretical arrival time (TAT) per engine, moved one
  interval later by each admitted call; a call may start once the TAT is at most
  (burst − 1) intervals ahead; a call whose turn would come after its deadline is refused
  and takes no turn; a call cancelled while it waits gives its turn back when no later call
  took one behind it. The interval is rounded up to the microsecond, never down, so no
  rounding lets a call in early.
- a caller's tool limit is a sliding window of 60 s: the admitted calls' times in a sorted
  set; a call is admitted while fewer than the limit are in the window.

Keys are `<key_prefix>engine:<id>:turns` and `<key_prefix>tool:<tool>:caller:<caller>`, and
expire by themselves once they hold nothing that matters (a TAT in the past, a window with
no call in it).

When the store cannot decide, the process decides alone with an in-process limiter whose
rate (and burst) or limit is divided by `[coordination] replicas`, so that N processes
without the store still stay within the deployment's limits; concurrency in flight is a
per-process cap either way.
"""

from __future__ import annotations

import contextlib
import math
import secrets
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

import trio

from rypsok.core import telemetry
from rypsok.core.coordination.store import Store, StoreUnavailable
from rypsok.core.engines.limiter import EngineLimiter
from rypsok.core.ratelimit import WINDOW_S, ToolRateLimiter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from rypsok.core.engines.base import AdmissionRecord

__all__ = [
    "ADMIT_SCRIPT",
    "GIVE_BACK_SCRIPT",
    "WINDOW_SCRIPT",
    "SharedEngineLimiter",
    "SharedToolLimiter",
]

_US: Final = 1_000_000

# KEYS[1]: the engine's TAT. ARGV: interval_us, tolerance_us, max_wait_us (-1: no deadline).
# Returns {wait_us, mine, previous}: wait_us = -1 when refused; mine and previous are the
# TAT it set and the one it replaced ("" for none), for a give-back.
ADMIT_SCRIPT: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local max_wait = tonumber(ARGV[3])
local stored = redis.call('GET', KEYS[1])
local turn = now
local base = now
if stored then
  local tat = tonumber(stored)
  if tat - tolerance > now then turn = tat - tolerance end
  if tat > now then base = tat end
end
local wait = turn - now
if max_wait >= 0 and wait > max_wait then
  return {'-1', '', ''}
end
local mine = base + interval
local keep_ms = math.ceil((mine - now) / 1000) + 1000
redis.call('SET', KEYS[1], string.format('%.0f', mine), 'PX', string.format('%.0f', keep_ms))
return {string.format('%.0f', wait), string.format('%.0f', mine), stored or ''}
"""

# KEYS[1]: the engine's TAT. ARGV: mine, previous. Puts `previous` back only when no later
# call moved the TAT since (the in-process limiter's rule); 1 when it did.
GIVE_BACK_SCRIPT: Final = """
local current = redis.call('GET', KEYS[1])
if current ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local keep_ms = math.max(1, math.ceil((tonumber(ARGV[2]) - now) / 1000) + 1000)
  redis.call('SET', KEYS[1], ARGV[2], 'PX', string.format('%.0f', keep_ms))
end
return 1
"""

# KEYS[1]: the caller's window. ARGV: limit, window_us, a unique member suffix.
# Returns {1, 0} when admitted, {0, wait_us} otherwise.
WINDOW_SCRIPT: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now - window))
local count = redis.call('ZCARD', KEYS[1])
if count >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {'0', string.format('%.0f', tonumber(oldest[2]) + window - now)}
end
local stamp = string.format('%.0f', now)
redis.call('ZADD', KEYS[1], stamp, stamp .. ':' .. ARGV[3])
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.ceil(window / 1000) + 1000))
return {'1', '0'}
"""


def _int(value: object) -> int:
    """A script's number, which coredis hands back as bytes; anything else is garbage."""
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit() and len(value) <= 20:
        return int(value)
    raise ValueError("not an integer")


def _text(value: object) -> str:
    if isinstance(value, bytes) and len(value) <= 32:
        return value.decode("ascii", "replace")
    if isinstance(value, str) and len(value) <= 32:
        return value
    raise ValueError("not a short text")


def _count_fallback() -> None:
    telemetry.COUNTERS.coordination_unavailable()


class SharedEngineLimiter:
    """An engine's admission in the store; its in-flight places stay in this process."""

    def __init__(
        self,
        engine_id: str,
        record: AdmissionRecord,
        store: Store,
        *,
        per_engine_in_flight: int,
    ) -> None:
        self._store = store
        self._key = store.key("engine", engine_id, "turns")
        # Rounded up: a shared turn is never shorter than the provider's interval.
        interval_us = math.ceil(record.interval_s * _US)
        self._interval_us = interval_us
        self._tolerance_us = interval_us * (record.burst - 1)
        # Without the store: this process's share of the rate, and the local places.
        self._local = EngineLimiter(
            record, per_engine_in_flight=per_engine_in_flight, share=store.replicas
        )

    @property
    def concurrency(self) -> int:
        return self._local.concurrency

    def next_turn(self, now: float) -> float:
        """This process's own estimate (the store is not asked for a status)."""
        return self._local.next_turn(now)

    async def admit(self, deadline: float) -> bool:
        now = trio.current_time()
        max_wait_us = -1 if math.isinf(deadline) else max(0, math.floor((deadline - now) * _US))
        try:
            answer = await self._store.run(
                ADMIT_SCRIPT,
                [self._key],
                [str(self._interval_us), str(self._tolerance_us), str(max_wait_us)],
            )
            try:
                wait_us, mine, previous = _int(answer[0]), answer[1], answer[2]
                mine_text = _text(mine) if wait_us >= 0 else ""
                previous_text = _text(previous) if wait_us >= 0 else ""
            except (ValueError, TypeError, IndexError, KeyError):
                raise self._store.bad_answer() from None
        except StoreUnavailable:
            _count_fallback()
            return await self._local.admit(deadline)
        if wait_us < 0:
            return False
        if wait_us > 0:
            try:
                await trio.sleep(wait_us / _US)
            except trio.Cancelled:
                with trio.CancelScope(shield=True):
                    await self._give_back(mine_text, previous_text)
                raise
        return True

    async def _give_back(self, mine: str, previous: str) -> None:
        # When the store cannot take it back, the turn stays taken: the deployment stays
        # within its rate, at the cost of one unused turn.
        with contextlib.suppress(StoreUnavailable):
            await self._store.run(GIVE_BACK_SCRIPT, [self._key], [mine, previous])

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self._local.slot():
            yield


class SharedToolLimiter:
    """A tool's per-caller limit (LIM-C6..C8) in the store, shared by every process."""

    def __init__(self, tool: str, per_minute: int, store: Store) -> None:
        self._tool = tool
        self._limit = per_minute
        self._store = store
        # This process's share when the store is away; at least one call a minute, so that
        # a tool is never closed by the store's absence (the deployment may then exceed a
        # limit below `replicas` by the difference; the configuration page says so).
        self._local = ToolRateLimiter(max(1, per_minute // store.replicas))

    @property
    def per_minute(self) -> int:
        return self._limit

    async def admit(self, caller: str, now: float) -> int | None:
        """None admits the call; otherwise the milliseconds until one would be."""
        key = self._store.key("tool", self._tool, "caller", caller)
        try:
            answer = await self._store.run(
                WINDOW_SCRIPT,
                [key],
                [str(self._limit), str(WINDOW_S * _US), secrets.token_hex(8)],
            )
            try:
                admitted, wait_us = _int(answer[0]), _int(answer[1])
                if admitted not in (0, 1) or wait_us < 0:
                    raise ValueError("out of range")
            except (ValueError, TypeError, IndexError, KeyError):
                raise self._store.bad_answer() from None
        except StoreUnavailable:
            _count_fallback()
            return self._local.check(caller, now)
        if admitted:
            return None
        return max(1, -(-wait_us // 1000))
