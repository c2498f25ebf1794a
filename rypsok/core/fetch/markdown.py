"""Markdown from the main block of a parsed page (REQ-FETCH-004).

The writer renders structure an agent can use and nothing made for the eye (REQ-CTX-008):
headings as ``#``, lists as ``-`` or ``1.``, tables as pipe tables (each cell under its
column, spans spread), preformatted text as fenced code, quotes as ``>``, links as
``[text](url)`` with the URL made absolute against the page's URL and written in ASCII as
web_search writes URLs. A link whose scheme is not http or https (javascript:, data:,
mailto:…) keeps only its text, and an image becomes its alternative text. Emphasis and
layout are dropped. The page's own text is escaped where it could start Markdown, so that
the only Markdown in the answer is what this writer writes (REQ-SEC-001).

The tree is at most LIM-F11 deep, so the recursion here is bounded by the parse.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from typing import TYPE_CHECKING, Final
from urllib.parse import urljoin, urlsplit

from lxml import etree

from rypsok.core.model import Reason
from rypsok.core.search.urls import MAX_URL_CHARS, returned_url
from rypsok.core.untrusted_text import INVISIBLE_RANGES, remove_invisible

if TYPE_CHECKING:
    from collections.abc import Sequence


__all__ = [
    "absolute_http_url",
    "escape_line_start",
    "escape_text",
    "link_target",
    "render_markdown",
]

# Elements that stand apart from what surrounds them. Any other element, unknown and custom
# ones included, is inline, as a browser renders it, unless it holds blocks.
BLOCK_ELEMENTS: Final = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "center",
        "dd",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hgroup",
        "hr",
        "html",
        "legend",
        "li",
        "listing",
        "main",
        "menu",
        "nav",
        "ol",
        "p",
        "plaintext",
        "pre",
        "search",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
        "xmp",
    }
)

_HEADINGS: Final = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
# The blocks written as their content standing apart, with no structure of their own.
_PLAIN_BLOCKS: Final = (
    BLOCK_ELEMENTS
    - set(_HEADINGS)
    - {
        "ul",
        "ol",
        "menu",
        "pre",
        "blockquote",
        "table",
        "hr",
    }
)
# Marks a hard line break inside inline text until the whitespace is collapsed; NUL never
# survives the parser (libxml2 replaces it), and text nodes are scrubbed of it anyway.
_BREAK: Final = "\x00"
_BLANK_LINES: Final = re.compile(r"\n{3,}")
_CELLS: Final = frozenset({"td", "th"})
_BLOCK_CONTENT: Final = frozenset(
    {"p", "div", "table", "ul", "ol", "pre", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6"}
)


def absolute_http_url(base_url: str, href: str) -> str | None:
    """`href` resolved against `base_url` when the result is an http(s) URL, else None."""
    href = href.strip()
    if not href:
        return None
    try:
        url = urljoin(base_url, href)
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    # Characters that would end the Markdown link early are percent-encoded.
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")


# In a link's target: what is not printable ASCII, and what could end the target or change
# how it is read (a space or a parenthesis ends it, `<` and a backslash change its form).
_LINK_UNSAFE: Final = re.compile(r'[^\x21-\x7e]|[()<>\\`"]')


_REFERENCE_IN_URL: Final = re.compile(r"&(?=#?[A-Za-z0-9]+;)")


def _percent_encoded(match: re.Match[str]) -> str:
    return "".join(f"%{byte:02X}" for byte in match.group().encode("utf-8", "replace"))


def link_target(base_url: str, href: str) -> str | None:
    """The target of a link as rypsok writes it, or None when the link keeps only its text.

    The URL is resolved as `absolute_http_url` does, then written in ASCII: everything after
    the host that is not printable ASCII, and every character that would end or change the
    Markdown target, percent-encoded as UTF-8 (as a browser sends it), and the rest as
    web_search writes its URLs (`returned_url`, REQ-RANK-003: the host in its IDNA form,
    THR-24, tracking parameters removed). A target web_search would not return (a host
    web_fetch refuses, credentials, longer than LIM-F9) keeps only the link's text.
    """
    target = _target(base_url, href)
    return None if target is None else target[0]


def _target(base_url: str, href: str) -> tuple[str, int] | None:
    """`link_target`'s answer, and the length of the URL it was checked against LIM-F9 at."""
    url = absolute_http_url(base_url, href)
    if url is None:
        return None
    parts = urlsplit(url)
    head = f"{parts.scheme}://{parts.netloc}"
    if not url.startswith(head):
        return None
    url = head + _LINK_UNSAFE.sub(_percent_encoded, _nfc(url[len(head) :]))
    shown = returned_url(url)
    if isinstance(shown, Reason):
        return None
    # A reader decodes character references in a target too: "&lt;" would become "<".
    return _REFERENCE_IN_URL.sub("\\\\&", shown), len(shown)


