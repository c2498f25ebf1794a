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

The permit itself and the parse budget a page's parse takes a share of are the process's,
shared with the scraping engines: rypsok/core/parsing.py.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["BodySlot", "FetchSlots"]


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
