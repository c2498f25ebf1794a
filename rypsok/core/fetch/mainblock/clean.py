"""Cleaning, the last step of the main block (REQ-CTX-005, REQ-FETCH-002).

Inside the block, lists, tables, divisions and sections that are mostly links, images or
short fragments are removed (never a part holding 30 % of the block's paragraph text, nor a
disclosure's label, nor a table of data whose links sit in one column, nor the divisions in
its cells), and so are paragraphs that are 80 % link text; unless that would leave under a
quarter of the block's text (a page of teasers is its content).
"""

from __future__ import annotations

from itertools import accumulate, compress, repeat
from typing import TYPE_CHECKING, Final

from rypsok.core.fetch.mainblock.chrome import (
    WRAPPER_PARAGRAPHS,
    WRAPPER_PROSE,
    names_a_decoration,
)
from rypsok.core.fetch.mainblock.measure import MIN_BLOCK, Column, Element, Stats
from rypsok.core.fetch.mainblock.score import Scores, class_weight
from rypsok.core.fetch.mainblock.tree import drop_all

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["CLEANED", "clean_block"]

# Cleaning that would leave less than this share of a block's text is not done.
_GUTTED: Final = 0.25
CLEANED: Final = frozenset({"div", "section", "ul", "ol", "table", "dl", "figure", "aside"})
_CELLS: Final = frozenset({"td", "th"})
_HEADINGS: Final = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
# What the cleaning walks through: the parts it judges, and the links (inside which all
# removed text is removed link text).
_JUDGED: Final = CLEANED | {"p", "a"}


# The counts removed under a part that had nothing removed under it.
_NOTHING_REMOVED: Final = (0, 0, 0, 0, 0, 0)


def clean_block(
    elements: Iterable[Element],
    scores: Scores,
    good: Column,
    stats: Stats,
) -> None:
    """Remove the chrome-like parts left inside the main block (readability's conditional
    cleaning, in spirit); each block's parts are judged by `_doomed_rows`, and removed at
    the end, not at all when that would leave under a quarter of the block's text."""
    end = stats.end
    measured = stats.elements
    for root in elements:
        if not good.get(root):
            # Without paragraph text there is nothing to tell the content from the rest by.
            continue
        gone, remaining = _doomed_rows(root, scores, good, stats)
        if remaining < _GUTTED * stats.text.get(root, 0):
            # Cleaning would leave almost nothing: the block is a page of teasers or links
            # (an index, a directory), and its parts are its content.
            continue
        if gone:
            # The outermost of the parts to go, in document order.
            doomed: list[Element] = []
            after = -1
            for row in reversed(gone):
                if row >= after:
                    doomed.append(measured[row])
                    after = end[row]
            drop_all(doomed)


def _totals(tag: str, tags: list[str]) -> list[int]:
    """The rows of `tag` among the rows `tags`, as running totals (zeros, without a sum,
    when there are none: most blocks have no image, or no list)."""
    if tag not in tags:
        return [0] * (len(tags) + 1)
    return list(accumulate(map(tag.__eq__, tags), initial=0))


class _BlockCounts:
    """The paragraphs, images and items in a block's rows as running totals from its first
    row (those under a part: the difference at its two ends), and what a part holds."""

    __slots__ = (
        "commas",
        "end",
        "first",
        "images",
        "items",
        "links",
        "paragraphs",
        "stats",
        "text",
    )

    def __init__(self, stats: Stats, first: int, block_tags: list[str]) -> None:
        self.stats = stats
        self.first = first
        self.text = stats.text.values
        self.links = stats.links.values
        self.commas = stats.all_commas
        self.end = stats.end
        self.paragraphs = _totals("p", block_tags)
        self.images = _totals("img", block_tags)
        self.items = _totals("li", block_tags)

    def held(self, row: int) -> list[int]:
        """All that the part at `row` holds: [text, link text, commas, p, img, li]."""
        at = row - self.first
        last = self.end[row] - self.first
        return [
            self.text[row],
            self.links[row],
            self.commas[row],
            self.paragraphs[last] - self.paragraphs[at],
            self.images[last] - self.images[at],
            self.items[last] - self.items[at],
        ]


