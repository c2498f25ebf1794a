"""Escaping: only the Markdown rypsok writes is Markdown (REQ-SEC-001)."""

from __future__ import annotations

import bisect
import re
import unicodedata
from typing import Final

from rypsok.core.untrusted_text import INVISIBLE_RANGES, remove_invisible

__all__ = [
    "code_span",
    "escape_closing_hashes",
    "escape_line_start",
    "escape_pipes",
    "escape_text",
    "is_invisible",
    "nfc",
    "strip_invisible",
]

# A page's text reaches the agent as Markdown text, so whatever in it could start Markdown
# syntax is escaped with a backslash (CommonMark renders a backslash before ASCII punctuation
# as that character alone, so the escapes never show). What is escaped, and where:
#
# - anywhere in text: `\`, a backtick, `*`, `[`, `]` (links, images, code spans, emphasis);
#   `<` unless what follows cannot start raw HTML or an autolink ("a < b" stays); `_` unless
#   between two letters or digits (CommonMark never reads that as emphasis: snake_case
#   stays); `~` next to another (strikethrough, a code fence); `&` when it starts what reads
#   as a character reference (`&amp;`, `&#91;`);
# - at the start of a line: `#` (a heading), `>` (a quote), `-`, `+` followed by a space or
#   the end (a list item), a line of `-` or `=` (a rule or a heading underline), digits
#   followed by `.` or `)` and a space (an ordered list), and a line that could be a table's
#   delimiter row (only `|`, `-`, `:` and spaces);
# - a `!` directly before a link rypsok writes (it would make the link an image).
#
# Not escaped: `!` elsewhere, `|` in running text (a pipe table needs a delimiter row, which
# is escaped), a lone `~` (only GitHub's own renderer strikes text with single tildes, and
# striking is all it can do), bare URLs (a host may link them, but only as http(s) links,
# never as images). Invisible characters are removed and the text NFC-normalised after
# extraction (content boundary): every check here looks through them, and the text is
# normalised first, since NFC turns U+1FEF into a backtick (and U+0338 after `<`, `=` or `>`
# into one character, which the checks allow for).

_ESCAPE_ANYWHERE: Final = re.compile(r"[\\`*\[\]<_~&]")
_REFERENCE: Final = re.compile(r"#?[A-Za-z0-9]+;")
_AFTER_ANGLE: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.!#$%&'*+/=?^_`{|}~-"
)
_ORDERED_MARKER: Final = re.compile(r"[0-9]{1,9}[.)]")


def is_invisible(ch: str) -> bool:
    """Whether the content boundary removes this character (REQ-SEC-015)."""
    code = ord(ch)
    index = bisect.bisect_right(_INVISIBLE_STARTS, code) - 1
    return index >= 0 and code <= INVISIBLE_RANGES[index][1]


_INVISIBLE_STARTS: Final = tuple(low for low, _ in INVISIBLE_RANGES)


def nfc(text: str) -> str:
    if text.isascii() or unicodedata.is_normalized("NFC", text):
        return text
    return unicodedata.normalize("NFC", text)


def _visible_neighbour(text: str, index: int, step: int) -> str:
    """The nearest character to `text[index]` in direction `step` that will be seen."""
    index += step
    while 0 <= index < len(text):
        if not is_invisible(text[index]):
            return text[index]
        index += step
    return ""


def _escape_match(match: re.Match[str]) -> str:
    char = match.group()
    if char == "_":
        text = match.string
        start = match.start()
        before = text[start - 1] if start > 0 else ""
        after = text[start + 1] if start + 1 < len(text) else ""
        if before.isalnum() and after.isalnum():
            return char
    elif char == "<":
        # Raw HTML and autolinks (an e-mail autolink may start with any of these) need one
        # of these next; "a < b" is left as it is, and so is "<" before U+0338, which NFC
        # makes "≮".
        following = _visible_neighbour(match.string, match.start(), 1)
        if following and following not in _AFTER_ANGLE:
            return char
    elif char == "&":
        # A character reference is at most 32 characters long ("&CounterClockwiseContour…;").
        following = strip_invisible(match.string[match.end() : match.end() + 64])
        if _REFERENCE.match(following[:40]) is None:
            return char
    elif char == "~":
        start = match.start()
        text = match.string
        if "~" not in (_visible_neighbour(text, start, -1), _visible_neighbour(text, start, 1)):
            return char
    return "\\" + char


