"""Provider admission limiters and tool limits kept in the shared store.

Each has exactly the semantics of its in-process twin (`EngineLimiter`, `ToolRateLimiter`),
decided by one script on the server's clock, in integer microseconds (`scripts`):

- an engine's admission is GCRA: a theoretical arrival time (TAT) per engine, moved one
  interval later by each admitted call; a call may start once the TAT is at most
  (burst − 1) intervals ahead; a call whose turn would come after its deadline is refused
  and takes no turn; a call cancelled while it waits gives its turn back when no later call
  took one behind it. The interval is rounded up to the microsecond, never down, so no
  rounding lets a call in early.
- a caller's tool limit is a sliding window of 60 s: the admitted calls' times in a sorted
  set; a call is admitted while fewer than the limit are in the window.

A web_search call asks the store once for its tool limit and all its engines together
(`gate`); these classes hold what each decision needs and read each answer.

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
from typing import TYPE_CHECKING, Final

import trio

from rypsok.core import telemetry
from rypsok.core.coordination.scripts import ADMIT_SCRIPT, GIVE_BACK_SCRIPT, WINDOW_SCRIPT
from rypsok.core.coordination.store import Store, StoreUnavailable
from rypsok.core.engines.limiter import EngineLimiter
from rypsok.core.ratelimit import WINDOW_S, ToolRateLimiter

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractAsyncContextManager

    from rypsok.core.engines.base import AdmissionRecord

__all__ = ["SharedEngineLimiter", "SharedToolLimiter", "count_fallback", "max_wait_us"]

_US: Final = 1_000_000


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


def count_fallback() -> None:
    """One limiter decision made without the store (the minute's `counters` event)."""
    telemetry.COUNTERS.coordination_unavailable()


def max_wait_us(deadline: float, now: float) -> int:
    """How long a call may wait for its turn, as the scripts take it (-1: no deadline)."""
    return -1 if math.isinf(deadline) else max(0, math.floor((deadline - now) * _US))


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
        self.key: Final = store.key("engine", engine_id, "turns")
        # Rounded up: a shared turn is never shorter than the provider's interval.
        interval_us = math.ceil(record.interval_s * _US)
        self._interval = str(interval_us)
        self._tolerance = str(interval_us * (record.burst - 1))
        # Without the store: this process's share of the rate, and the local places.
        self.local: Final = EngineLimiter(
            record, per_engine_in_flight=per_engine_in_flight, share=store.replicas
        )
        self._refused_until = -math.inf  # the turn the store named when it last refused

    @property
    def concurrency(self) -> int:
        return self.local.concurrency

    def next_turn(self, now: float) -> float:
        """The turn the store named at its last refusal, or this process's own estimate,
        whichever is later (the store is not asked for a status)."""
        return max(self.local.next_turn(now), self._refused_until)

    def script_args(self, max_wait: int) -> list[str]:
        """The arguments of one admission (ADMIT_SCRIPT's, and each engine's in a search's)."""
        return [self._interval, self._tolerance, str(max_wait)]

    def read_answer(self, answer: Sequence[object]) -> tuple[int, str, str]:
        """(wait_us, mine, previous) from one admission's answer; wait_us -1: refused.

        Raises the store's bad answer when it has another shape."""
        try:
            wait_us = _int(answer[0])
            if wait_us < 0:
                turn_us = _int(answer[1])
                if wait_us != -1 or turn_us < 0:
                    raise ValueError("out of range")
                self._refused_until = trio.current_time() + turn_us / _US
                return -1, "", ""
            return wait_us, _text(answer[1]), _text(answer[2])
        except (ValueError, TypeError, IndexError, KeyError):
            raise self._store.bad_answer() from None

    async def admit(self, deadline: float) -> bool:
        max_wait = max_wait_us(deadline, trio.current_time())
        try:
            answer = await self._store.run(ADMIT_SCRIPT, [self.key], self.script_args(max_wait))
            wait_us, mine, previous = self.read_answer(answer)
        except StoreUnavailable:
            count_fallback()
            return await self.local.admit(deadline)
        return await self.take_turn(wait_us, mine, previous)

    async def take_turn(self, wait_us: int, mine: str, previous: str) -> bool:
        """Wait out a turn the store gave; False for a refusal. A call cancelled while it
        waits gives the turn back."""
        if wait_us < 0:
            return False
        if wait_us > 0:
            try:
                await trio.sleep(wait_us / _US)
            except trio.Cancelled:
                with trio.CancelScope(shield=True):
                    await self._give_back(mine, previous)
                raise
        return True

    async def _give_back(self, mine: str, previous: str) -> None:
        # When the store cannot take it back, the turn stays taken: the deployment stays
        # within its rate, at the cost of one unused turn.
        with contextlib.suppress(StoreUnavailable):
            await self._store.run(GIVE_BACK_SCRIPT, [self.key], [mine, previous])

    def slot(self) -> AbstractAsyncContextManager[None]:
        """This process's in-flight places (the local limiter's own context manager)."""
        return self.local.slot()


class SharedToolLimiter:
    """A tool's per-caller limit (LIM-C6..C8) in the store, shared by every process."""

    def __init__(self, tool: str, per_minute: int, store: Store) -> None:
        self.tool: Final = tool
        self._limit = per_minute
        self.store: Final = store
        # This process's share when the store is away; at least one call a minute, so that
        # a tool is never closed by the store's absence (the deployment may then exceed a
        # limit below `replicas` by the difference; the configuration page says so).
        self.local: Final = ToolRateLimiter(max(1, per_minute // store.replicas))

    @property
    def per_minute(self) -> int:
        return self._limit

    def key(self, caller: str) -> str:
        return self.store.key("tool", self.tool, "caller", caller)

    def script_args(self) -> list[str]:
        """The arguments of one decision (WINDOW_SCRIPT's, and the start of a search's)."""
        return [str(self._limit), str(WINDOW_S * _US), secrets.token_hex(8)]

    def read_answer(self, answer: Sequence[object]) -> int | None:
        """None for an admitted call, else the milliseconds until one would be.

        Raises the store's bad answer when it has another shape."""
        try:
            admitted, wait_us = _int(answer[0]), _int(answer[1])
            if admitted not in (0, 1) or wait_us < 0:
                raise ValueError("out of range")
        except (ValueError, TypeError, IndexError, KeyError):
            raise self.store.bad_answer() from None
        if admitted:
            return None
        return max(1, -(-wait_us // 1000))

    def decide_alone(self, caller: str, now: float) -> int | None:
        """The decision without the store: this process's share of the limit."""
        count_fallback()
        return self.local.check(caller, now)

    async def admit(self, caller: str, now: float) -> int | None:
        """None admits the call; otherwise the milliseconds until one would be."""
        try:
            answer = await self.store.run(WINDOW_SCRIPT, [self.key(caller)], self.script_args())
            return self.read_answer(answer)
        except StoreUnavailable:
            return self.decide_alone(caller, now)