def _doomed_rows(
    root: Element, scores: Scores, good: Column, stats: Stats
) -> tuple[list[int], int]:
    """The rows of the parts of the block `root` that look like chrome (any order; some
    inside others), and the block's text left without them.

    One pass over the block's rows backwards in document order (a part's descendants before
    it), visiting only the parts judged and the links: each part's counts are those of what
    it keeps, so a part removed below is already out of its container's counts, and the work
    stays linear in the size of the block however deep it is. The lengths and commas are not
    read from the tree again: a part's are its measured ones (`stats`; its paragraphs, images
    and items from running totals over the rows) less what was removed under it, which the
    pass keeps for the outermost parts seen so far (a stack, since the rows under a part are
    the ones up to its `end`).

    Over 80 lines: a part's counts and its judgement are written inline in the loop, not in
    calls of their own, since the loop runs once per part of a block that may be the whole
    page (tens of thousands of parts at the node bound).
    """
    text_of = stats.text.values
    links_of = stats.links.values
    tags = stats.tags
    end = stats.end
    # A part holding this much of the block's paragraph text is the block, not chrome.
    keep = 0.3 * good[root]
    # The tables of data in the block: a division that is the content of one of their
    # cells (a figure, a name linked to its page) is judged with its table, not alone.
    data_tables = {table for table in root.iter("table") if _data_table(table, stats)}
    # The tables with a header row and a header column: data, whatever their cells hold
    # (marks, colours, pictures), never judged as a part.
    header_tables = {table for table in root.iter("table") if _header_table(table, stats)}
    first = stats.index[root]
    block_tags = tags[first : end[first]]
    counts = _BlockCounts(stats, first, block_tags)
    # The parts judged (paragraphs and CLEANED parts) and the links (whose removed text is
    # all link text), children before their containers: backwards in document order.
    judged = list(compress(range(first, end[first]), map(_JUDGED.__contains__, block_tags)))
    del block_tags
    # `starts` and `removed` hold, for what was seen and is inside no other seen part, where
    # it starts and what was removed in it: [text, link text, commas, p, img, li]; a part's
    # own are the measured ones less those of what it holds.
    starts: list[int] = []
    removed: list[list[int]] = []
    gone: list[int] = []
    elements = stats.elements
    attributed = stats.attributed
    good_of = good.values
    named = scores.named
    commas_of = stats.all_commas
    paragraphs = counts.paragraphs
    images = counts.images
    items = counts.items
    # Whether a division or a table may be data (else only a list may be the post).
    tables = bool(data_tables or header_tables)
    for row in reversed(judged):
        if row == first:
            break  # the block itself is not judged
        last = end[row]
        inside = _removed_inside(starts, removed, last) if starts and starts[-1] < last else None
        tag = tags[row]
        if tag == "a":
            if inside is not None:
                # A link's text is all link text: what went from the one went from the other.
                inside[1] = inside[0]
                starts.append(row)
                removed.append(inside)
            continue
        held: list[int] | None = None
        if tag == "p":
            length = text_of[row]
            links = links_of[row]
            if inside is not None:
                length -= inside[0]
                links -= inside[1]
            drop = bool(length) and links >= 0.8 * length
        elif (keep and good_of[row] >= keep) or (
            (tables or tag in _LISTS)
            and _data_or_post(row, first, stats, data_tables, header_tables)
        ):
            drop = False  # the block's own text, data, or the post: not judged
        else:
            # All the part holds (its measured counts; its paragraphs, images and items
            # from the running totals), judged on what it keeps: less what went under it.
            at = row - first
            to = last - first
            held = [
                text_of[row],
                links_of[row],
                commas_of[row],
                paragraphs[to] - paragraphs[at],
                images[to] - images[at],
                items[to] - items[at],
            ]
            less = inside if inside is not None else _NOTHING_REMOVED
            element = elements[row]
            weight = named.get(row) if attributed[row] else 0
            drop = _should_drop(
                element,
                class_weight(element) if weight is None else weight,
                scores,
                data_tables,
                held[0] - less[0],
                held[1] - less[1],
                held[2] - less[2],
                held[3] - less[3],
                held[4] - less[4],
                held[5] - less[5],
            )
        if drop:
            # A paragraph that is (almost) only a link promotes another page: "Read more:
            # …"; the other parts are judged by their counts. All it holds goes from its
            # container's counts (its tail stays).
            gone.append(row)
            starts.append(row)
            removed.append(held if held is not None else counts.held(row))
        elif inside is not None:
            starts.append(row)
            removed.append(inside)
    return gone, text_of[first] - sum(held[0] for held in removed)


def _data_or_post(
    row: int, first: int, stats: Stats, data_tables: set[Element], header_tables: set[Element]
) -> bool:
    """Whether the part at `row` is data (a division in a data table's cell, a table with a
    header row and column) or the post itself (a list of links that is the post)."""
    tag = stats.tags[row]
    if tag == "div":
        return bool(data_tables) and _in_data_cell(stats.elements[row], data_tables)
    if tag == "table":
        return bool(header_tables) and stats.elements[row] in header_tables
    return tag in _LISTS and _list_is_the_post(row, first, stats)


def _removed_inside(starts: list[int], removed: list[list[int]], last: int) -> list[int] | None:
    """What was removed under the part whose rows end at `last` (None when nothing was
    seen under it), taken off the stack of the outermost parts seen."""
    if not starts or starts[-1] >= last:
        return None
    inside = [0, 0, 0, 0, 0, 0]
    while starts and starts[-1] < last:
        starts.pop()
        held = removed.pop()
        for column in range(6):
            inside[column] += held[column]
    return inside


