"""Tables found in a column's lines: rows of cells under common columns (REQ-PDF-007).

A table is a run of at least two consecutive lines that each split into two or more cells
(gaps wider than about an em) whose cells fall into two or more columns shared by the rows:
the cells' horizontal extents, merged where they overlap, are the columns. Prose with a
wide justified gap gives cells whose extents overlap from line to line and merge into one
column, so it is no table; nor is a line stretched word by word (see `_row`). A line with
no cell in the first column is a wrapped cell's line: it joins the row nearest it, and its
text joins the cell's as a paragraph's lines join (a hyphen at its end undone).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Final

import attrs

from rypsok.core.fetch.pdf.lines import text_of
from rypsok.core.fetch.pdf.lists import is_marker
from rypsok.core.fetch.pdf.reflow import Vocabulary, join_lines

if TYPE_CHECKING:
    from rypsok.core.fetch.pdf.chars import Segment
    from rypsok.core.fetch.pdf.lines import Line

__all__ = ["Table", "find_tables"]

_MAX_ROW_GAP: Final = 3.0  # a pitch above this many line sizes ends a table
_MAX_SHRINK: Final = 40  # lines a run of cells may go on past the end of its table


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


def _placed(
    line: Line, texts: tuple[str, ...], columns: list[tuple[float, float]]
) -> list[list[str]]:
    """The texts of `line`'s cells (`texts`, one per cell) under `columns` (each cell's
    texts, top to bottom)."""
    cells: list[list[str]] = [[] for _ in columns]
    for group, text in zip(line.cells, texts, strict=True):
        index = next(
            (i for i, (_x0, x1) in enumerate(columns) if group[0].x0 < x1 + 0.5),
            len(columns) - 1,
        )
        cells[index].append(text)
    return cells


def _owners(lines: list[Line], keys: list[int]) -> list[int]:
    """For each line, the index of the row-starting line (one of `keys`) it belongs to.

    A line without a cell in the first column is a wrapped cell's line. It belongs to the
    row whose first line is nearest it (a browser or a library centres a cell's lines on
    its row), the row above on a tie or when all the lines stand at one pitch (TeX hangs a
    row's wrapped lines below it at the pitch of the rows).
    """
    pitches = [b.top - a.top for a, b in itertools.pairwise(lines)]
    uniform = not pitches or max(pitches) < 1.15 * min(pitches) + 0.5
    owners = []
    for index, line in enumerate(lines):
        above = [k for k in keys if k <= index]
        below = [k for k in keys if k > index]
        if index in keys or not keys:
            owners.append(index)
        elif not above or (
            not uniform
            and below
            and lines[below[0]].top - line.top < line.top - lines[above[-1]].top - 0.3 * line.size
        ):
            owners.append(below[0])
        else:
            owners.append(above[-1])
    return owners


def _grid(lines: list[Line], texts: list[tuple[str, ...]]) -> tuple[tuple[str, ...], ...] | None:
    """The rows of `lines` (`texts`: each line's cell texts) under their shared columns, or
    None when they share fewer than two."""
    columns = _columns([group for line in lines for group in line.cells])
    if len(columns) < 2:
        return None
    placed = [_placed(line, own, columns) for line, own in zip(lines, texts, strict=True)]
    keys = [i for i, cells in enumerate(placed) if cells[0]]
    owners = _owners(lines, keys)
    merged: dict[int, list[list[str]]] = {}
    for owner, cells in zip(owners, placed, strict=True):
        row = merged.setdefault(owner, [[] for _ in columns])
        for into, placed_texts in zip(row, cells, strict=True):
            into.extend(placed_texts)
    if len(merged) < 2 or (len(merged) == 2 and len(columns) < 3):
        # Two rows of two cells are as likely two lines with a gap in each.
        return None
    empty = Vocabulary.of([])
    rows = [tuple(join_lines(cell, empty) for cell in merged[k]) for k in sorted(merged)]
    firsts = [row[0] for row in rows if row[0]]
    if firsts and all(is_marker(cell) for cell in firsts):
        # A list whose markers stand apart from their text is no table.
        return None
    return tuple(rows)


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


def _wrapped(line: Line, first: Line, after: list[Line]) -> bool:
    """Whether a line of one cell is a wrapped cell's line inside a table whose first row is
    `first`: it stands right of the table's first column, or a row follows it."""
    if len(line.cells) != 1:
        return False
    return line.x0 > first.cells[0][-1].x1 or any(_row(other) for other in after)


def find_tables(lines: list[Line], body_size: float) -> list[Table]:
    """The tables among a stream's `lines`, in order.

    A table is set at the body text's size or smaller: larger lines (a justified heading
    with a wide gap) are no row.
    """
    found: list[Table] = []
    index = 0
    largest = 1.05 * body_size
    # Grids tried on this stream: a page of lines that all split into cells stays linear.
    budget = [4 * len(lines) + 64]
    while index < len(lines):
        if lines[index].size > largest or not _row(lines[index]):
            index += 1
            continue
        end = index + 1
        while end < len(lines):
            line, before = lines[end], lines[end - 1]
            if line.top - before.bottom > _MAX_ROW_GAP * line.size or line.size > largest:
                break
            if not _row(line) and not _wrapped(line, lines[index], lines[end + 1 : end + 3]):
                break
            end += 1
        table = _longest(lines, index, end, budget)
        if table is not None:
            found.append(table)
            index = table.end
        else:
            index += 1
    return found


def _longest(lines: list[Line], start: int, end: int, budget: list[int]) -> Table | None:
    """The table of the most lines from `start` within `start`..`end`, if any.

    A run of lines with cells may go on past its table into text with a margin note or a
    gap of its own; the table is the longest part from its start that reads as one. Each
    grid tried takes one from `budget`; none left, no more are tried.
    """
    texts = [tuple(text_of(group) for group in line.cells) for line in lines[start:end]]
    for stop in range(end, max(start + 1, end - _MAX_SHRINK), -1):
        if budget[0] <= 0:
            return None
        budget[0] -= 1
        rows = _grid(lines[start:stop], texts[: stop - start])
        if rows is not None:
            return Table(start=start, end=stop, rows=rows)
    return None
