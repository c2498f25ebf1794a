"""robots.txt (RFC 9309) for the product token `rypsok` and `*` (REQ-CMP-005).

A verdict is kept per origin for LIM-F12 in at most LIM-F15 entries, the least recently
used forgotten first, on Trio's monotonic clock. A site whose robots.txt answers 4xx has
none (everything allowed); one whose robots.txt answers 5xx, cannot be read in its share
of the deadline, or redirects in a loop disallows everything (RFC 9309 §2.3.1.4). That
unreadable verdict is kept for ROBOTS_UNREADABLE_TTL_S only: long enough that a file which
drips or hangs costs one wait, not one per call, short enough that a site that had a bad
minute is not closed for a day.

The file is read as RFC 9309 §2.2 reads it, and only then handed to Protego, which matches
paths (percent-encoding, `*`, `$`, the longest match, allow on a tie). Protego on its own
reads three things otherwise (decisions/fetch-robots-txt): a byte order mark makes the first
line unknown; `User-agent: rypsok/1.0` or `rypsok bot` is not rypsok, and a prefix such as
`ryp` is; a line that is neither a user-agent nor a rule (`Crawl-delay`, `Sitemap`, an
unknown one) ends a group. So each line is read here and the file Protego parses holds
only user-agent lines, reduced to `rypsok`, `*` or nobody, and allow and disallow lines.
"""

from __future__ import annotations

import re
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
    "ROBOTS_UNREADABLE_TTL_S",
    "Robots",
    "RobotsCache",
    "canonical",
]

PRODUCT_TOKEN: Final = "rypsok"
ROBOTS_TTL_S: Final = 24 * 3600.0  # LIM-F12
ROBOTS_UNREADABLE_TTL_S: Final = 300.0  # decisions/fetch-robots-txt
ROBOTS_MAX_BYTES: Final = 512 * 1024  # LIM-F13

# RFC 9309 §2.2: EOL is CR, LF or CR LF, nothing else (str.splitlines would also split at
# U+2028, a form feed and others, which can sit inside a path). CR LF reads as a line end
# and an empty line, which is nothing.
_EOL: Final = re.compile(r"[\r\n]")
# Characters Protego's own line splitting (str.splitlines) breaks at, escaped in what it
# is given so that a rule stays one line; it reads the escape as the character.
_PROTEGO_BREAKS: Final = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
# RFC 9309 §2.2.1: a product token is letters, `-` and `_`; a value that goes on (a version,
# a comment, a second word) names the token it starts with, as Google's parser reads it.
_TOKEN: Final = re.compile(r"[A-Za-z_-]+")
_WHITESPACE: Final = re.compile(r"[ \t]+")
_USER_AGENT: Final = "user-agent"
_ALLOW: Final = "allow"
_DISALLOW: Final = "disallow"
# The names of the three records, and the spellings Google's parser and Protego also read.
_NAMES: Final = {
    "user-agent": _USER_AGENT,
    "useragent": _USER_AGENT,
    "user agent": _USER_AGENT,
    "allow": _ALLOW,
    "disallow": _DISALLOW,
    "dissallow": _DISALLOW,
    "dissalow": _DISALLOW,
    "disalow": _DISALLOW,
    "diasllow": _DISALLOW,
    "disallaw": _DISALLOW,
}
_BOM: Final = re.compile(b"\xef(?:\xbb\xbf?)?")  # the mark, or its first byte or two


def _decode(body: bytes | bytearray) -> str:
    """RFC 9309 §2.2: the file is UTF-8; an undecodable byte cannot form a rule. A byte
    order mark, or its first one or two bytes (as Google's parser skips them), is no part
    of the first line."""
    data = bytes(body)
    bom = _BOM.match(data)
    if bom is not None:
        data = data[bom.end() :]
    return data.decode("utf-8", errors="replace")


