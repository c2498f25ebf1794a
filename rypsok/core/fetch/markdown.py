"""Markdown from the main block of a parsed page (REQ-FETCH-004).

The writer renders structure an agent can use and nothing made for the eye (REQ-CTX-008):
headings as ``#``, lists as ``-`` or ``1.``, tables as pipe tables, preformatted text as
fenced code, quotes as ``>``, links as ``[text](url)`` with the URL made absolute against the
page's URL. A link whose scheme is not http or https (javascript:, data:, mailto:…) keeps
only its text, and an image becomes its alternative text. Emphasis and layout are dropped.

The tree is at most LIM-F11 deep, so the recursion here is bounded by the parse.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final
from urllib.parse import urljoin, urlsplit

from lxml import etree

if TYPE_CHECKING:
    from collections.abc import Sequence


__all__ = ["absolute_http_url", "render_markdown"]

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
_SPACE: Final = re.compile(r"\s+")
# Marks a hard line break inside inline text until the whitespace is collapsed; NUL never
# survives the parser (libxml2 replaces it), and text nodes are scrubbed of it anyway.
_BREAK: Final = "\x00"
_BLANK_LINES: Final = re.compile(r"\n{3,}")
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


def _collapse(text: str) -> str:
    return _SPACE.sub(" ", text)


def _finish_inline(parts: list[str]) -> str:
    text = _collapse("".join(parts))
    if _BREAK in text:
        text = "\n".join(line.strip() for line in text.split(_BREAK))
        # Line breaks in a row are at most one blank line.
        text = _BLANK_LINES.sub("\n\n", text)
    return text.strip()


class _Writer:
    def __init__(
        self, base_url: str, seen_alts: set[str] | None = None, *, inline_only: bool = False
    ) -> None:
        self.base_url = base_url
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
        writer = _Writer(self.base_url, self.seen_alts)
        writer.children(element)
        writer.flush()
        return writer.blocks

    def children(self, element: etree._Element) -> None:
        if element.text:
            self.text(element.text)
        for child in element:
            self.node(child)
            if child.tail:
                self.text(child.tail)

    def text(self, text: str) -> None:
        self.inline.append(text.replace(_BREAK, ""))

    def node(self, element: etree._Element) -> None:
        tag = element.tag
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
                self.blocks.append("#" * level + " " + text.replace("\n", " "))
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
        writer = _Writer(self.base_url, self.seen_alts, inline_only=True)
        writer.children(element)
        # Block content inside an inline context (a div in a heading) is joined by spaces.
        writer.flush()
        return " ".join(writer.blocks)

    def inline_node(self, element: etree._Element, tag: str) -> None:
        if tag == "br":
            self.inline.append(_BREAK)
            return
        if tag == "img":
            alt = " ".join(element.get("alt", "").split())
            if alt and alt not in self.seen_alts and not _names_the_file(alt, element.get("src")):
                self.seen_alts.add(alt)
                self.inline.append(" " + alt + " ")
            return
        if tag == "a":
            text = self.inline_text(element)
            if not text:
                return
            href = element.get("href")
            # A link within the page (an anchor, a table of contents) is only its text.
            url = (
                absolute_http_url(self.base_url, href)
                if href is not None and not href.strip().startswith("#")
                else None
            )
            if url is None:
                self.inline.append(text)
            else:
                label = text.replace("\n", " ").replace("[", "\\[").replace("]", "\\]")
                self.inline.append(f"[{label}]({url})")
            return
        if tag == "code" and not _has_block_child(element):
            text = _collapse(element.xpath("string()")).strip()
            if text:
                fence = "``" if "`" in text else "`"
                self.inline.append(f"{fence}{text}{fence}")
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
        writer = _Writer(self.base_url, self.seen_alts)
        writer.node(element)
        writer.flush()
        return writer.blocks

    def code_block(self, element: etree._Element) -> None:
        text = _pre_text(element).strip("\n").rstrip()
        if not text.strip():
            return
        fence = "```"
        while fence in text:
            fence += "`"
        self.blocks.append(f"{fence}{_code_language(element)}\n{text}\n{fence}")

    def table(self, element: etree._Element) -> None:
        rows: list[list[str]] = []
        layout = False
        for row in _rows(element):
            cells: list[str] = []
            for cell in row:
                if cell.tag not in ("td", "th"):
                    continue
                if next(cell.iter(*_BLOCK_CONTENT), None) is not None:
                    layout = True
                    break
                cells.append(self.inline_text(cell).replace("\n", " ").replace("|", "\\|"))
            if layout:
                break
            if any(cells):
                rows.append(cells)
        width = max((len(r) for r in rows), default=0)
        if layout or width < 2:
            # A table used for layout, or a single column: its cells are ordinary blocks.
            self.children(element)
            self.flush()
            return
        lines = []
        for index, cells in enumerate(rows):
            padded = cells + [""] * (width - len(cells))
            lines.append("| " + " | ".join(padded) + " |")
            if index == 0:
                lines.append("|" + " --- |" * width)
        self.blocks.append("\n".join(lines))


_LANGUAGE: Final = re.compile(r"(?:^|\s)(?:language|lang)-([A-Za-z0-9_+#.-]{1,32})(?:\s|$)")


def _pre_text(element: etree._Element) -> str:
    """The text of a preformatted block as written, a ``<br>`` being a line end."""
    parts: list[str] = []
    for event, node in etree.iterwalk(element, events=("start", "end")):
        if event == "start":
            if node.tag == "br":
                parts.append("\n")
            if node.text:
                parts.append(node.text)
        elif node is not element and node.tail:
            parts.append(node.tail)
    return "".join(parts).replace(_BREAK, "")


def _code_language(element: etree._Element) -> str:
    """The language a code block names in its class (``language-rust``), for the fence."""
    for node in (element, *element.iterchildren("code")):
        match = _LANGUAGE.search(node.get("class", ""))
        if match is not None:
            return match.group(1)
    return ""


_NOT_ALNUM: Final = re.compile(r"[\W_]+")


def _names_the_file(alt: str, src: str | None) -> bool:
    """Whether an alternative text is only the image's file name (a publishing tool's
    default), which describes nothing."""
    if not src:
        return False
    stem = src.split("?", 1)[0].split("#", 1)[0].rsplit("/", 1)[-1].rsplit(".", 1)[0]
    key = _NOT_ALNUM.sub("", alt.lower())
    return bool(key) and key in _NOT_ALNUM.sub("", stem.lower())


def _has_block_child(element: etree._Element) -> bool:
    return any(child.tag in BLOCK_ELEMENTS for child in element)


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