def _should_drop(
    element: Element,
    weight: int,
    scores: Scores,
    data_tables: set[Element],
    length: int,
    links: int,
    commas: int,
    paragraphs: int,
    images: int,
    items: int,
) -> bool:
    """Whether a part of the block looks like chrome by its counts (those of what it keeps:
    text, link text, commas, paragraphs, images, items) and its name (`weight`, its
    `class_weight`; one call per part of a block that may be the whole page: what it asks
    is asked inline)."""
    if (
        weight < 0
        and weight + scores.get(element, 0.0) < 0
        and not (
            # A decoration holding several paragraphs of prose wraps the post's text.
            paragraphs >= WRAPPER_PARAGRAPHS
            and length >= WRAPPER_PROSE
            and links < 0.25 * length
            and names_a_decoration(element)
        )
    ):
        # Its name marks it and its text does not redeem it (a list's own tag weight is no
        # mark: a definition list of short terms is content).
        return _not_a_label(element)
    if commas >= 10:
        return False
    items -= 100
    density = links / length if length else 0.0
    tag = element.tag
    in_list = tag in ("ul", "ol")
    if (
        (images > 1 and paragraphs / images < 0.5)
        or (not in_list and items > paragraphs)
        or (
            weight < 25
            and density > 0.2
            and not (in_list and density < 0.5)
            and element not in data_tables
        )
        or (weight >= 25 and density > 0.5)
        or (length < MIN_BLOCK and images == 0 and tag not in ("table", "ul", "ol"))
    ):
        return _not_a_label(element)
    return False


# The rows a table is judged by: a table of data is alike from top to bottom, and a table
# of 33,000 rows is not walked whole to learn it.
_TABLE_SAMPLE: Final = 64


def _data_table(table: Element, stats: Stats) -> bool:
    """Whether `table` is a table of data whose links sit in one column (a list of files,
    apps or ferries with their sizes, dates and figures), not a grid of links: most of its
    first rows have two or more cells with text, and at most one of them is a link. Its own
    rows and cells only (a nested table is judged on its own)."""
    rows = 0
    data_rows = 0
    for row in _table_rows(table):
        filled = 0
        linked = 0
        for cell in row:
            if cell.tag not in _CELLS:
                continue
            length = stats.text.get(cell, 0)
            if not length:
                continue
            filled += 1
            if stats.links.get(cell, 0) >= 0.5 * length:
                linked += 1
        if filled:
            rows += 1
            if filled >= 2 and linked <= 1 and linked < filled:
                data_rows += 1
            if rows == _TABLE_SAMPLE:
                break
    return rows >= 3 and data_rows >= 0.8 * rows


_LISTS: Final = frozenset({"ul", "ol", "dl"})
# The share of the block's text a list holds to be the post itself.
_LIST_POST: Final = 0.5


def _list_is_the_post(row: int, first: int, stats: Stats) -> bool:
    """Whether the list at `row` is the post (link roundups, bookmarks, deals): it holds
    most of the block's text, or it stands right under the title (an ``<h1>``, or a
    heading named as a title, just before it or before its container)."""
    if stats.text.values[row] >= _LIST_POST * stats.text.values[first]:
        return True
    element = stats.elements[row]
    previous = element.getprevious()
    while previous is not None and not isinstance(previous.tag, str):
        previous = previous.getprevious()
    if previous is None:
        parent = element.getparent()
        previous = parent.getprevious() if parent is not None else None
    if previous is None or previous.tag not in _HEADINGS:
        return False
    return previous.tag == "h1" or "title" in (previous.get("class") or "").lower()


def _header_table(table: Element, stats: Stats) -> bool:
    """Whether `table` has a header row and a header column (a status grid, a timetable):
    three rows or more, the first with a label over most of its other cells, and most of
    the others with a label in their first cell (a label: a ``<th>``, or text that is not
    a link)."""
    rows = 0
    labelled = 0
    for row in _table_rows(table):
        cells = [cell for cell in row if cell.tag in _CELLS]
        if not cells:
            continue
        rows += 1
        if rows == 1:
            if len(cells) < 3 or sum(map(_label, cells[1:], repeat(stats))) < 0.8 * (
                len(cells) - 1
            ):
                return False
        elif _label(cells[0], stats):
            labelled += 1
        if rows == _TABLE_SAMPLE:
            break
    return rows >= 3 and labelled >= 0.8 * (rows - 1)


def _label(cell: Element, stats: Stats) -> bool:
    length = stats.text.get(cell, 0)
    return cell.tag == "th" or (length > 0 and stats.links.get(cell, 0) < 0.5 * length)


def _table_rows(table: Element) -> Iterable[Element]:
    for child in table:
        if child.tag == "tr":
            yield child
        elif child.tag in ("thead", "tbody", "tfoot"):
            yield from (row for row in child if row.tag == "tr")


def _in_data_cell(element: Element, data_tables: set[Element]) -> bool:
    """Whether `element` is the content of a cell of one of `data_tables`."""
    cell = element.getparent()
    if cell is None or cell.tag not in _CELLS or not data_tables:
        return False
    table = cell.getparent()  # the row
    while table is not None and table.tag in ("tr", "tbody", "thead", "tfoot"):
        table = table.getparent()
    return table in data_tables


def _not_a_label(element: Element) -> bool:
    parent = element.getparent()
    # The label of a disclosure (an item's signature on a reference page) is content.
    return parent is None or parent.tag != "summary"
