"""Tables found in a column's lines: rows of cells under common columns (REQ-PDF-007).

A table is a run of at least two consecutive lines that each split into two or more cells
(gaps wider than about an em) whose cells fall into two or more columns shared by the rows:
the cells' horizontal extents, merged where they overlap, are the columns. Prose with a
wide justified gap gives cells whose extents overlap from line to line and merge into one
column, so it is no table. A line whose pitch from the one before is well below the rows'
pitch continues the row before it (a cell's text wrapped in its cell).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Final

import attrs

from rypsok.core.fetch.pdf.lines import join_pieces, text_of
from rypsok.core.fetch.pdf.lists import is_marker

if TYPE_CHECKING:
    from rypsok.core.fetch.pdf.chars import Segment
    from rypsok.core.fetch.pdf.lines import Line

__all__ = ["Table", "find_tables"]

_MAX_ROW_GAP: Final = 3.0  # a pitch above this many line sizes ends a table


@attrs.frozen
class Table:
    """Lines `start`..`end` (exclusive) of a stream, read as `rows` of cell texts."""

    start: int
    end: int
    rows: tuple[tuple[str, ...], ...]


def _columns(cells: list[tuple[Segment, ...]]) -> list[tuple[float, float]]:
    """The cells' extents merged where they overlap, left to right."""
    spans = sorted((group[0].x0, max(s.x1 for s in group)) for group in cells)
    merged: list[tuple[float, float]] = []
    for x0, x1 in spans:
        if merged and x0 < merged[-1][1] - 0.5:
            merged[-1] = (merged[-1][0], max(merged[-1][1], x1))
        else:
            merged.append((x0, x1))
    return merged


def _grid(lines: list[Line]) -> tuple[tuple[str, ...], ...] | None:
    """The rows of `lines` under their shared columns, or None when they share fewer than two."""
    per_line = [line.cells for line in lines]
    columns = _columns([group for groups in per_line for group in groups])
    if len(columns) < 2:
        return None
    pitches = sorted(b.top - a.top for a, b in itertools.pairwise(lines))
    row_pitch = pitches[len(pitches) // 2] if pitches else 0.0
    rows: list[list[str]] = []
    previous: Line | None = None
    for line, groups in zip(lines, per_line, strict=True):
        cells = [""] * len(columns)
        for group in groups:
            index = next(i for i, (x0, x1) in enumerate(columns) if group[0].x0 < x1 + 0.5)
            cells[index] = join_pieces([cells[index], text_of(group)])
        wrapped = (
            previous is not None
            and rows
            and line.top - previous.top < 0.75 * row_pitch
            and len(groups) < len(columns)
        )
        if wrapped:
            rows[-1] = [
                join_pieces([a, b]) if b else a for a, b in zip(rows[-1], cells, strict=True)
            ]
        else:
            rows.append(cells)
        previous = line
    firsts = [row[0] for row in rows if row[0]]
    if len(rows) < 2 or (len(rows) == 2 and len(columns) < 3):
        # Two rows of two cells are as likely two lines with a gap in each.
        return None
    if firsts and all(is_marker(cell) for cell in firsts):
        # A list whose markers stand apart from their text is no table.
        return None
    return tuple(tuple(row) for row in rows)


def _row(line: Line) -> bool:
    """Whether `line` may be a table's row: cells apart, and not a justified line of prose.

    A justified line stretched so far that every word stands alone has words for cells and
    the same gap between each two; a table's row has gaps as its columns and texts leave.
    """
    cells = line.cells
    if len(cells) < 2:
        return False
    if len(cells) < 3 or any(len(group) > 1 or " " in group[0].text.strip() for group in cells):
        return True
    gaps = [b[0].x0 - a[-1].x1 for a, b in itertools.pairwise(cells)]
    # Justification spreads a line's glue evenly: its gaps agree to a fraction of a point.
    return max(gaps) - min(gaps) > 0.5


def find_tables(lines: list[Line], body_size: float) -> list[Table]:
    """The tables among a stream's `lines`, in order.

    A table is set at the body text's size or smaller: larger lines (a justified heading
    with a wide gap) are no row.
    """
    found: list[Table] = []
    index = 0
    largest = 1.05 * body_size
    while index < len(lines):
        if lines[index].size > largest or not _row(lines[index]):
            index += 1
            continue
        end = index + 1
        while end < len(lines):
            line, before = lines[end], lines[end - 1]
            if line.top - before.bottom > _MAX_ROW_GAP * line.size or line.size > largest:
                break
            if not _row(line) and not (
                len(line.cells) == 1 and end + 1 < len(lines) and _row(lines[end + 1])
            ):
                break
            end += 1
        rows = _grid(lines[index:end]) if end - index >= 2 else None
        if rows is not None:
            found.append(Table(start=index, end=end, rows=rows))
            index = end
        else:
            index += 1
    return found