# A link written as a plain path from the root of its site, or as an http(s) origin and such
# a path: none of what resolving, encoding or returning changes in a path (no dot segment,
# no empty segment, no parameters, query or fragment, nothing to percent-encode or to
# escape). Its target is the target of its site's root ("/") with the path in place of the
# "/", so the work of resolving is done once per site, not once per link (a page of 100,000
# links spent two seconds on it).
# (No "//" and no "/." in the path: every "/" of it is followed by neither.)
_PLAIN_LINK: Final = re.compile(
    r"((?:https?://[A-Za-z0-9.:-]+)?)(/(?![/.])(?:[A-Za-z0-9_~!$'*+,=:@%&.-]|/(?![/.]))*)",
    re.ASCII,
)
# Distinct sites remembered for one page; links to others are resolved one by one.
_SITES_REMEMBERED: Final = 256


class _LinkTargets:
    """`link_target` for the links of one page, the common plain ones at the cost of a
    match (the shared work cached per site)."""

    __slots__ = ("base_url", "sites")

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        # origin as written ("" for a path from the base's root) -> the root's target with
        # its final "/" off and LIM-F9's room left for the path, or None (no target).
        self.sites: dict[str, tuple[str, int] | None] = {}

    def target(self, href: str) -> str | None:
        match = _PLAIN_LINK.fullmatch(href)
        if match is None:
            return link_target(self.base_url, href)
        origin, path = match.groups()
        if origin in self.sites:
            site = self.sites[origin]
        elif len(self.sites) >= _SITES_REMEMBERED:
            return link_target(self.base_url, href)
        else:
            root = _target(self.base_url, origin + "/")
            site = self.sites[origin] = (
                None
                if root is None or not root[0].endswith("/")
                else (root[0][:-1], MAX_URL_CHARS - (root[1] - 1))
            )
        if site is None or len(path) > site[1]:
            return None
        return site[0] + path


def _finish_inline(parts: list[str]) -> str:
    # Each line's white space collapsed and its ends stripped: str.split() splits at the
    # white space `\s` matches (Unicode's), and is several times quicker than the regex.
    text = "".join(parts)
    if _BREAK in text:
        text = "\n".join(escape_line_start(" ".join(line.split())) for line in text.split(_BREAK))
        # Line breaks in a row are at most one blank line.
        return _BLANK_LINES.sub("\n\n", text).strip()
    return escape_line_start(" ".join(text.split()))


def _text_block(own: str) -> str:
    """What `_finish_inline` makes of a single text (a paragraph or a link whose content is
    its text alone, most of a page's): the same, without the list of pieces."""
    if _BREAK in own:
        own = own.replace(_BREAK, "")
    # (Escaping adds backslashes only: no break mark to look for afterwards.)
    text = escape_text(own)
    if not (
        text.isascii()
        and text.isprintable()
        and "  " not in text
        and text[:1] != " "
        and text[-1:] != " "
    ):
        # White space to collapse. (Printable ASCII holds no white space but the space,
        # and spaces alone, none at the ends, are what collapsing them leaves: most texts,
        # whose splitting into words cost more than the rest of their writing.)
        text = " ".join(text.split())
    return escape_line_start(text)


