"""The Markdown writer: blocks, inline text, lists, code and tables (REQ-FETCH-004,
REQ-CTX-008).

The tree is at most LIM-F11 deep, so the recursion here is bounded by the parse.
"""

from __future__ import annotations

import re
from typing import Final

from lxml import etree

from rypsok.core.fetch.elements import BLOCK_ELEMENTS
from rypsok.core.fetch.markdown.escape import (
    code_span,
    escape_closing_hashes,
    escape_line_start,
    escape_pipes,
    escape_text,
    is_invisible,
    nfc,
    strip_invisible,
)
from rypsok.core.fetch.markdown.links import LinkTargets
from rypsok.core.fetch.markdown.tables import MAX_TABLE_CELLS, table_grid

__all__ = ["Writer"]

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


class Writer:
    def __init__(
        self,
        base_url: str,
        seen_alts: set[str] | None = None,
        *,
        inline_only: bool = False,
        links: LinkTargets | None = None,
    ) -> None:
        self.base_url = base_url
        self.links = LinkTargets(base_url) if links is None else links
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
        writer = Writer(self.base_url, self.seen_alts, links=self.links)
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
                if not is_invisible(piece[index]) or piece[index] == _BREAK:
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
                text = escape_closing_hashes(text.replace("\n", " "))
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
        writer = Writer(self.base_url, self.seen_alts, inline_only=True, links=self.links)
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
            text = nfc(" ".join(whole.split()))
            if text:
                if whole[:1].isspace():
                    self.inline.append(" ")  # kept outside the span, as for a link
                last = self._last_visible()
                if last is not None and self.inline[last[0]][last[1]] == "`":
                    # Two code spans side by side would read as one fence of both.
                    self.inline.append(" ")
                self.inline.append(code_span(text))
                if whole[-1:].isspace():
                    self.inline.append(" ")
            return
        if not len(element):
            # Text alone (most inline elements: a signature's span, an emphasis): what
            # `children` writes of it, without the walk over no children.
            own = element.text
            if own:
                self.text(own)
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
        writer = Writer(self.base_url, self.seen_alts, links=self.links)
        writer.node(element)
        writer.flush()
        return writer.blocks

    def code_block(self, element: etree._Element) -> None:
        text = nfc(_pre_text(element).strip("\n").rstrip())
        if not text.strip():
            return
        fence = "```"
        seen = strip_invisible(text)
        while fence in seen:
            fence += "`"
        self.blocks.append(f"{fence}{_code_language(element)}\n{text}\n{fence}")

    def table(self, element: etree._Element) -> None:
        grid = table_grid(element, self.cell_text)
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

    def cell_text(self, cell: etree._Element) -> str:
        """A cell's text as a pipe table holds it: on one line, its pipes escaped."""
        return escape_pipes(self.inline_text(cell).replace("\n", " "))


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
