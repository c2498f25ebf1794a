"""Segments grouped into lines, the unit the rest of the layout analysis works on (REQ-PDF-001).

Two segments are on one line when their boxes share most of their height. Within a line,
segments closer than a gap of about an em are one cell; a wider gap separates cells, which
the table finder reads as columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from rypsok.core.fetch.pdf.chars import Segment

if TYPE_CHECKING:
    from collections.abc import Iterable


__all__ = ["CELL_GAP", "Line", "group_lines", "join_pieces"]

CELL_GAP: Final = 0.9  # ems of gap between segments that separate cells of a line
_WORD_GAP: Final = 0.12  # ems of gap between segments that separate words


@attrs.frozen
class Line:
    """One line of text: its segments left to right and their union box."""

    segments: tuple[Segment, ...]

    @property
    def page(self) -> int:
        return self.segments[0].page

    @property
    def x0(self) -> float:
        return self.segments[0].x0

    @property
    def x1(self) -> float:
        return max(s.x1 for s in self.segments)

    @property
    def top(self) -> float:
        return min(s.top for s in self.segments)

    @property
    def bottom(self) -> float:
        return max(s.bottom for s in self.segments)

    @property
    def size(self) -> float:
        """The size of most of the line's characters."""
        return max(self.segments, key=lambda s: len(s.text)).size

    @property
    def bold(self) -> bool:
        letters = [s for s in self.segments if any(c.isalpha() for c in s.text)]
        return bool(letters) and all(s.bold for s in letters)

    @property
    def text(self) -> str:
        """The segments' texts, a space between two that stand apart (not within a word)."""
        out = self.segments[0].text
        for before, seg in zip(self.segments, self.segments[1:], strict=False):
            if seg.x0 - before.x1 > _WORD_GAP * max(seg.size, before.size):
                out = join_pieces([out, seg.text])
            else:
                out += seg.text
        return join_pieces([out])

    def cells(self) -> list[list[Segment]]:
        """The line's segments in groups separated by gaps wider than CELL_GAP ems."""
        groups: list[list[Segment]] = [[self.segments[0]]]
        for seg in self.segments[1:]:
            prev = groups[-1][-1]
            if seg.x0 - prev.x1 > CELL_GAP * max(seg.size, prev.size):
                groups.append([seg])
            else:
                groups[-1].append(seg)
        return groups


def join_pieces(pieces: Iterable[str]) -> str:
    """Texts of neighbouring segments joined with one space where neither has one."""
    out = ""
    for piece in pieces:
        text = piece.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
        if out and not out[-1].isspace() and text and not text[0].isspace():
            out += " "
        out += text
    return " ".join(out.split()) if "  " in out else out.strip()


def _same_line(a: Segment, b: Segment) -> bool:
    overlap = min(a.bottom, b.bottom) - max(a.top, b.top)
    return overlap > 0.5 * min(a.height, b.height, max(a.size, b.size))


def group_lines(segments: list[Segment]) -> list[Line]:
    """`segments` grouped into lines, top to bottom, each line's segments left to right.

    A segment joins the line it shares most height with; a superscript or a footnote mark
    lower or higher by less than half a line joins its line too.
    """
    ordered = sorted(segments, key=lambda s: (s.top + s.bottom) / 2)
    rows: list[list[Segment]] = []
    for seg in ordered:
        for row in reversed(rows[-3:]):
            if any(_same_line(seg, other) for other in row):
                row.append(seg)
                break
        else:
            rows.append([seg])
    return [Line(segments=tuple(sorted(row, key=lambda s: s.x0))) for row in rows]
