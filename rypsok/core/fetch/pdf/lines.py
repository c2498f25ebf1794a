"""Segments grouped into lines, the unit the rest of the layout analysis works on (REQ-PDF-001).

Two segments are on one line when their boxes share most of their height. Within a line,
segments closer than a gap of about an em are one cell; a wider gap separates cells, which
the table finder reads as columns.
"""

from __future__ import annotations

import itertools
import operator
import re
from typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Iterable

    from rypsok.core.fetch.pdf.chars import Segment


__all__ = ["CELL_GAP", "Line", "cells_of", "group_lines", "join_pieces", "line_of", "text_of"]

CELL_GAP: Final = 0.9  # ems of gap between segments that separate cells of a line
_LETTER: Final = re.compile(r"[^\W\d_]")
_WORD_GAP: Final = 0.12  # ems of gap between segments that separate words
_X0: Final = operator.attrgetter("x0")


class Line(NamedTuple):
    """One line of text: its segments left to right, their union box, size, weight and text.

    `line_of` builds one from its segments; `cells` is what `cells_of` finds. A named tuple,
    as `Segment` is: one per line of every page.
    """

    segments: tuple[Segment, ...]
    x0: float
    x1: float
    top: float
    bottom: float
    size: float  # the size of most of the line's characters
    bold: bool  # all its segments holding letters (or all, without letters) are bold
    text: str  # the segments' texts, a space between two that stand apart
    cells: tuple[tuple[Segment, ...], ...]

    @property
    def page(self) -> int:
        return self.segments[0].page


def text_of(segments: tuple[Segment, ...]) -> str:
    """The texts of a line's `segments`, a space between two that stand apart (not within a
    word: a browser may write a word's letters apart)."""
    if len(segments) == 1:
        only = segments[0].text
        if "\n" in only or "\r" in only:
            return join_pieces([only])
        return " ".join(only.split()) if "  " in only else only.strip()  # join_pieces' end
    out = segments[0].text
    for before, seg in itertools.pairwise(segments):
        if seg.x0 - before.x1 > _WORD_GAP * max(seg.size, before.size):
            out = join_pieces([out, seg.text])
        else:
            out += seg.text
    return join_pieces([out])


def cells_of(segments: tuple[Segment, ...]) -> tuple[tuple[Segment, ...], ...]:
    """A line's `segments` in groups separated by gaps wider than CELL_GAP ems."""
    groups: list[list[Segment]] = [[segments[0]]]
    for prev, seg in itertools.pairwise(segments):
        if seg.x0 - prev.x1 > CELL_GAP * max(seg.size, prev.size):
            groups.append([seg])
        else:
            groups[-1].append(seg)
    return tuple(tuple(group) for group in groups)


def line_of(segments: Iterable[Segment]) -> Line:
    """The line made of `segments` (at least one)."""
    ordered = tuple(sorted(segments, key=_X0))
    first = ordered[0]
    if len(ordered) == 1:
        return Line(
            segments=ordered,
            x0=first.x0,
            x1=first.x1,
            top=first.top,
            bottom=first.bottom,
            size=first.size,
            bold=first.bold,
            text=text_of(ordered),
            cells=(ordered,),
        )
    # One pass for the union box, the longest segment's size and the weight (ties keep the
    # first segment, as max and min do).
    x1, top, bottom = first.x1, first.top, first.bottom
    longest, size = len(first.text), first.size
    bold_letters = has_letters = False
    bold_all = True
    for seg in ordered:
        if seg.x1 > x1:
            x1 = seg.x1
        if seg.top < top:
            top = seg.top
        if seg.bottom > bottom:
            bottom = seg.bottom
        if len(seg.text) > longest:
            longest, size = len(seg.text), seg.size
        bold_all = bold_all and seg.bold
        if _LETTER.search(seg.text):
            bold_letters = seg.bold if not has_letters else bold_letters and seg.bold
            has_letters = True
    return Line(
        segments=ordered,
        x0=first.x0,
        x1=x1,
        top=top,
        bottom=bottom,
        size=size,
        bold=bold_letters if has_letters else bold_all,
        text=text_of(ordered),
        cells=cells_of(ordered),
    )


def join_pieces(pieces: Iterable[str]) -> str:
    """Texts of neighbouring segments joined with one space where neither has one."""
    out = ""
    for piece in pieces:
        text = (
            piece.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
            if "\n" in piece or "\r" in piece
            else piece
        )
        if out and not out[-1].isspace() and text and not text[0].isspace():
            out += " "
        out += text
    return " ".join(out.split()) if "  " in out else out.strip()


def group_lines(segments: list[Segment]) -> list[Line]:
    """`segments` grouped into lines, top to bottom, each line's segments left to right.

    A segment joins a line (one of the last three begun) whose first segment's box shares
    more than half of the smaller height with its own; a superscript or a footnote mark joins
    its line too.
    """
    ordered = sorted(segments, key=lambda s: s.top + s.bottom)
    rows: list[list[Segment]] = []
    spans: list[tuple[float, float, float]] = []  # each row's first top, bottom and height
    count = 0  # len(rows)
    for seg in ordered:
        top, bottom = seg.top, seg.bottom
        height = bottom - top
        for index in range(count - 1, count - 4 if count > 3 else -1, -1):
            span_top, span_bottom, span_height = spans[index]
            overlap = (span_bottom if span_bottom <= bottom else bottom) - (
                top if top > span_top else span_top
            )
            if overlap > 0.5 * (span_height if span_height < height else height):
                # The row keeps its first segment's box: grown, it would reach the next line
                # of a column whose lines sit between another column's.
                rows[index].append(seg)
                break
        else:
            rows.append([seg])
            spans.append((top, bottom, height))
            count += 1
    return [line_of(row) for row in rows]
