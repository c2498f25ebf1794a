"""Provider admission limiters and tool limits kept in the shared store.

Each has exactly the semantics of its in-process twin (`EngineLimiter`, `ToolRateLimiter`),
decided by one script on the server's clock, in integer microseconds (`scripts`):

- an engine's admission is GCRA: a theoretical arrival time (TAT) per engine, moved one
  interval later by each admitted call; a call may start once the TAT is at most
  (burst − 1) intervals ahead; a call whose turn would come after its deadline is refused
  and takes no turn. The deadline is judged with the round trip: a call asks for a turn
  that starts before its deadline once the answer is back (`max_wait_us`), and a turn that
  would still start after it (the round trip took longer than the last ones) is given back
  at once. A turn given back (that one, or a call's cancelled while it waits) goes to the
  next call: the TAT is put back when no later call took a turn behind it, and otherwise the
  turn is kept for the next call at its time (`scripts`). The interval is rounded up to the
  microsecond, never down, so no rounding lets a call in early.
- a caller's tool limit is a sliding window of 60 s: the admitted calls' times in a sorted
  set; a call is admitted while fewer than the limit are in the window.

A web_search call asks the store once for its tool limit and all its engines together
(`gate`); these classes hold what each decision needs and read each answer.

Keys are `<key_prefix>engine:<id>:turns`, `<key_prefix>engine:<id>:returned` and
`<key_prefix>tool:<tool>:caller:<caller>`, and expire by themselves once they hold nothing
that matters (a TAT in the past, returned turns in the past, a window with no call in it).

When the store cannot decide, the process decides alone with an in-process limiter whose
rate (and burst) or limit is divided by `[coordination] replicas`, so that N processes
without the store still stay within the deployment's limits; concurrency in flight is a
per-process cap either way. The engine's share never starts from a bucket that refilled
while the store decided: every answer of the store carries how far the shared schedule runs
ahead, and the share follows it (`EngineLimiter.follow`), so that a process left alone has
at most its part of what the shared bucket held. Going back, the first admission of a
process that decided alone (or whose connection is new: the store may have restarted
empty) sends its share's schedule as a floor the shared TAT is raised to, so that what was
admitted alone is spent in the shared bucket too, and coming back grants no burst.
"""

from __future__ import annotations

import contextlib
import math
import secrets
from typing import TYPE_CHECKING, Final

import attrs
import trio

from rypsok.core import telemetry
from rypsok.core.coordination.scripts import ADMIT_SCRIPT, GIVE_BACK_SCRIPT, WINDOW_SCRIPT
from rypsok.core.coordination.store import Store, StoreUnavailable
from rypsok.core.pacing import EngineLimiter
from rypsok.core.ratelimit import WINDOW_S, ToolRateLimiter

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractAsyncContextManager

    from rypsok.core.pacing import PaceRecord

__all__ = [
    "SharedEngineLimiter",
    "SharedToolLimiter",
    "StoreTurn",
    "count_fallback",
    "max_wait_us",
]

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


def max_wait_us(deadline: float, now: float, round_trip_s: float) -> int:
    """How long a call may wait for its turn, as the scripts take it (-1: no deadline): the
    time to its deadline less the round trip that asking costs, since the call starts its
    wait only once the answer is back."""
    if math.isinf(deadline):
        return -1
    return max(0, math.floor((deadline - now - round_trip_s) * _US))


@attrs.frozen
class StoreTurn:
    """A turn the store gave, as its answer named it; `wait_s` None: refused."""

    wait_s: float | None
    mine: str = ""  # the TAT the turn set ("" for a returned turn it took)
    previous: str = ""  # the TAT it replaced
    at: str = ""  # the turn's time on the store's clock, in microseconds


