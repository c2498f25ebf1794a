"""Running headers, footers and page numbers, found and removed (REQ-PDF-005).

A page's furniture is text in its top or bottom margin that is not part of its reading: the
first or last lines of a page, within the outer sixth of its height, whose text (digits
read as one placeholder, so "Page 3 of 9" matches "Page 4 of 9") recurs in the same margin
on several pages (at least two, and at least a quarter of the pages: a book's even and odd
pages carry different heads), and a lone page number (digits, roman numerals, "Page 3",
"3 of 9", "- 3 -") in a margin on any page.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING, Final

from rypsok.core.fetch.pdf.lines import group_lines

if TYPE_CHECKING:
    from rypsok.core.fetch.pdf.chars import Segment
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
    out = [("top", line) for line in lines[:_EDGE_LINES] if line.bottom < _MARGIN * height]
    out += [
        ("bottom", line)
        for line in lines[-_EDGE_LINES:]
        if line.top > (1 - _MARGIN) * height and line not in lines[:_EDGE_LINES]
    ]
    return out


def remove_furniture(pages: list[list[Segment]], heights: list[float]) -> list[list[Segment]]:
    """Each page's segments without its running headers, footers and page numbers."""
    edges = [_edges(group_lines(segs), h) for segs, h in zip(pages, heights, strict=True)]
    seen: dict[tuple[str, str], set[int]] = defaultdict(set)
    for index, page_edges in enumerate(edges):
        for zone, line in page_edges:
            seen[zone, _key(line)].add(index)
    with_text = sum(1 for segs in pages if segs)
    need = max(2, int(_RECUR * with_text + 0.999))
    out = []
    for segs, page_edges in zip(pages, edges, strict=True):
        drop: set[int] = set()
        for zone, line in page_edges:
            recurs = with_text >= 2 and len(seen[zone, _key(line)]) >= need
            if recurs or _PAGE_NUMBER.fullmatch(line.text.strip()):
                drop.update(id(s) for s in line.segments)
        out.append([s for s in segs if id(s) not in drop] if drop else segs)
    return out
