"""robots.txt (RFC 9309) for the product token `rypsok` and `*` (REQ-CMP-005).

A verdict is kept per origin for LIM-F12 in at most LIM-F15 entries, the least recently
used forgotten first, on Trio's monotonic clock. A site whose robots.txt answers 4xx has
none (everything allowed); one that answers 5xx or cannot be reached disallows everything
(RFC 9309 §2.3.1.4). That unreachable verdict is not kept, so the next call asks again: a
site that had a bad minute is not closed for a day.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Final

import attrs
import trio
from protego import Protego

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = [
    "PRODUCT_TOKEN",
    "ROBOTS_MAX_BYTES",
    "ROBOTS_TTL_S",
    "Robots",
    "RobotsCache",
    "origin_key",
]

PRODUCT_TOKEN: Final = "rypsok"
ROBOTS_TTL_S: Final = 24 * 3600.0  # LIM-F12
ROBOTS_MAX_BYTES: Final = 512 * 1024  # LIM-F13


@attrs.frozen(kw_only=True)
class Robots:
    """One origin's rules: a parsed file, everything allowed, or everything disallowed."""

    rules: Protego | None = None
    allow_all: bool = False
    keep: bool = True  # False for the unreachable verdict (see the module's note)

    @classmethod
    def parse(cls, body: bytes | bytearray) -> Robots:
        # RFC 9309 §2.2: the file is UTF-8; an undecodable byte cannot form a rule.
        text = body.decode("utf-8", errors="replace")
        return cls(rules=Protego.parse(text))

    @classmethod
    def allowing(cls) -> Robots:
        return cls(allow_all=True)

    @classmethod
    def unreachable(cls) -> Robots:
        return cls(allow_all=False, keep=False)

    def allows(self, url: str) -> bool:
        if self.rules is not None:
            # Protego chooses the group of the most specific matching token, `*` otherwise.
            return bool(self.rules.can_fetch(url, PRODUCT_TOKEN))
        return self.allow_all


def origin_key(scheme: str, host: str, port: int | None) -> str:
    default = 443 if scheme == "https" else 80
    return f"{scheme}://{host}:{port if port is not None else default}"


class RobotsCache:
    """Verdicts per origin, bounded in count (LIM-F15) and age (LIM-F12)."""

    def __init__(self, capacity: int, *, ttl_s: float = ROBOTS_TTL_S) -> None:
        if capacity < 1:
            raise ValueError("the robots.txt cache holds at least one origin")
        self._capacity = capacity
        self._ttl_s = ttl_s
        self._entries: OrderedDict[str, tuple[float, Robots]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, origin: str) -> Robots | None:
        entry = self._entries.get(origin)
        if entry is None:
            return None
        stored_at, robots = entry
        if trio.current_time() - stored_at >= self._ttl_s:
            del self._entries[origin]
            return None
        self._entries.move_to_end(origin)
        return robots

    def put(self, origin: str, robots: Robots) -> None:
        if not robots.keep:
            self._entries.pop(origin, None)
            return
        self._entries[origin] = (trio.current_time(), robots)
        self._entries.move_to_end(origin)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)

    async def rules_for(self, origin: str, read: Callable[[], Awaitable[Robots]]) -> Robots:
        """The origin's rules, from memory or read now with `read`."""
        robots = self.get(origin)
        if robots is None:
            robots = await read()
            self.put(origin, robots)
        return robots