class _Writer:
    def __init__(
        self,
        base_url: str,
        seen_alts: set[str] | None = None,
        *,
        inline_only: bool = False,
        links: _LinkTargets | None = None,
    ) -> None:
        self.base_url = base_url
        self.links = _LinkTargets(base_url) if links is None else links
        # Alternative texts already written: a picture repeated (share buttons, carousels)
        # says nothing new the second time.
        self.seen_alts: set[str] = set() if seen_alts is None else seen_alts
        # Inside a link or a heading, block structure is flattened to text.
        self.inline_only = inline_only
        self.blocks: list[str] = []
        self.inline: list[str] = []

    # Blocks -----------------------------------------------------------------------------

    def flush(self) -> None:
        if self.inline:
            text = _finish_inline(self.inline)
            self.inline = []
            if text:
                self.blocks.append(text)

    def child_blocks(self, element: etree._Element) -> list[str]:
        """The blocks of `element`'s content, written by a fresh writer."""
        writer = _Writer(self.base_url, self.seen_alts, links=self.links)
        writer.children(element)
        writer.flush()
        return writer.blocks

    def children(self, element: etree._Element) -> None:
        # lxml builds a new string each time `.text` or `.tail` is read: each is read once.
        own = element.text
        if own:
            self.text(own)
        node = self.node
        link = self.link
        blocks = self.blocks
        plain = not self.inline_only
        for child in element:
            tag = child.tag
            if tag == "a":
                link(child)  # (what `node` would do, a call fewer: most children of a
                # paragraph of links)
            elif plain and tag in _PLAIN_BLOCKS and not len(child):
                # What `node` does with a plain block of text alone (most children of a
                # page's body or of its article), a call fewer.
                if self.inline:
                    self.flush()
                own = child.text
                if own:
                    text = _text_block(own)
                    if text:
                        blocks.append(text)
            else:
                node(child)
            tail = child.tail
            if tail:
                if tail.isascii() and tail.isspace():
                    # (`text`'s first case: most tails between elements. The pending list
                    # is read each time: a block child's flush replaces it.)
                    self.inline.append(tail)
                else:
                    self.text(tail)

    def text(self, text: str) -> None:
        if text.isascii() and text.isspace():
            # White space alone (most tails between elements): nothing in it to escape or
            # normalise, and no break mark.
            self.inline.append(text)
            return
        self.inline.append(escape_text(text.replace(_BREAK, "")))

    def _last_visible(self) -> tuple[int, int] | None:
        """Where the last character the agent will see in the pending inline output is
        (the piece and the position in it), or None when there is none."""
        inline = self.inline
        if inline:
            piece = inline[-1]
            if piece and " " <= piece[-1] <= "~":
                # Printable ASCII is never invisible: the last character is the one seen
                # (most text before a link ends so).
                return len(inline) - 1, len(piece) - 1
        for piece_index in range(len(self.inline) - 1, -1, -1):
            piece = self.inline[piece_index]
            for index in range(len(piece) - 1, -1, -1):
                if not _is_invisible(piece[index]) or piece[index] == _BREAK:
                    return piece_index, index
        return None

    def node(self, element: etree._Element) -> None:
        tag = element.tag
        if tag in _PLAIN_BLOCKS and not self.inline_only:
            # Most blocks (paragraphs, divisions, items' containers): their content stands
            # apart from what surrounds it, as the last case below writes it.
            if self.inline:
                self.flush()
            if len(element):
                self.children(element)
                self.flush()
                return
            # Text alone (most paragraphs): the block its text makes, without the pending
            # inline list and the calls that fill and empty it.
            own = element.text
            if own:
                text = _text_block(own)
                if text:
                    self.blocks.append(text)
            return
        if not isinstance(tag, str):
            return
        if tag not in BLOCK_ELEMENTS:
            self.inline_node(element, tag)
            return
        level = _HEADINGS.get(tag)
        if self.inline_only:
            self.flush()
            self.children(element)
            self.flush()
            return
        if level is not None:
            self.flush()
            text = self.inline_text(element)
            if text:
                text = _escape_closing_hashes(text.replace("\n", " "))
                self.blocks.append("#" * level + " " + text)
            return
        if tag in ("ul", "ol", "menu"):
            self.flush()
            self.list_block(element, ordered=tag == "ol")
            return
        if tag == "pre":
            self.flush()
            self.code_block(element)
            return
        if tag == "blockquote":
            self.flush()
            inner = self.child_blocks(element)
            if inner:
                self.blocks.append(
                    "\n".join(("> " + line).rstrip() for line in "\n\n".join(inner).split("\n"))
                )
            return
        if tag == "table":
            self.flush()
            self.table(element)
            return
        if tag == "hr":
            self.flush()
            return
        # Every other element is a block: its content stands apart from what surrounds it.
        self.flush()
        self.children(element)
        self.flush()

    # Inline -----------------------------------------------------------------------------

    def inline_text(self, element: etree._Element) -> str:
        if not len(element):
            # Text alone (most links, cells and headings): what a writer would make of it,
            # without making one.
            own = element.text
            return _text_block(own) if own else ""
        writer = _Writer(self.base_url, self.seen_alts, inline_only=True, links=self.links)
        writer.children(element)
        # Block content inside an inline context (a div in a heading) is joined by spaces.
        writer.flush()
        return " ".join(writer.blocks)

    def link(self, element: etree._Element) -> None:
        """A link: its text, and its target when it has one to write (`link_target`)."""
        if len(element):
            text = self.inline_text(element)
            lead, trail = _spaced_ends(element)
        else:
            # Text alone (most links): read once, for the text and its ends.
            own = element.text
            if not own:
                return
            text = _text_block(own)
            lead, trail = own[0].isspace(), own[-1].isspace()
        if not text:
            return
        href = element.get("href")
        # A link within the page (an anchor, a table of contents) is only its text.
        url = (
            self.links.target(href)
            if href is not None and not href.strip().startswith("#")
            else None
        )
        inline = self.inline
        # White space at the ends of the link's text separates it from the words
        # around it (`the <a>U.S. Embassy </a>in Tunis`): it stays, outside the link.
        if lead:
            inline.append(" ")
        if url is None:
            inline.append(text)
        else:
            piece = inline[-1] if inline else ""
            end = piece[-1:]
            if end and " " <= end <= "~":
                # Printable ASCII last (most text before a link): the character seen.
                last: tuple[int, int] | None = (
                    (len(inline) - 1, len(piece) - 1) if end == "!" else None
                )
            else:
                last = self._last_visible()
            if last is not None and inline[last[0]][last[1]] == "!":
                # "!" before a link would make it an image of the link's target.
                piece = inline[last[0]]
                inline[last[0]] = piece[: last[1]] + "\\" + piece[last[1] :]
            inline.append(f"[{text.replace(chr(10), ' ')}]({url})")
        if trail:
            inline.append(" ")

    def inline_node(self, element: etree._Element, tag: str) -> None:
        if tag == "br":
            self.inline.append(_BREAK)
            return
        if tag == "img":
            alt = " ".join(element.get("alt", "").split())
            if alt and alt not in self.seen_alts and not _names_the_file(alt, element.get("src")):
                self.seen_alts.add(alt)
                self.inline.append(" " + escape_text(alt) + " ")
            return
        if tag == "a":
            self.link(element)
            return
        if tag == "code" and not _has_block_child(element):
            whole = str(element.xpath("string()"))
            text = _nfc(" ".join(whole.split()))
            if text:
                if whole[:1].isspace():
                    self.inline.append(" ")  # kept outside the span, as for a link
                last = self._last_visible()
                if last is not None and self.inline[last[0]][last[1]] == "`":
                    # Two code spans side by side would read as one fence of both.
                    self.inline.append(" ")
                self.inline.append(_code_span(text))
                if whole[-1:].isspace():
                    self.inline.append(" ")
            return
        if _has_block_child(element):
            # A span wrapping paragraphs is a block in all but name.
            self.flush()
            self.children(element)
            self.flush()
            return
        self.children(element)

    # Structures -------------------------------------------------------------------------

    def list_block(self, element: etree._Element, *, ordered: bool) -> None:
        items: list[str] = []
        number = 1
        if ordered:
            start = element.get("start", "")
            if start.strip().isdigit() and len(start.strip()) < 10:
                number = int(start.strip())
        for child in element:
            if not isinstance(child.tag, str):
                continue
            # Stray content directly inside a list is written as an item of its own.
            blocks = self.child_blocks(child) if child.tag == "li" else self.child_blocks_of(child)
            if not blocks:
                continue
            marker = f"{number}. " if ordered else "- "
            number += 1
            body = "\n".join(blocks)
            indent = " " * len(marker)
            lines = body.split("\n")
            items.append(
                marker + lines[0] + "".join("\n" + (indent + ln if ln else ln) for ln in lines[1:])
            )
        if items:
            self.blocks.append("\n".join(items))

    def child_blocks_of(self, element: etree._Element) -> list[str]:
        writer = _Writer(self.base_url, self.seen_alts, links=self.links)
        writer.node(element)
        writer.flush()
        return writer.blocks

    def code_block(self, element: etree._Element) -> None:
        text = _nfc(_pre_text(element).strip("\n").rstrip())
        if not text.strip():
            return
        fence = "```"
        seen = _strip_invisible(text)
        while fence in seen:
            fence += "`"
        self.blocks.append(f"{fence}{_code_language(element)}\n{text}\n{fence}")

    def table(self, element: etree._Element) -> None:
        grid = self.table_grid(element)
        width = max((len(r) for r in grid), default=0) if grid is not None else 0
        if grid is None or width < 2 or len(grid) * width > MAX_TABLE_CELLS:
            # A table used for layout, a single column, or one whose spans would make more
            # cells than the bound: its cells are ordinary blocks.
            self.children(element)
            self.flush()
            return
        lines = []
        for index, cells in enumerate(grid):
            padded = cells + [""] * (width - len(cells))
            lines.append("| " + " | ".join(padded) + " |")
            if index == 0:
                lines.append("|" + " --- |" * width)
        self.blocks.append("\n".join(lines))

    def table_grid(self, element: etree._Element) -> list[list[str]] | None:
        """The table's rows with each cell under its column, or None for a layout table
        (a cell holding blocks) or one of more than MAX_TABLE_CELLS cells.

        A cell spanning rows is repeated in each of them (a row of a pipe table is read on
        its own: its key must be in it); a cell spanning columns stands in the first and
        leaves the others empty.
        """
        rows = _rows(element)
        # The shape is checked first, without the cells' text: a table that turns out to be
        # a layout or too large costs no writing of cells that are then written again as
        # blocks (and leaves no picture marked as written). A table without a block, a
        # span or more cells than the bound inside (most data tables) needs no check.
        if _plain_table(element):
            # No span to place and no cell holding a block (nor more cells than the bound):
            # each row is its cells' texts in order, what `_grid` makes of it, without its
            # bookkeeping of columns and spans for every cell.
            grid = [[self.cell_text(cell) for cell in row if cell.tag in _CELLS] for row in rows]
            return [line for line in grid if any(line)]
        if self._grid(rows, write=False) is None:
            return None
        return self._grid(rows, write=True)

    def cell_text(self, cell: etree._Element) -> str:
        """A cell's text as a pipe table holds it: on one line, its pipes escaped."""
        return _escape_pipes(self.inline_text(cell).replace("\n", " "))

    def _grid(self, rows: list[etree._Element], *, write: bool) -> list[list[str]] | None:
        grid: list[list[str]] = []
        # Columns taken by a cell of an earlier row: column -> (text, rows still to take).
        carried: dict[int, tuple[str, int]] = {}
        total = 0
        for row_index, row in enumerate(rows):
            line: list[str] = []
            spans: dict[int, tuple[str, int]] = {}
            for cell in row:
                if cell.tag not in _CELLS:
                    continue
                if len(cell) and next(cell.iter(*_BLOCK_CONTENT), None) is not None:
                    # (A cell without children, most of them, holds no block.)
                    return None
                while len(line) in carried:
                    line.append(carried[len(line)][0])
                text = self.cell_text(cell) if write else ""
                colspan = cell.get("colspan")
                rowspan = cell.get("rowspan")
                columns = 1 if colspan is None else _span(colspan, MAX_COLSPAN) or 1
                down = 1 if rowspan is None else _span(rowspan, MAX_ROWSPAN)
                if down == 0:
                    down = len(rows) - row_index  # 0: to the end of the table
                # The cells placed so far, this row's included, each counted once (a
                # table of MAX_TABLE_CELLS cells is a table, not half of one).
                if total + len(line) + columns > MAX_TABLE_CELLS:
                    return None
                for offset in range(columns):
                    if down > 1:
                        spans[len(line)] = (text if offset == 0 else "", down - 1)
                    line.append(text if offset == 0 else "")
            if carried:
                for column in sorted(c for c in carried if c >= len(line)):
                    line.extend([""] * (column - len(line)))
                    line.append(carried[column][0])
            total += len(line)
            if total > MAX_TABLE_CELLS:
                return None
            carried = {c: (t, n - 1) for c, (t, n) in carried.items() if n > 1}
            carried.update(spans)
            if any(line):
                grid.append(line)
        return grid