def _record(line: str) -> tuple[str, str] | None:
    """(name, value) of a line that is one of the three records, else None."""
    line = line.partition("#")[0].strip(" \t")
    name, colon, value = line.partition(":")
    if not colon:
        # Google's parser takes a missing colon when the line is exactly two words
        # (`disallow /`), and so did Protego.
        words = _WHITESPACE.split(line)
        if len(words) != 2:
            return None
        name, value = words
    kind = _NAMES.get(_WHITESPACE.sub(" ", name.strip(" \t")).lower())
    if kind is None:
        return None
    return kind, value.strip(" \t")


def _agent(value: str) -> str:
    """What a user-agent line names, for rypsok: `rypsok`, `*`, or nobody (empty)."""
    if value == "*" or value.startswith(("* ", "*\t")):
        return "*"
    token = _TOKEN.match(value)
    if token is not None and token.group().lower() == PRODUCT_TOKEN:
        return PRODUCT_TOKEN
    return ""


def _escape_break(match: re.Match[str]) -> str:
    return "".join(f"%{byte:02X}" for byte in match.group().encode("utf-8"))


def canonical(text: str) -> str:
    """The records of a robots.txt that matter to rypsok, one per line, as Protego reads them.

    A user-agent line names `rypsok`, `*` or nobody; an empty one still starts a group, so
    that the rules after it reach no one. Every other line is left out, so it neither ends
    a group nor starts one (RFC 9309 §2.2.4: other records do not interfere).
    """
    out: list[str] = []
    for line in _EOL.split(text):
        record = _record(line)
        if record is None:
            continue
        kind, value = record
        if kind == _USER_AGENT:
            value = _agent(value)
        out.append(f"{kind}: {_PROTEGO_BREAKS.sub(_escape_break, value)}")
    return "\n".join(out)


@attrs.frozen(kw_only=True)
class Robots:
    """One origin's rules: a parsed file, everything allowed, or everything disallowed."""

    rules: Protego | None = None
    allow_all: bool = False
    unreadable: bool = False  # kept for ROBOTS_UNREADABLE_TTL_S (see the module's note)

    @classmethod
    def parse(cls, body: bytes | bytearray) -> Robots:
        return cls(rules=Protego.parse(canonical(_decode(body))))

    @classmethod
    def allowing(cls) -> Robots:
        return cls(allow_all=True)

    @classmethod
    def unreachable(cls) -> Robots:
        return cls(allow_all=False, unreadable=True)

    def allows(self, url: str) -> bool:
        if self.rules is not None:
            # Protego chooses the group of the most specific matching token, `*` otherwise;
            # the file it parsed names no token but these two.
            return bool(self.rules.can_fetch(url, PRODUCT_TOKEN))
        return self.allow_all


class RobotsCache:
    """Verdicts per origin, bounded in count (LIM-F15) and age (LIM-F12; an unreadable
    file's verdict ROBOTS_UNREADABLE_TTL_S)."""

    def __init__(
        self,
        capacity: int,
        *,
        ttl_s: float = ROBOTS_TTL_S,
        unreadable_ttl_s: float = ROBOTS_UNREADABLE_TTL_S,
    ) -> None:
        if capacity < 1:
            raise ValueError("the robots.txt cache holds at least one origin")
        self._capacity = capacity
        self._ttl_s = ttl_s
        self._unreadable_ttl_s = unreadable_ttl_s
        self._entries: OrderedDict[str, tuple[float, Robots]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, origin: str) -> Robots | None:
        entry = self._entries.get(origin)
        if entry is None:
            return None
        expires_at, robots = entry
        if trio.current_time() >= expires_at:
            del self._entries[origin]
            return None
        self._entries.move_to_end(origin)
        return robots

    def put(self, origin: str, robots: Robots) -> None:
        ttl = self._unreadable_ttl_s if robots.unreadable else self._ttl_s
        self._entries[origin] = (trio.current_time() + ttl, robots)
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
