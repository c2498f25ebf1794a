"""The reading order of a page: columns read one after the other, top to bottom (REQ-PDF-002).

A page has a gutter when several lines start at one x position in its middle and the text
left of it ends before it: the right column's left edge. Text that crosses the gutter (a
title, an abstract, a figure-wide table) runs across the page and cuts it into bands; within
a band the left column is read before the right one. A band whose two sides are not prose
(short cells side by side) is read row by row instead: that is a table, not two columns.
The right side is searched again, so three columns read in order too.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Final

from rypsok.core.fetch.pdf.lines import Line, line_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from rypsok.core.fetch.pdf.chars import Segment

__all__ = ["page_streams"]

_MIN_COLUMN_LINES: Final = 3
_PROSE_WIDTH: Final = 0.22  # a column's lines are at least this share of the page wide


def page_streams(lines: list[Line], width: float) -> list[list[Line]]:
    """The page's `lines` (top to bottom) as streams, one per column of each band, in order."""
    return _streams(lines, width, depth=0)


def _side(lines: list[Line], keep: Callable[[Segment], bool]) -> list[Line]:
    """The parts of `lines` whose segments `keep` accepts, as lines of their own."""
    out = []
    for line in lines:
        kept = [s for s in line.segments if keep(s)]
        if len(kept) == len(line.segments):
            out.append(line)
        elif kept:
            out.append(line_of(kept))
    return out


def _streams(lines: list[Line], width: float, *, depth: int) -> list[list[Line]]:
    segments = [s for line in lines for s in line.segments]
    gutter = _gutter(segments, width) if depth < 3 else None
    if gutter is None:
        return [lines] if lines else []
    out: list[list[Line]] = []
    for crossing, band in _bands(lines, gutter):
        left = _side(band, lambda s: s.x1 <= gutter)
        right = _side(band, lambda s: s.x0 >= gutter)
        if not crossing and left and right and _prose(left, width) and _prose(right, width):
            out.extend(_streams(left, width, depth=depth + 1))
            out.extend(_streams(right, width, depth=depth + 1))
        elif band:
            out.append(band)
    return out


def _gutter(segments: list[Segment], width: float) -> float | None:
    """The x position of the gutter of the widest-read two-column split, if any."""
    starts = Counter(round(s.x0 / 3) for s in segments if 0.25 * width < s.x0 < 0.8 * width)
    if not starts or max(starts.values()) < _MIN_COLUMN_LINES:
        return None  # (most pages: no x position in the middle starts a column's lines)
    edges: dict[int, float] = {}  # the least x0 of each bucket's segments
    for s in segments:
        bucket = round(s.x0 / 3)
        if bucket not in edges or s.x0 < edges[bucket]:
            edges[bucket] = s.x0
    best: tuple[int, float] | None = None
    for bucket, count in starts.most_common(6):
        if count < _MIN_COLUMN_LINES:
            break
        edge = edges[bucket]
        gutter = edge - 1.0
        crossing = left = 0
        low, high, reach = gutter - 1, gutter + 1, gutter - 0.45 * width
        for s in segments:
            if s.x0 < low and s.x1 > high:
                crossing += 1
            elif reach < s.x1 <= gutter:
                left += 1
        if left < _MIN_COLUMN_LINES or crossing >= min(count, left):
            continue
        if best is None or count - crossing > best[0]:
            best = (count - crossing, gutter)
    return None if best is None else best[1]


def _crosses(seg: Segment, gutter: float) -> bool:
    return seg.x0 < gutter - 1 and seg.x1 > gutter + 1


def _goes_on(before: Line, line: Line) -> bool:
    """Whether `line` is the next line of the same text as `before` (a title's last line)."""
    return (
        line.bold == before.bold
        and abs(line.size - before.size) < 0.5
        and line.top - before.bottom < 0.8 * line.size
    )


def _bands(lines: list[Line], gutter: float) -> list[tuple[bool, list[Line]]]:
    """`lines` cut into vertical bands by the lines that cross the gutter, each marked.

    A line crossing the gutter is a band of its own (consecutive ones make one band, and a
    line that goes on with the text of one, a wide title's short last line, joins it); the
    lines between two such bands make one band.
    """
    bands: list[tuple[bool, list[Line]]] = []
    previous: Line | None = None
    for line in lines:
        crossing = any(_crosses(s, gutter) for s in line.segments) or (
            bool(bands) and bands[-1][0] and previous is not None and _goes_on(previous, line)
        )
        previous = line
        if bands and crossing == bands[-1][0]:
            bands[-1][1].append(line)
        else:
            bands.append((crossing, [line]))
    return bands


def _prose(lines: list[Line], width: float) -> bool:
    """Whether a side of a band reads as a column of prose rather than table cells."""
    if len(lines) < 2:
        # One line on each side: a column's last line or a short band; widths decide.
        return bool(lines) and (lines[0].x1 - lines[0].x0) > _PROSE_WIDTH * width
    widths = sorted(line.x1 - line.x0 for line in lines)
    return widths[len(widths) // 2] > _PROSE_WIDTH * width