# --- Escaping: only the Markdown rypsok writes is Markdown ---------------------------------
#
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


def _is_invisible(ch: str) -> bool:
    """Whether the content boundary removes this character (REQ-SEC-015)."""
    code = ord(ch)
    index = bisect.bisect_right(_INVISIBLE_STARTS, code) - 1
    return index >= 0 and code <= INVISIBLE_RANGES[index][1]


_INVISIBLE_STARTS: Final = tuple(low for low, _ in INVISIBLE_RANGES)


def _nfc(text: str) -> str:
    if text.isascii() or unicodedata.is_normalized("NFC", text):
        return text
    return unicodedata.normalize("NFC", text)


def _visible_neighbour(text: str, index: int, step: int) -> str:
    """The nearest character to `text[index]` in direction `step` that will be seen."""
    index += step
    while 0 <= index < len(text):
        if not _is_invisible(text[index]):
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
        following = _strip_invisible(match.string[match.end() : match.end() + 64])
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
    return _ESCAPE_ANYWHERE.sub(_escape_match, text if text.isascii() else _nfc(text))


def _nth_visible(line: str, start: int, n: int) -> int:
    """The position in `line` of its `n`-th visible character from `start` (0-based)."""
    for index in range(start, len(line)):
        if not _is_invisible(line[index]):
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
    while first < len(line) and (line[first].isspace() or _is_invisible(line[first])):
        first += 1
    if first == len(line) or line[first].isalpha():
        # (A visible letter first starts no block: most lines, decided without a copy.)
        return line
    # The first characters decide, looked at as the agent will see them.
    seen = _strip_invisible(line[first : first + 80])
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
        line = _escape_pipes(line)
    return line


