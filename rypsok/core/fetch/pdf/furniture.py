"""Running headers, footers and page numbers, found and removed (REQ-PDF-005).

A page's furniture is text in its top or bottom margin that is not part of its reading: the
first or last lines of a page, within the outer sixth of its height, whose text (digits
read as one placeholder, so "Page 3 of 9" matches "Page 4 of 9") recurs in the same margin
on several pages (at least two, and a quarter of the pages or three: a book's even and odd
pages carry different heads, and its chapters their own), a page's first line set apart as
a running head is (see `_apart`), and a lone page number (digits, roman numerals, "Page 3",
"3 of 9", "- 3 -") in a margin on any page.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from rypsok.core.fetch.pdf.lines import Line

__all__ = ["remove_furniture"]

_MARGIN: Final = 1 / 6  # share of the page's height at the top and bottom searched
_EDGE_LINES: Final = 2  # lines at each edge of a page that may be furniture
_RECUR: Final = 0.25  # share of the pages a header must recur on
_DIGITS: Final = re.compile(r"\d+")
_PAGE_NUMBER: Final = re.compile(
    r"(?:page|p\.|seite|pagina|página)?\s*[-–—]?\s*(?:\d{1,5}|[ivxlcdm]{1,8})\s*[-–—]?"
    r"(?:\s*(?:of|/|von|de)\s*\d{1,5})?",
    re.IGNORECASE,
)


def _key(line: Line) -> str:
    return _DIGITS.sub("#", " ".join(line.text.lower().split()))


def _edges(lines: list[Line], height: float) -> list[tuple[str, Line]]:
    """The lines at a page's edges that lie within its margins, with their margin's name."""
    top = [line for line in lines[:_EDGE_LINES] if line.bottom < _MARGIN * height]
    bottom = [
        line
        for line in lines[-_EDGE_LINES:]
        if line.top > (1 - _MARGIN) * height and line not in top
    ]
    return [("top", line) for line in top] + [("bottom", line) for line in bottom]


def _apart(line: Line, lines: list[Line]) -> bool:
    """Whether `line` is a page's first, set apart from the text below as a running head is.

    It is no larger or bolder than the page's text and more than two of its sizes above the
    next line, which is the page's text (so a document of one page loses its head too).
    """
    if len(lines) < 4 or line is not lines[0] or line.bold:
        return False
    sizes = sorted(other.size for other in lines)
    if line.size > 1.05 * sizes[len(sizes) // 2]:
        return False
    return lines[1].top - line.bottom > 2.0 * line.size


def remove_furniture(pages: list[list[Line]], heights: list[float]) -> list[list[Line]]:
    """Each page's lines (top to bottom) without its running headers, footers and page numbers."""
    edges = [_edges(page, h) for page, h in zip(pages, heights, strict=True)]
    seen: dict[tuple[str, str], set[int]] = defaultdict(set)
    for index, page_edges in enumerate(edges):
        for zone, line in page_edges:
            seen[zone, _key(line)].add(index)
    with_text = sum(1 for lines in pages if lines)
    # (A long document's heads change with its chapters: three pages are enough there.)
    need = max(2, min(3, int(_RECUR * with_text + 0.999)))
    out = []
    for page_lines, page_edges in zip(pages, edges, strict=True):
        drop: list[Line] = []
        for zone, line in page_edges:
            # A page whose every line is at its edges has no text to tell furniture from.
            recurs = (
                with_text >= 2
                and len(page_lines) > len(page_edges)
                and len(seen[zone, _key(line)]) >= need
            )
            if recurs or _PAGE_NUMBER.fullmatch(line.text.strip()) or _apart(line, page_lines):
                drop.append(line)
        out.append([line for line in page_lines if line not in drop] if drop else page_lines)
    return out
