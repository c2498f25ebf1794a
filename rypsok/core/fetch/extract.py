"""Main-content extraction of a fetched document (REQ-FETCH-002, REQ-PAGE-002, REQ-PAGE-006).

`extract_document` is the one entry point: a pure, synchronous function the fetch pipeline
runs in a worker thread under the parsing limiter (LIM-C5). It takes the decoded document,
its kind, the page's URL and the bounds (LIM-F10, LIM-F11), and returns an `Extraction`; it
never raises, whatever the input.

For HTML and XHTML (both read by the HTML parser, which forgives what an XML parser would
refuse): the bounded parse (parse.py) leaves out what a reader never sees; here the page's
chrome is removed (navigation, headers, footers, sidebars, forms, and blocks whose role, class
or id names them as such), the main block is chosen by scoring the text under each
container (mainblock.py), and the block is written as Markdown (markdown.py). Plain text and
Markdown pass through, normalised.

Memory: the pipeline hands the decoded text over in a `DocumentText`, which the
parse empties, so the text is freed once the tree is built rather than kept through the main
block and the writer (20 MiB of a 5 MiB page with a character beyond U+FFFF); and between the
stages (parse, main block, writer) a parse whose call has been abandoned stops, its tree and
its permit let go, rather than running the stages left for no one.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import TYPE_CHECKING, Final

import attrs

from rypsok.core.fetch.mainblock import select_main_block
from rypsok.core.fetch.markdown import render_markdown
from rypsok.core.fetch.markdown.links import absolute_http_url
from rypsok.core.fetch.parse import parse_html, stop_if_abandoned

if TYPE_CHECKING:
    from lxml import etree

__all__ = [
    "DocumentKind",
    "DocumentText",
    "Extraction",
    "ExtractionOutcome",
    "extract_document",
    "normalise_text",
]


class DocumentKind(StrEnum):
    """The media types web_fetch extracts (REQ-FETCH-008)."""

    HTML = "html"
    XHTML = "xhtml"
    PLAIN = "plain"
    MARKDOWN = "markdown"


class DocumentText:
    """A decoded document, handed over once: `take` returns the text and keeps none of it,
    so that the caller's frames (the pipeline, the extraction step) do not keep it alive
    while the tree is read."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    def take(self) -> str:
        text, self._text = self._text, ""
        return text


def _text_of(document: str | bytes | DocumentText) -> str | bytes:
    return document.take() if isinstance(document, DocumentText) else document


class ExtractionOutcome(StrEnum):
    OK = "ok"
    # Nothing readable was found: the call ends with unsupported_content, extraction_failed.
    NOTHING = "nothing"


@attrs.frozen(kw_only=True)
class Extraction:
    """What extraction made of one document.

    `title` is the document's own title as decoded (not yet cleaned nor bounded: the pipeline
    passes it through the content boundary), None when the document has none. `content` is
    the main content as Markdown ("" when `outcome` is NOTHING). `partial` is True when a
    bound (LIM-F10, LIM-F11) stopped the parse or the document was malformed: the pipeline
    adds the extraction_partial notice. `nodes` and `depth` are what the parse counted.
    """

    outcome: ExtractionOutcome
    title: str | None
    content: str
    partial: bool
    nodes: int = 0
    depth: int = 0


_LINE_END: Final = re.compile(r"\r\n?")
_TRAILING_SPACE: Final = re.compile(r"[ \t]+\n")
_BLANK_LINES: Final = re.compile(r"\n{3,}")
_NUL: Final = "\x00"
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_TITLE_SPACE: Final = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    """Plain text or Markdown as returned: one line-end form, no trailing spaces on a line,
    at most one blank line in a row, no NUL, no blank start or end."""
    text = _SURROGATE.sub("\ufffd", _LINE_END.sub("\n", text).replace(_NUL, ""))
    text = _TRAILING_SPACE.sub("\n", text)
    return _BLANK_LINES.sub("\n\n", text).strip()


