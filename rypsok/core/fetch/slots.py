"""Fetches in flight: at most LIM-C3 in the process and LIM-C4 (one) per host; and the parse
permit (LIM-C5) a page's body is handed to.

REQ-SEC-012: further work waits; a call whose deadline passes while it waits ends with
unavailable, busy (the caller's cancel scope ends the wait, `FetchSlots` only queues).

REQ-PERF-003 counts LIM-C3 bodies and LIM-C5 parses. A body is therefore held under a slot
from its request until its parse has a permit: the process slot (`BodySlot`) is released only
once the call holds a `ParsePermit`, and the permit is returned only when the parse's thread
has really ended, an abandoned one included. So a body downloaded while every permit is busy
waits under its slot, and no other body is read in its place; at most LIM-C3 + LIM-C5 bodies
are in memory at once, however many calls wait.

A page's parse also takes a share of the parse budget (`ParseBudget`, issue 23.2): the
permits bound how many parses run, the budget how large the pages parsing at once may be
together, so that two parses of the largest pages never run at once while small pages still
parse beside each other or beside a large one. The share is taken before the permit and held
with it until the thread ends (decisions.md, "a parse budget beside the LIM-C5 permits").
"""

from __future__ import annotations

from collections import deque
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["BodySlot", "FetchSlots", "ParseBudget", "ParsePermit", "page_share"]


class BodySlot:
    """One call's process slot (LIM-C3): taken at its first request, kept across the hops of
    its redirects and while its body waits for a parse permit, released by `FetchSlots.body`."""

    def __init__(self, process: trio.CapacityLimiter) -> None:
        self._process = process
        self._held = False

    async def take(self) -> None:
        if not self._held:
            await self._process.acquire_on_behalf_of(self)
            self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._process.release_on_behalf_of(self)


class FetchSlots:
    def __init__(self, in_flight: int) -> None:
        self._process = trio.CapacityLimiter(in_flight)
        # One lock per host while anyone holds or waits for it; removed when the last leaves,
        # so the table is bounded by the calls in progress, not by the hosts ever seen.
        self._hosts: dict[str, tuple[trio.Lock, int]] = {}

    @property
    def in_flight(self) -> int:
        return int(self._process.borrowed_tokens)

    @asynccontextmanager
    async def body(self) -> AsyncIterator[BodySlot]:
        """A call's body slot; whatever the call took of it is released at the end of the
        block (the call hands its body to a parse permit first)."""
        slot = BodySlot(self._process)
        try:
            yield slot
        finally:
            slot.release()

    @asynccontextmanager
    async def host(self, name: str, slot: BodySlot) -> AsyncIterator[None]:
        """Hold `name`'s slot for the block, and `slot` from then on.

        The host comes first: a call queued behind another on the same host holds no process
        slot. The host is free again at the end of the block (its request is over); the
        process slot stays with the body."""
        lock, users = self._hosts.get(name, (trio.Lock(), 0))
        self._hosts[name] = (lock, users + 1)
        try:
            async with lock:
                await slot.take()
                yield
        finally:
            lock, users = self._hosts[name]
            if users <= 1:
                del self._hosts[name]
            else:
                self._hosts[name] = (lock, users - 1)


def page_share(body: bytes | bytearray, *, max_bytes: int, max_nodes: int) -> tuple[int, int]:
    """A page's share of the parse budget, and the budget, in the same units.

    The larger of the page's part of LIM-F3 (its bytes of `max_bytes`) and its part of LIM-F10
    (the elements it can make of `max_nodes`, at most one a `<` byte: no element is written
    without one, in any encoding a page is read in), at most the whole. A parse's memory grows
    with both: with the text (the text shapes), and with the tree, which a page of links
    reaches at the node bound in its first 2 MB (lxml's tree, 70 MiB at LIM-F10). Counted by
    the bytes alone, two pages of 2.5 MB of links would still parse at once, each with a tree
    at the bound; counted this way, the pages parsing at once hold at most LIM-F3's bytes and
    LIM-F10's elements between them (one page at the bounds), the estimate's worst case."""
    elements = min(body.count(b"<"), max_nodes)
    whole = max_bytes * max_nodes
    return min(whole, max(len(body) * max_nodes, elements * max_bytes)), whole


