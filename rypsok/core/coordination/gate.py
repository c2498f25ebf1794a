"""A web_search call's admissions in the store, decided together in one round trip.

Without a store, a search takes its caller's tool limit first and each engine's turn in the
engine's own task. With one, each of those decisions would be a round trip of its own; the
gate makes them one script (`SEARCH_SCRIPT`) at the moment the fan-out knows which engines
it asks (those the cache did not answer). The outcome is the one the separate decisions
give: the caller's limit is decided first, and a call it refuses takes no engine's turn;
an engine refused for its deadline is skipped (rate_limited), and the engines answered from
the cache take no turn but the call still counts against the caller's limit.

A call that ends before the fan-out has its answer from the gate (a parameter refused, a
secret denied, no engine to ask, the deadline reached during the round trip) has its tool
limit decided in a round trip of its own (`decide_limit_only`), and a refusal there wins
over the call's other error, as when the limit was checked first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from rypsok.core import errors
from rypsok.core.coordination.limits import SharedEngineLimiter, SharedToolLimiter, StoreTurn
from rypsok.core.coordination.scripts import SEARCH_SCRIPT
from rypsok.core.coordination.store import StoreUnavailable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rypsok.core.model import ToolError
    from rypsok.core.search.ports import LimiterPort

__all__ = ["SearchGate"]


class _StoreTurn:
    """A turn the store gave (or refused), whose answer came back at `received`: waited out
    in the engine's own task, or given back when it would start after the deadline."""

    __slots__ = ("_deadline", "_limiter", "_received", "_turn")

    def __init__(
        self, limiter: SharedEngineLimiter, turn: StoreTurn, received: float, deadline: float
    ) -> None:
        self._limiter = limiter
        self._turn = turn
        self._received = received
        self._deadline = deadline

    async def take(self) -> bool:
        return await self._limiter.take_turn(self._turn, self._received, self._deadline)


class _LimiterTurn:
    """A turn decided when it is taken: this process's share while the store is away, or
    a limiter that is not in the store at all."""

    __slots__ = ("_deadline", "_limiter")

    def __init__(self, limiter: LimiterPort, deadline: float) -> None:
        self._limiter = limiter
        self._deadline = deadline

    async def take(self) -> bool:
        limiter = self._limiter
        if isinstance(limiter, SharedEngineLimiter):
            return await limiter.admit_alone(self._deadline)
        return await limiter.admit(self._deadline)


class SearchGate:
    """One web_search call of one caller; decides its tool limit exactly once."""

    def __init__(self, tool: SharedToolLimiter, caller: str) -> None:
        self._tool = tool
        self._caller = caller
        self._decided = False

    async def admit(
        self, limiters: Sequence[LimiterPort], deadline: float
    ) -> list[_StoreTurn | _LimiterTurn]:
        """The caller's tool limit and a turn for each of `limiters`, in their order;
        raises the rate_limited ToolError when the caller's limit refuses the call.

        The limit counts as decided once the store answered or the fallback decided; a round
        trip cut short (the deadline, the caller's cancellation) leaves it to
        `decide_limit_only`, which may count a call the store had counted already: a call
        counted twice, never one not counted."""
        tool = self._tool
        now = trio.current_time()
        shared = [limiter for limiter in limiters if isinstance(limiter, SharedEngineLimiter)]
        keys = [tool.key(self._caller)]
        args = tool.script_args()
        for limiter in shared:
            keys += limiter.keys
            args += limiter.script_args(limiter.max_wait(deadline, now))
        given: dict[int, _StoreTurn] = {}
        try:
            answer = await tool.store.run(SEARCH_SCRIPT, keys, args)
            refused_ms = tool.read_answer(answer)
            if refused_ms is None:
                if not isinstance(answer, list) or len(answer) != 2 + 5 * len(shared):
                    raise tool.store.bad_answer()
                received = trio.current_time()
                for i, limiter in enumerate(shared):
                    turn = limiter.read_answer(answer[2 + 5 * i : 7 + 5 * i])
                    given[id(limiter)] = _StoreTurn(limiter, turn, received, deadline)
        except StoreUnavailable:
            given.clear()
            refused_ms = tool.decide_alone(self._caller, now)
        self._decided = True
        if refused_ms is not None:
            raise errors.rate_limited(tool.tool, refused_ms)
        return [given.get(id(limiter)) or _LimiterTurn(limiter, deadline) for limiter in limiters]

    async def decide_limit_only(self) -> ToolError | None:
        """The caller's tool limit alone (the store asked for it only, with no engine's turn)
        for a call that ended without `admit`'s answer: its rate_limited error, or None.
        Nothing once the limit was decided."""
        if self._decided:
            return None
        self._decided = True
        wait_ms = await self._tool.admit(self._caller, trio.current_time())
        return None if wait_ms is None else errors.rate_limited(self._tool.tool, wait_ms)
