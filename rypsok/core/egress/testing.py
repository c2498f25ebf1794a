"""Fakes of the egress component's two edges, for tests and the conformance harness.

`MapResolver` answers names from a table, as a test's DNS (`example.org` → 127.0.0.1);
`RecordingBackend` records every connection the backend attempts and refuses any
address that is not loopback, so that a test never leaves the machine even when the policy
under test is wrong, and can assert on what was attempted. The policy under test stays the
production one: a test reaches its local server only through an allow rule it adds in code
(REQ-TEST-005).

Implements REQ-MAIN-005.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from rypsok.core.egress.backend import TcpBackend
from rypsok.core.egress.ranges import canonical

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import trio

    from rypsok.core.egress.backend import NetworkBackend
    from rypsok.core.egress.ranges import Address

__all__ = ["MapResolver", "NotLoopbackError", "RecordingBackend"]


class NotLoopbackError(OSError):
    """The recording network backend refused an address off loopback."""


class MapResolver:
    """A resolver answering from a table; a name not in it does not resolve.

    `answer(name, addresses)` changes an answer between two lookups (a rebinding test);
    `lookups` records every name asked, in order.
    """

    def __init__(self, answers: Mapping[str, Sequence[str]] | None = None) -> None:
        self._answers: dict[str, tuple[Address, ...]] = {}
        self.lookups: list[str] = []
        for name, addresses in (answers or {}).items():
            self.answer(name, addresses)

    def answer(self, name: str, addresses: Sequence[str]) -> None:
        self._answers[name] = tuple(ipaddress.ip_address(a) for a in addresses)

    async def resolve(self, name: str, port: int) -> Sequence[Address]:
        self.lookups.append(name)
        found = self._answers.get(name)
        if not found:
            raise OSError("no such name in the test resolver")
        return found


class RecordingBackend:
    """Records each attempt as (address, port); connects only to loopback addresses."""

    def __init__(self, inner: NetworkBackend | None = None) -> None:
        self._inner: NetworkBackend = inner if inner is not None else TcpBackend()
        self.attempts: list[tuple[Address, int]] = []

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        self.attempts.append((address, port))
        if not canonical(address).is_loopback:
            raise NotLoopbackError("the recording network backend refuses an address off loopback")
        return await self._inner.connect(address, port)