def _only(line: str, start: int, chars: str) -> bool:
    """Whether `line` from `start` holds only `chars`, white space and invisible characters
    (stopping at the first other character, which ordinary text has at once)."""
    return all(c in chars or c.isspace() or _is_invisible(c) for c in line[start:])


def _escape_closing_hashes(heading: str) -> str:
    """A heading's text with a trailing run of `#` after a space (or alone) escaped: it
    would be read as the heading's closing sequence and dropped."""
    end = len(heading)
    while end and _is_invisible(heading[end - 1]):
        end -= 1
    start = end
    while start and (heading[start - 1] == "#" or _is_invisible(heading[start - 1])):
        start -= 1
    run = heading.find("#", start, end)
    if run == -1:
        return heading
    before = _visible_neighbour(heading, run, -1)
    if before and not before.isspace():
        return heading
    return heading[:run] + "\\" + heading[run:]


def _strip_invisible(text: str) -> str:
    """`text` as the agent will see it, after the content boundary."""
    if text.isascii() and text.isprintable():
        return text  # printable ASCII holds nothing the boundary removes
    return remove_invisible(text)[0]


# A pipe with no backslash escaping it (an even run of backslashes before it).
_BARE_PIPE: Final = re.compile(r"(?<!\\)((?:\\\\)*)\|")


