"""What a parse of external markup may take, shared by the fetch pipeline and the scraping
engines: the document bounds (LIM-F10, LIM-F11) and the process's parse budget.

A page's parse takes a share of the parse budget (`ParseBudget`): the LIM-C5 permits bound
how many parses run, the budget how large the pages parsing at once may be together, so
that two parses of the largest pages never run at once while small pages still parse beside
each other or beside a large one. The share is taken before the permit and held with it
until the thread ends (decision record "a parse budget beside the LIM-C5 permits"). A
scraping engine's answer parses under the same permits and budget.
"""

from __future__ import annotations

from collections import deque
from typing import Final

import trio

__all__ = ["MAX_DEPTH", "MAX_NODES", "ParseBudget", "ParsePermit", "page_share"]

MAX_NODES: Final = 100_000  # LIM-F10
MAX_DEPTH: Final = 256  # LIM-F11


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
    """Bytes of page in parse at once, beside the LIM-C5 permits.

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
