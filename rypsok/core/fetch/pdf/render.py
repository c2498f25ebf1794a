"""A read PDF written as Markdown (REQ-PDF-008, REQ-PDF-009).

Headings as ``#`` to ``######``, paragraphs, list items as ``-`` or ``N.`` (nested ones
indented), tables as pipe tables (the first row as the header), and each page's footnotes
after that page's text. A run with a link target becomes ``[text](target)`` when
`judge_link` returns a URL for the target; when it returns None the text stays and the link
goes. The document's own text is escaped where it could start Markdown, as a page's text is
(so the only Markdown in the answer is what this writer writes); the parent cleans the
result at the same boundary as a page's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from rypsok.core.fetch.markdown.escape import escape_line_start, escape_text

if TYPE_CHECKING:
    from collections.abc import Callable

    from rypsok.core.fetch.pdf.model import PdfBlock, PdfText

__all__ = ["RenderedPdf", "render_markdown"]


@attrs.frozen
class RenderedPdf:
    """The document's title (metadata, else first heading) and its Markdown."""

    title: str | None
    markdown: str


def _inline(block: PdfBlock, judge_link: Callable[[str], str | None]) -> str:
    parts = []
    for run in block.runs:
        text = escape_text(run.text)
        target = judge_link(run.link) if run.link is not None else None
        if target is not None and text.strip():
            target = target.replace("(", "%28").replace(")", "%29").replace(" ", "%20")
            parts.append(f"[{text.strip()}]({target})")
            if text.endswith(" "):
                parts.append(" ")
        else:
            parts.append(text)
    return " ".join("".join(parts).split())


def _cell(text: str) -> str:
    return escape_text(" ".join(text.split())).replace("|", "\\|")


def _table(block: PdfBlock) -> str:
    width = max(len(row) for row in block.rows)
    rows = [[_cell(c) for c in row] + [""] * (width - len(row)) for row in block.rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def _block(block: PdfBlock, judge_link: Callable[[str], str | None]) -> str:
    if block.kind == "table":
        return _table(block)
    text = _inline(block, judge_link)
    if not text:
        return ""
    if block.kind == "heading":
        return "#" * block.level + " " + text
    if block.kind == "list_item":
        marker = f"{block.number}." if block.ordered else "-"
        return "   " * block.level + marker + " " + escape_line_start(text)
    return escape_line_start(text)


def _ordered(doc: PdfText) -> list[PdfBlock]:
    """The blocks with each page's footnotes moved after the text of that page."""
    out: list[PdfBlock] = []
    notes: list[PdfBlock] = []
    page = doc.blocks[0].page if doc.blocks else 0
    for block in doc.blocks:
        if block.page != page and block.kind != "footnote":
            out.extend(notes)
            notes = []
            page = block.page
        (notes if block.kind == "footnote" else out).append(block)
    return out + notes


def render_markdown(doc: PdfText, *, judge_link: Callable[[str], str | None]) -> RenderedPdf:
    """`doc` as Markdown, links judged by `judge_link` (see the module's docstring)."""
    parts: list[str] = []
    previous: PdfBlock | None = None
    for block in _ordered(doc):
        text = _block(block, judge_link)
        if not text:
            continue
        # Items of one list are written without a blank line between them.
        tight = previous is not None and previous.kind == block.kind == "list_item"
        parts.append(("\n" if tight else "\n\n") + text if parts else text)
        previous = block
    return RenderedPdf(title=doc.title, markdown="".join(parts) + ("\n" if parts else ""))