def _escape_pipes(text: str) -> str:
    if "|" not in text:
        return text  # most cells
    return _BARE_PIPE.sub(lambda m: m.group(1) + "\\|", text)


def _code_span(text: str) -> str:
    """`text` as an inline code span, its fence longer than any backtick run inside."""
    seen = _strip_invisible(text)
    runs = re.findall(r"`+", seen)
    fence = "`" * (max((len(r) for r in runs), default=0) + 1)
    if seen.startswith("`") or seen.endswith("`"):
        # A space on each side is taken off again by the reader, and keeps the fence apart.
        return f"{fence} {text} {fence}"
    return f"{fence}{text}{fence}"


# What a page's spans may ask for: HTML's own limits on colspan and rowspan, and a bound on
# the cells of one table once its spans are spread out (a page of 100 000 nodes can hold no
# more cells of its own; only spans can ask for more).
MAX_COLSPAN: Final = 1000
MAX_ROWSPAN: Final = 65534
MAX_TABLE_CELLS: Final = 100_000
_SPAN_VALUE: Final = re.compile(r"[\t\n\f\r ]*\+?([0-9]+)")


def _span(value: str | None, limit: int) -> int:
    """A colspan or rowspan as HTML reads it (leading digits; 1 when there are none),
    clamped to `limit`."""
    match = _SPAN_VALUE.match(value or "")
    if match is None:
        return 1
    digits = match.group(1).lstrip("0")
    if len(digits) > len(str(limit)):
        return limit
    return min(int(digits or "0"), limit)