def escape_text(text: str) -> str:
    """A page's text with what could start inline Markdown escaped (see above)."""
    return _ESCAPE_ANYWHERE.sub(_escape_match, text if text.isascii() else nfc(text))


def _nth_visible(line: str, start: int, n: int) -> int:
    """The position in `line` of its `n`-th visible character from `start` (0-based)."""
    for index in range(start, len(line)):
        if not is_invisible(line[index]):
            if n == 0:
                return index
            n -= 1
    return len(line)


def escape_line_start(line: str) -> str:
    """`line` with what would start a block at its beginning escaped (see above)."""
    lead = line[:1]
    if lead.isascii() and lead.isalpha():
        # An ASCII letter first is visible and starts no block (most lines).
        return line
    first = 0
    while first < len(line) and (line[first].isspace() or is_invisible(line[first])):
        first += 1
    if first == len(line) or line[first].isalpha():
        # (A visible letter first starts no block: most lines, decided without a copy.)
        return line
    # The first characters decide, looked at as the agent will see them.
    seen = strip_invisible(line[first : first + 80])
    lead = seen[0]
    after = seen[1:2]
    at: int | None = None
    if lead == "#":
        hashes = len(seen) - len(seen.lstrip("#"))
        mark_end = seen[hashes : hashes + 1]
        if hashes <= 6 and (not mark_end or mark_end.isspace()):
            at = first
    elif (lead == ">" and after != "\u0338") or (lead in "-+" and (not after or after.isspace())):
        # (">" before U+0338 is "≯" once the text is NFC-normalised: no quote.)
        at = first
    elif lead in "-=" and _only(line, first, lead):
        at = first  # a rule, or the underline of a heading
    elif lead.isdigit():
        match = _ORDERED_MARKER.match(seen)
        if match is not None:
            mark_end = seen[match.end() : match.end() + 1]
            if not mark_end or mark_end.isspace():
                at = _nth_visible(line, first, match.end() - 1)
    if at is not None:
        line = line[:at] + "\\" + line[at:]
    if lead in "|:-" and "|" in line and "-" in line and _only(line, first, "|:-"):
        # A table's delimiter row under a line with pipes would make both a table.
        line = escape_pipes(line)
    return line


def _only(line: str, start: int, chars: str) -> bool:
    """Whether `line` from `start` holds only `chars`, white space and invisible characters
    (stopping at the first other character, which ordinary text has at once)."""
    return all(c in chars or c.isspace() or is_invisible(c) for c in line[start:])


def escape_closing_hashes(heading: str) -> str:
    """A heading's text with a trailing run of `#` after a space (or alone) escaped: it
    would be read as the heading's closing sequence and dropped."""
    end = len(heading)
    while end and is_invisible(heading[end - 1]):
        end -= 1
    start = end
    while start and (heading[start - 1] == "#" or is_invisible(heading[start - 1])):
        start -= 1
    run = heading.find("#", start, end)
    if run == -1:
        return heading
    before = _visible_neighbour(heading, run, -1)
    if before and not before.isspace():
        return heading
    return heading[:run] + "\\" + heading[run:]


def strip_invisible(text: str) -> str:
    """`text` as the agent will see it, after the content boundary."""
    if text.isascii() and text.isprintable():
        return text  # printable ASCII holds nothing the boundary removes
    return remove_invisible(text)[0]


# A pipe with no backslash escaping it (an even run of backslashes before it).
_BARE_PIPE: Final = re.compile(r"(?<!\\)((?:\\\\)*)\|")


def escape_pipes(text: str) -> str:
    if "|" not in text:
        return text  # most cells
    return _BARE_PIPE.sub(lambda m: m.group(1) + "\\|", text)


def code_span(text: str) -> str:
    """`text` as an inline code span, its fence longer than any backtick run inside."""
    seen = strip_invisible(text)
    runs = re.findall(r"`+", seen)
    fence = "`" * (max((len(r) for r in runs), default=0) + 1)
    if seen.startswith("`") or seen.endswith("`"):
        # A space on each side is taken off again by the reader, and keeps the fence apart.
        return f"{fence} {text} {fence}"
    return f"{fence}{text}{fence}"


# What a page's spans may ask for: HTML's own limits on colspan and rowspan, and a bound on