class SharedEngineLimiter:
    """An engine's admission in the store; its in-flight places stay in this process."""

    def __init__(
        self,
        engine_id: str,
        record: PaceRecord,
        store: Store,
        *,
        per_engine_in_flight: int,
    ) -> None:
        self._store = store
        self.key: Final = store.key("engine", engine_id, "turns")
        self.keys: Final = (self.key, store.key("engine", engine_id, "returned"))
        # Rounded up: a shared turn is never shorter than the provider's interval.
        interval_us = math.ceil(record.interval_s * _US)
        self._interval = str(interval_us)
        self._tolerance = str(interval_us * (record.burst - 1))
        # Without the store: this process's share of the rate, and the local places.
        self.local: Final = EngineLimiter(
            record, per_engine_in_flight=per_engine_in_flight, share=store.replicas
        )
        self._refused_until = -math.inf  # the turn the store named when it last refused
        # Whether the store may not hold what this process admitted: it decided alone since
        # its last answer, or that answer came over an earlier connection (`script_args`).
        self._alone = False
        self._epoch = -1

    @property
    def concurrency(self) -> int:
        return self.local.concurrency

    def next_turn(self, now: float) -> float:
        """The turn the store named at its last refusal, or this process's own estimate,
        whichever is later (the store is not asked for a status)."""
        return max(self.local.next_turn(now), self._refused_until)

    def max_wait(self, deadline: float, now: float) -> int:
        """The longest wait to ask for: `max_wait_us` with the store's round trip."""
        return max_wait_us(deadline, now, self._store.round_trip_s)

    def script_args(self, max_wait: int) -> list[str]:
        """The arguments of one admission (ADMIT_SCRIPT's, and each engine's in a search's):
        with this process's share's schedule as the floor when the store may not hold it."""
        floor = -1
        if self._alone or self._epoch != self._store.epoch:
            ahead = self.local.ahead(trio.current_time())
            floor = math.ceil(ahead * _US)
        return [self._interval, self._tolerance, str(max_wait), str(floor)]

    def read_answer(self, answer: Sequence[object]) -> StoreTurn:
        """The turn one admission's answer names (`StoreTurn`); the share follows the
        shared schedule it shows.

        Raises the store's bad answer when it has another shape."""
        refused_us = None
        try:
            wait_us = _int(answer[0])
            ahead_us = _int(answer[4])
            if ahead_us < 0:
                raise ValueError("out of range")
            if wait_us < 0:
                refused_us = _int(answer[1])
                if wait_us != -1 or refused_us < 0:
                    raise ValueError("out of range")
                turn = StoreTurn(None)
            else:
                turn = StoreTurn(
                    wait_us / _US, _text(answer[1]), _text(answer[2]), _text(answer[3])
                )
        except (ValueError, TypeError, IndexError, KeyError):
            raise self._store.bad_answer() from None
        now = trio.current_time()
        if refused_us is not None:
            self._refused_until = now + refused_us / _US
        # Read now, the answer is at least this far behind the store's clock: the share
        # follows a schedule that ends no earlier than the shared one.
        self.local.follow(now + ahead_us / _US)
        self._alone = False
        self._epoch = self._store.epoch
        return turn

    async def admit(self, deadline: float) -> bool:
        max_wait = self.max_wait(deadline, trio.current_time())
        try:
            answer = await self._store.run(ADMIT_SCRIPT, self.keys, self.script_args(max_wait))
            turn = self.read_answer(answer)
        except StoreUnavailable:
            return await self.admit_alone(deadline)
        return await self.take_turn(turn, trio.current_time(), deadline)

    async def admit_alone(self, deadline: float) -> bool:
        """The decision without the store: this process's share of the rate and burst."""
        count_fallback()
        self._alone = True
        return await self.local.admit(deadline)

    async def take_turn(self, turn: StoreTurn, received: float, deadline: float) -> bool:
        """Wait out a turn the store gave, whose answer came back at `received`; False for a
        refusal, and for a turn that would start after `deadline`, which is given back at
        once (in the Store's own task) for the next call. A call cancelled while it waits
        gives the turn back before it ends."""
        if turn.wait_s is None:
            return False
        start = received + turn.wait_s
        if start > deadline:
            self._store.soon(GIVE_BACK_SCRIPT, self.keys, self._give_back_args(turn))
            return False
        if turn.wait_s > 0:
            try:
                await trio.sleep_until(start)
            except trio.Cancelled:
                with trio.CancelScope(shield=True):
                    await self._give_back(turn)
                raise
        return True

    def _give_back_args(self, turn: StoreTurn) -> list[str]:
        return [turn.mine, turn.previous, turn.at, secrets.token_hex(8)]

    async def _give_back(self, turn: StoreTurn) -> None:
        # When the store cannot take it back, the turn stays taken: the deployment stays
        # within its rate, at the cost of one unused turn.
        with contextlib.suppress(StoreUnavailable):
            await self._store.run(GIVE_BACK_SCRIPT, self.keys, self._give_back_args(turn))

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