_LANGUAGE: Final = re.compile(r"(?:^|\s)(?:language|lang)-([A-Za-z0-9_+#.-]{1,32})(?:\s|$)")


def _pre_text(element: etree._Element) -> str:
    """The text of a preformatted block as written, a ``<br>`` being a line end."""
    parts: list[str] = []
    for event, node in etree.iterwalk(element, events=("start", "end")):
        if event == "start":
            if node.tag == "br":
                parts.append("\n")
            text = node.text
            if text:
                parts.append(text)
        elif node is not element:
            tail = node.tail
            if tail:
                parts.append(tail)
    return "".join(parts).replace(_BREAK, "")


def _code_language(element: etree._Element) -> str:
    """The language a code block names in its class (``language-rust``), for the fence."""
    for node in (element, *element.iterchildren("code")):
        match = _LANGUAGE.search(node.get("class", ""))
        if match is not None:
            return match.group(1)
    return ""


_NOT_ALNUM: Final = re.compile(r"[\W_]+")
# An alternative text that is a file name of its own ("IMG_3886.jpg", "performance.png"):
# one word ending in an image format's extension, whatever file the image shows now (a
# lazy-loaded or resized copy has another name than the one the author uploaded).
_FILE_NAME: Final = re.compile(
    r"[^\s/]+\.(?:jpe?g|png|gif|webp|avif|bmp|svg|tiff?|heic|ico)", re.IGNORECASE
)


def _names_the_file(alt: str, src: str | None) -> bool:
    """Whether an alternative text is only a file name (the image's own, or any image
    file's: a publishing tool's default), which describes nothing."""
    if _FILE_NAME.fullmatch(alt) is not None:
        return True
    if not src:
        return False
    stem = src.split("?", 1)[0].split("#", 1)[0].rsplit("/", 1)[-1].rsplit(".", 1)[0]
    key = _NOT_ALNUM.sub("", alt.lower())
    return bool(key) and key in _NOT_ALNUM.sub("", stem.lower())


def _spaced_ends(element: etree._Element) -> tuple[bool, bool]:
    """Whether the text inside `element` starts, and ends, with white space."""
    whole = "".join(element.itertext())
    return whole[:1].isspace(), whole[-1:].isspace()


def _has_block_child(element: etree._Element) -> bool:
    return any(child.tag in BLOCK_ELEMENTS for child in element)


def _plain_table(table: etree._Element) -> bool:
    """Whether `table` holds no block (no cell of it can be a layout's), no spanning cell,
    and no more cells than MAX_TABLE_CELLS, however nested: its grid is then a table."""
    if next(table.iterdescendants(*_BLOCK_CONTENT), None) is not None:
        return False
    spans = table.xpath("count(.//*[self::td or self::th][@colspan or @rowspan])")
    return bool(spans == 0 and table.xpath("count(.//td | .//th)") <= MAX_TABLE_CELLS)


def _rows(table: etree._Element) -> list[etree._Element]:
    """The table's own rows, directly or in its row groups (not those of a nested table)."""
    rows: list[etree._Element] = []
    for child in table:
        if child.tag == "tr":
            rows.append(child)
        elif child.tag in ("thead", "tbody", "tfoot"):
            rows.extend(row for row in child if row.tag == "tr")
    return rows


def render_markdown(elements: Sequence[etree._Element], base_url: str) -> str:
    """The Markdown of `elements`, in order, blocks separated by a blank line."""
    writer = _Writer(base_url)
    for element in elements:
        writer.node(element)
    writer.flush()
    text = "\n\n".join(writer.blocks)
    # Blocks are stripped and joined by one blank line; code keeps its own blank lines.
    return text.strip()
