"""The PDF workers a process runs at once (LIM-C10), shared among its callers (REQ-PDF-103).

The workers are one pool for the process. When every worker is busy, the next free one goes
to the waiting caller that has the fewest workers running; among those, to the one whose
last turn is the oldest (a caller with nothing in flight before has had none); among those,
to the call that has waited longest. So callers take turns: a caller sending many PDFs at
once gets a worker after each other waiting caller has had one, and never holds every worker
while others wait for one it frees. A caller alone may use every worker (nothing is kept
idle for callers that are not there).

A wait is ended by the caller's cancel scope (the fetch deadline answers it, as a wait for a
parse permit is answered). Not thread-safe: used in Trio's thread only.
"""

from __future__ import annotations

import itertools
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["WorkerShare"]


class _Waiter:
    __slots__ = ("caller", "event", "granted", "order")

    def __init__(self, caller: str, order: int) -> None:
        self.caller = caller
        self.order = order
        self.granted = False
        self.event = trio.Event()


class WorkerShare:
    def __init__(self, workers: int) -> None:
        self._free = max(workers, 1)
        self._running: dict[str, int] = {}
        self._waiting: list[_Waiter] = []
        self._order = itertools.count()
        # Each caller's last turn, kept while it has a call running or waiting: the table is
        # bounded by the calls in flight, not by the callers ever seen.
        self._last_turn: dict[str, int] = {}
        self._turns = itertools.count()

    @property
    def free(self) -> int:
        return self._free

    def running(self, caller: str) -> int:
        return self._running.get(caller, 0)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @asynccontextmanager
    async def worker(self, caller: str) -> AsyncIterator[None]:
        """Hold one worker's place for `caller` during the block."""
        await self._take(caller)
        try:
            yield
        finally:
            self._give_back(caller)

    async def _take(self, caller: str) -> None:
        if self._free and not self._waiting:
            await trio.lowlevel.checkpoint_if_cancelled()
            self._grant(caller)
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        waiter = _Waiter(caller, next(self._order))
        self._waiting.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.granted:
                # Granted and cancelled at the same turn: the place goes to the next one.
                self._give_back(caller)
            else:
                self._waiting.remove(waiter)
                self._forget_if_idle(caller)
            raise

    def _grant(self, caller: str) -> None:
        self._free -= 1
        self._running[caller] = self._running.get(caller, 0) + 1
        self._last_turn[caller] = next(self._turns)

    def _forget_if_idle(self, caller: str) -> None:
        if caller not in self._running and all(w.caller != caller for w in self._waiting):
            self._last_turn.pop(caller, None)

    def _give_back(self, caller: str) -> None:
        left = self._running[caller] - 1
        if left:
            self._running[caller] = left
        else:
            del self._running[caller]
        self._free += 1
        self._serve()
        self._forget_if_idle(caller)

    def _serve(self) -> None:
        while self._free and self._waiting:
            # The fewest running, then the oldest last turn, then the longest waiting (the
            # queue is short: it holds at most the calls past their download, LIM-C3).
            waiter = min(
                self._waiting,
                key=lambda w: (self.running(w.caller), self._last_turn.get(w.caller, -1), w.order),
            )
            self._waiting.remove(waiter)
            self._grant(waiter.caller)
            waiter.granted = True
            waiter.event.set()