def _markdown_title(text: str) -> str | None:
    """The first ATX heading of a Markdown document, as its title."""
    for line in text.split("\n", 200)[:200]:
        stripped = line.strip()
        if stripped.startswith("# "):
            return stripped[2:].strip().rstrip("#").strip() or None
    return None


def _nothing(
    *, partial: bool, title: str | None = None, nodes: int = 0, depth: int = 0
) -> Extraction:
    return Extraction(
        outcome=ExtractionOutcome.NOTHING,
        title=title,
        content="",
        partial=partial,
        nodes=nodes,
        depth=depth,
    )


def _plain_text(elements: tuple[etree._Element, ...]) -> str:
    parts = (" ".join(" ".join(element.itertext()).split()) for element in elements)
    return "\n\n".join(part for part in parts if part)


def _pick_title(og_title: str | None, title: str | None, heading: str | None) -> str | None:
    for candidate in (og_title, title, heading):
        if candidate is not None:
            text = _TITLE_SPACE.sub(" ", candidate).strip()
            if text:
                return text
    return None


def _extract_html(
    document: str | bytes | DocumentText,
    base_url: str,
    *,
    max_nodes: int,
    max_depth: int,
    encoding: str | None,
) -> Extraction:
    # The text goes straight into the parse: no frame here holds it once the tree is built.
    parsed = parse_html(
        _text_of(document), max_nodes=max_nodes, max_depth=max_depth, encoding=encoding
    )
    del document
    partial = parsed.bound_hit or parsed.malformed
    if parsed.root is None:
        return _nothing(
            partial=partial,
            title=_pick_title(parsed.og_title, parsed.title, None),
            nodes=parsed.nodes,
            depth=parsed.depth,
        )
    if parsed.base_href is not None:
        # Links resolve against the document's <base>, as in a browser, when it is http(s).
        base_url = absolute_http_url(base_url, parsed.base_href) or base_url
    # Between the stages, a parse whose call has ended stops (trio.Cancelled, which the
    # `except Exception` below does not catch): the tree is freed and the permit returned
    # now, not after a main block and a writer no one will read.
    stop_if_abandoned()
    main = select_main_block(parsed.root)
    stop_if_abandoned()
    try:
        content = render_markdown(main.elements, base_url)
    except RecursionError:
        # The writer recurses once per level of the tree, which LIM-F11 bounds; should a
        # caller's bound exceed what the interpreter allows, the text still comes back.
        content = _plain_text(main.elements)
        partial = True
    title = _pick_title(parsed.og_title, parsed.title, main.heading)
    if not content:
        return _nothing(partial=partial, title=title, nodes=parsed.nodes, depth=parsed.depth)
    return Extraction(
        outcome=ExtractionOutcome.OK,
        title=title,
        content=content,
        partial=partial,
        nodes=parsed.nodes,
        depth=parsed.depth,
    )


def extract_document(
    document: str | bytes | DocumentText,
    kind: DocumentKind,
    base_url: str,
    *,
    max_nodes: int,
    max_depth: int,
    encoding: str | None = None,
) -> Extraction:
    """Extract the title and the main content of `document`; never raises.

    `document` is the decoded text (str, or a `DocumentText` the parse empties) or, with
    `encoding`, the raw bytes. `base_url` is the
    URL fetched, against which links are made absolute. `max_nodes` and `max_depth` are
    LIM-F10 and LIM-F11, enforced while parsing.
    """
    try:
        if kind in (DocumentKind.PLAIN, DocumentKind.MARKDOWN):
            document = _text_of(document)
            if isinstance(document, bytes):
                document = document.decode(encoding or "utf-8", errors="replace")
            text = normalise_text(document)
            title = _markdown_title(text) if kind == DocumentKind.MARKDOWN else None
            if not text:
                return _nothing(partial=False)
            return Extraction(
                outcome=ExtractionOutcome.OK, title=title, content=text, partial=False
            )
        return _extract_html(
            document, base_url, max_nodes=max_nodes, max_depth=max_depth, encoding=encoding
        )
    except Exception:  # no document may fail the call with anything else
        return _nothing(partial=True)