class _Waiter:
    def __init__(self, share: int) -> None:
        self.share = share
        self.granted = False
        self.event = trio.Event()


class ParseBudget:
    """Bytes of page in parse at once (issue 23.2), beside the LIM-C5 permits.

    Waiting is first come, first served: the first waiter is served as soon as its share is
    free, and no one behind it goes first, so a large page is never starved by a stream of
    small ones; a share larger than the budget is taken as the whole budget (the page waits
    until nothing else parses, it is not refused). A wait is ended by the caller's cancel
    scope like the permit's (the fetch deadline answers it). Not thread-safe: taken and
    returned in Trio's thread (trio calls a limiter's release there, after the thread)."""

    def __init__(self, total: int, whole_cost: int = 0) -> None:
        self._total = max(total, 1)
        self._free = self._total
        self._queue: deque[_Waiter] = deque()
        # The memory the whole budget stands for (one parse of a page at both bounds, the
        # estimate's figure): what an engine's answer decoded off the loop is charged against.
        self._whole_cost = max(whole_cost, 1)

    @property
    def total(self) -> int:
        return self._total

    def share_of_cost(self, cost: int) -> int:
        """The share of a decode whose worst case is `cost` bytes (an engine's answer): its
        part of what the whole stands for, rounded up, at most the whole."""
        return min(self._total, -(-self._total * max(cost, 0) // self._whole_cost))

    @property
    def free(self) -> int:
        return self._free

    @property
    def waiting(self) -> int:
        return len(self._queue)

    async def take(self, share: int) -> int:
        """Wait for `share` (at most the whole budget); returns what was taken, to give back
        with `give_back`."""
        share = min(max(share, 0), self._total)
        if not self._queue and share <= self._free:
            await trio.lowlevel.checkpoint_if_cancelled()
            self._free -= share
            await trio.lowlevel.cancel_shielded_checkpoint()
            return share
        waiter = _Waiter(share)
        self._queue.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.granted:
                # Granted and cancelled at the same turn: the share goes to the next ones.
                self.give_back(share)
            else:
                self._queue.remove(waiter)
                # The one that left may have been the first: those behind it may fit now.
                self._serve()
            raise
        return share

    def give_back(self, share: int) -> None:
        self._free += share
        self._serve()

    def _serve(self) -> None:
        while self._queue and self._queue[0].share <= self._free:
            waiter = self._queue.popleft()
            self._free -= waiter.share
            waiter.granted = True
            waiter.event.set()


class ParsePermit:
    """One parse permit (LIM-C5), and for a page its share of the parse budget, taken by the
    call while its body is under its slot, then handed to the worker thread.

    `trio.to_thread.run_sync` accepts as its limiter any object with `acquire_on_behalf_of`
    and `release_on_behalf_of` (its documentation), and calls the release when the thread
    has finished, also when the call abandoned it at its deadline. So an abandoned parse
    keeps its permit and its share, and with them its part of the memory bound, until it
    really ends; no new parse starts in its place.

    The share is taken first: a page waiting for the budget holds no permit, so the engines'
    decodes that take a permit and no share (the small answers, DuckDuckGo's page) are not
    held up behind it. An engine's large answer takes a share too (`EngineClient.off_loop`).
    """

    def __init__(
        self, limiter: trio.CapacityLimiter, budget: ParseBudget | None = None, share: int = 0
    ) -> None:
        self._limiter = limiter
        self._budget = budget
        self._share = share
        self._taken_share: int | None = None
        self._held = False
        self._handed = False

    async def take(self) -> None:
        if self._budget is not None:
            self._taken_share = await self._budget.take(self._share)
        await self._limiter.acquire_on_behalf_of(self)
        self._held = True

    async def acquire_on_behalf_of(self, borrower: object) -> None:
        # Already taken: the thread only inherits it (and trio now owes the release).
        self._handed = True

    def release_on_behalf_of(self, borrower: object) -> None:
        self._release()

    def release_unless_handed(self) -> None:
        """Return the permit and the share if no thread took them over (the call ended
        before the thread started, or while it waited for the permit)."""
        if not self._handed:
            self._release()

    def _release(self) -> None:
        if self._held:
            self._held = False
            self._limiter.release_on_behalf_of(self)
        if self._budget is not None and self._taken_share is not None:
            share, self._taken_share = self._taken_share, None
            self._budget.give_back(share)
