"""Pipe tables: a table's rows with each cell under its column, spans spread
(REQ-FETCH-004)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

    from lxml import etree

__all__ = ["MAX_COLSPAN", "MAX_ROWSPAN", "MAX_TABLE_CELLS", "table_grid"]

_CELLS: Final = frozenset({"td", "th"})
_BLOCK_CONTENT: Final = frozenset(
    {"p", "div", "table", "ul", "ol", "pre", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6"}
)

# What a page's spans may ask for: HTML's own limits on colspan and rowspan, and a bound on
# the cells of one table once its spans are spread out (a page of 100 000 nodes can hold no
# more cells of its own; only spans can ask for more).
MAX_COLSPAN: Final = 1000
MAX_ROWSPAN: Final = 65534
MAX_TABLE_CELLS: Final = 100_000
_SPAN_VALUE: Final = re.compile(r"[\t\n\f\r ]*\+?([0-9]+)")


def _span(value: str | None, limit: int) -> int:
    """A colspan or rowspan as HTML reads it (leading digits; 1 when there are none),
    clamped to `limit`."""
    match = _SPAN_VALUE.match(value or "")
    if match is None:
        return 1
    digits = match.group(1).lstrip("0")
    if len(digits) > len(str(limit)):
        return limit
    return min(int(digits or "0"), limit)


def _plain_table(table: etree._Element) -> bool:
    """Whether `table` holds no block (no cell of it can be a layout's), no spanning cell,
    and no more cells than MAX_TABLE_CELLS, however nested: its grid is then a table."""
    if next(table.iterdescendants(*_BLOCK_CONTENT), None) is not None:
        return False
    spans = table.xpath("count(.//*[self::td or self::th][@colspan or @rowspan])")
    return bool(spans == 0 and table.xpath("count(.//td | .//th)") <= MAX_TABLE_CELLS)


def _rows(table: etree._Element) -> list[etree._Element]:
    """The table's own rows, directly or in its row groups (not those of a nested table)."""
    rows: list[etree._Element] = []
    for child in table:
        if child.tag == "tr":
            rows.append(child)
        elif child.tag in ("thead", "tbody", "tfoot"):
            rows.extend(row for row in child if row.tag == "tr")
    return rows


def table_grid(
    element: etree._Element, cell_text: Callable[[etree._Element], str]
) -> list[list[str]] | None:
    """The table's rows with each cell under its column (each cell's text as `cell_text`
    writes it), or None for a layout table (a cell holding blocks) or one of more than
    MAX_TABLE_CELLS cells.

    A cell spanning rows is repeated in each of them (a row of a pipe table is read on
    its own: its key must be in it); a cell spanning columns stands in the first and
    leaves the others empty.
    """
    rows = _rows(element)
    # The shape is checked first, without the cells' text: a table that turns out to be
    # a layout or too large costs no writing of cells that are then written again as
    # blocks (and leaves no picture marked as written). A table without a block, a
    # span or more cells than the bound inside (most data tables) needs no check.
    if _plain_table(element):
        # No span to place and no cell holding a block (nor more cells than the bound):
        # each row is its cells' texts in order, what `_grid` makes of it, without its
        # bookkeeping of columns and spans for every cell.
        grid = [[cell_text(cell) for cell in row if cell.tag in _CELLS] for row in rows]
        return [line for line in grid if any(line)]
    if _grid(rows, cell_text, write=False) is None:
        return None
    return _grid(rows, cell_text, write=True)


def _grid(
    rows: list[etree._Element],
    cell_text: Callable[[etree._Element], str],
    *,
    write: bool,
) -> list[list[str]] | None:
    grid: list[list[str]] = []
    # Columns taken by a cell of an earlier row: column -> (text, rows still to take).
    carried: dict[int, tuple[str, int]] = {}
    total = 0
    for row_index, row in enumerate(rows):
        line: list[str] = []
        spans: dict[int, tuple[str, int]] = {}
        for cell in row:
            if cell.tag not in _CELLS:
                continue
            if len(cell) and next(cell.iter(*_BLOCK_CONTENT), None) is not None:
                # (A cell without children, most of them, holds no block.)
                return None
            while len(line) in carried:
                line.append(carried[len(line)][0])
            text = cell_text(cell) if write else ""
            colspan = cell.get("colspan")
            rowspan = cell.get("rowspan")
            columns = 1 if colspan is None else _span(colspan, MAX_COLSPAN) or 1
            down = 1 if rowspan is None else _span(rowspan, MAX_ROWSPAN)
            if down == 0:
                down = len(rows) - row_index  # 0: to the end of the table
            # The cells placed so far, this row's included, each counted once (a
            # table of MAX_TABLE_CELLS cells is a table, not half of one).
            if total + len(line) + columns > MAX_TABLE_CELLS:
                return None
            for offset in range(columns):
                if down > 1:
                    spans[len(line)] = (text if offset == 0 else "", down - 1)
                line.append(text if offset == 0 else "")
        if carried:
            for column in sorted(c for c in carried if c >= len(line)):
                line.extend([""] * (column - len(line)))
                line.append(carried[column][0])
        total += len(line)
        if total > MAX_TABLE_CELLS:
            return None
        carried = {c: (t, n - 1) for c, (t, n) in carried.items() if n > 1}
        carried.update(spans)
        if any(line):
            grid.append(line)
    return grid
