"""Fetches in flight: at most LIM-C3 in the process and LIM-C4 (one) per host.

REQ-SEC-012: further work waits; a call whose deadline passes while it waits ends with
unavailable, busy (the caller's cancel scope ends the wait, `FetchSlots` only queues).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["FetchSlots"]


class FetchSlots:
    def __init__(self, in_flight: int) -> None:
        self._process = trio.CapacityLimiter(in_flight)
        # One lock per host while anyone holds or waits for it; removed when the last leaves,
        # so the table is bounded by the calls in progress, not by the hosts ever seen.
        self._hosts: dict[str, tuple[trio.Lock, int]] = {}

    @property
    def in_flight(self) -> int:
        return int(self._process.borrowed_tokens)

    def hosts_held(self) -> int:
        return len(self._hosts)

    @asynccontextmanager
    async def host(self, name: str) -> AsyncIterator[None]:
        """Hold the process slot and `name`'s slot for the body of the block."""
        lock, users = self._hosts.get(name, (trio.Lock(), 0))
        self._hosts[name] = (lock, users + 1)
        try:
            async with lock, self._process:
                yield
        finally:
            lock, users = self._hosts[name]
            if users <= 1:
                del self._hosts[name]
            else:
                self._hosts[name] = (lock, users - 1)
