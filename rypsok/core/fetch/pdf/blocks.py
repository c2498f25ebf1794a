"""A document's lines, in reading order, cut into blocks and classified (REQ-PDF-003..008).

Within a column's stream of lines a new block starts where the pitch from the line before is
well above the body text's pitch, where size or weight changes, where a line is indented past
the column's left edge (a paragraph's first line, as TeX sets it) or where a list marker
starts a line. A block then is:

- a table, where tables.py finds one;
- footnotes: the small lines closing a column that start with a note mark;
- a heading: larger than the body text by an eighth (at most five lines) or bold at its
  size (at most three), not ending as a sentence ends; its level comes from the rank of its size and
  weight among the document's headings (largest first, bold before regular);
- a list item: a line starting with a marker and the lines under its text;
- else a paragraph. A paragraph that ends a column without a sentence's end and a paragraph
  starting the next column in lowercase are one paragraph.
"""

from __future__ import annotations

import itertools
import re
from typing import Final

import attrs

from rypsok.core.fetch.pdf.lines import Line
from rypsok.core.fetch.pdf.lists import marker_of
from rypsok.core.fetch.pdf.tables import find_tables

__all__ = ["Draft", "Metrics", "draft_blocks", "heading_levels", "list_levels"]

_HEADING_SIZE: Final = 1.12
_NOTE_SIZE: Final = 0.9
_NOTE_MARK: Final = re.compile(r"^\s*(?:\d{1,3}|[*†‡§¶])(?:\s|[.)]|[^\W\d])")
_SENTENCE_END: Final = (".", ":", ";", ",", "!", "?")


@attrs.frozen
class Metrics:
    """The body text's size and line pitch, measured over the whole document."""

    size: float
    pitch: float


@attrs.define
class Draft:
    """A block being built: its kind, its lines (or a table's rows) and list details."""

    kind: str
    page: int
    lines: list[Line] = attrs.field(factory=list)
    rows: tuple[tuple[str, ...], ...] = ()
    ordered: bool = False
    number: int = 0
    indent: float = 0.0
    level: int = 0
    size: float = 0.0
    bold: bool = False

    @property
    def text(self) -> str:
        return " ".join(line.text for line in self.lines)


def _starts_block(line: Line, current: Draft, left: float, right: float, metrics: Metrics) -> bool:
    """Whether `line` starts a block rather than going on with `current` (see the module's
    docstring); a hanging indent is looked for last, as it reads all of `current`'s lines."""
    before = current.lines[-1]
    if line.page != before.page:
        return True
    if abs(line.size - before.size) > 0.6 or line.bold != before.bold:
        return True
    if line.top - before.top > 1.35 * max(metrics.pitch, 1.0) * max(line.size, before.size) / (
        metrics.size or 1.0
    ):
        return True
    if line.bold or abs(line.size - metrics.size) > 0.6:
        # (A first-line indent is the body text's; centred headings move left and right.)
        return False
    return (
        line.x0 > left + 0.6 * line.size
        and before.x0 <= left + 0.6 * line.size
        and not _hangs(line, current, left, right)
    )


def _hangs(line: Line, current: Draft, left: float, right: float) -> bool:
    """Whether an indented `line` goes on with `current` under a hanging indent.

    A list item's lines hang under its text; a reference's ("[3] A. Author, …") hang under a
    first line that starts at the column's left edge and fills the column, as a first-line
    indent never follows (the line before a paragraph's first ends where its text does).
    """
    if current.kind == "list_item":
        return line.x0 > current.indent + 0.3 * line.size
    first = current.lines[0]
    return (
        current.kind == "paragraph"
        and first.x0 <= left + 0.6 * line.size
        and first.x1 >= right - line.size
        and all(abs(other.x0 - line.x0) < 2 for other in current.lines[1:])
    )


def _hanging_ends(line: Line, current: Draft, left: float) -> bool:
    """Whether `line`, back at the left edge, ends a paragraph set with a hanging indent."""
    lines = current.lines
    return (
        current.kind == "paragraph"
        and len(lines) > 1
        and line.x0 <= left + 0.3 * line.size
        and all(other.x0 > left + 0.6 * other.size for other in itertools.islice(lines, 1, None))
    )


def _left_edge(lines: list[Line]) -> float:
    counts: dict[int, int] = {}
    for line in lines:
        key = round(line.x0)
        counts[key] = counts.get(key, 0) + 1
    return float(max(counts, key=lambda k: (counts[k], -k))) if counts else 0.0


def _footnotes_from(lines: list[Line], metrics: Metrics) -> int:
    """Where the footnotes closing a column's `lines` start (len(lines) when none)."""
    start = len(lines)
    while start > 0 and lines[start - 1].size < _NOTE_SIZE * metrics.size:
        start -= 1
    while start < len(lines) and not _NOTE_MARK.match(lines[start].text):
        start += 1
    if start == 0 or start == len(lines):
        return len(lines)
    return start


def _stream_drafts(lines: list[Line], metrics: Metrics) -> list[Draft]:
    """The blocks of one column's stream of lines."""
    notes = _footnotes_from(lines, metrics)
    tables = {t.start: t for t in find_tables(lines[:notes], metrics.size)}
    left = _left_edge(lines[:notes])
    ends = sorted(line.x1 for line in lines[:notes])
    right = ends[(len(ends) * 9) // 10] if ends else 0.0
    drafts: list[Draft] = []
    index = 0
    while index < notes:
        table = tables.get(index)
        if table is not None:
            drafts.append(Draft(kind="table", page=lines[index].page, rows=table.rows))
            index = table.end
            continue
        line = lines[index]
        current = drafts[-1] if drafts and drafts[-1].kind != "table" else None
        marker = marker_of(line.text)
        if marker is not None and marker.rest.strip() and _may_start_item(line, current, left):
            drafts.append(
                Draft(
                    kind="list_item",
                    page=line.page,
                    lines=[line],
                    ordered=marker.ordered,
                    number=marker.number,
                    indent=line.x0,
                )
            )
        elif (
            current is None
            or _starts_block(line, current, left, right, metrics)
            or _hanging_ends(line, current, left)
        ):
            drafts.append(Draft(kind="paragraph", page=line.page, lines=[line]))
        else:
            current.lines.append(line)
        index += 1
    for line in lines[notes:]:
        if _NOTE_MARK.match(line.text) or not drafts or drafts[-1].kind != "footnote":
            drafts.append(Draft(kind="footnote", page=line.page, lines=[line]))
        else:
            drafts[-1].lines.append(line)
    return drafts


def _may_start_item(line: Line, current: Draft | None, left: float) -> bool:
    """Whether a line with a marker starts an item rather than continuing a paragraph."""
    if current is None or current.kind == "list_item":
        return True
    before = current.lines[-1]
    return line.x0 > left + 0.3 * line.size or line.top - before.bottom > 0.5 * line.size


def _is_heading(draft: Draft, metrics: Metrics) -> bool:
    if draft.kind != "paragraph" or len(draft.lines) > 5:
        return False
    text = draft.text.strip()
    if not any(c.isalpha() for c in text) or len(text) > 200:
        return False
    size = max(line.size for line in draft.lines)
    larger = size >= _HEADING_SIZE * metrics.size
    if len(draft.lines) > 3 and not larger:
        return False
    bold = all(line.bold for line in draft.lines) and size >= 0.95 * metrics.size
    return (larger or (bold and len(text) < 120)) and not text.endswith(_SENTENCE_END)


def _continues(before: Draft, after: Draft) -> bool:
    """Whether `after`, first in a column, goes on with `before`, last in the one before."""
    if before.kind != "paragraph" or after.kind != "paragraph":
        return False
    end, start = before.text.rstrip(), after.text.lstrip()
    return (
        bool(end)
        and bool(start)
        and not end.endswith((*_SENTENCE_END[:1], "!", "?", ":"))
        and (start[0].islower() or end.endswith(("-", "\ufffe")))
    )


def draft_blocks(streams: list[list[Line]], metrics: Metrics) -> list[Draft]:
    """The blocks of a document's streams (columns in reading order), headings marked."""
    drafts: list[Draft] = []
    for stream in streams:
        if not stream:
            continue
        own = _stream_drafts(stream, metrics)
        body = [d for d in drafts if d.kind != "footnote"]
        if own and body and _continues(body[-1], own[0]) and body[-1] is drafts[-1]:
            drafts[-1].lines.extend(own.pop(0).lines)
        drafts.extend(own)
    for draft in drafts:
        if _is_heading(draft, metrics):
            draft.kind = "heading"
            draft.size = max(line.size for line in draft.lines)
            draft.bold = all(line.bold for line in draft.lines)
    heading_levels(drafts)
    list_levels(drafts)
    return drafts


def list_levels(drafts: list[Draft]) -> None:
    """Each list item's nesting level, from its marker's indent against the items before it.

    An item indented past the one before opens a nested list (at most five deep); one back
    at an earlier item's indent returns to that list. A list item above the one before (the
    next column or page) keeps the level it had at that indent.
    """
    stack: list[float] = []
    previous: Draft | None = None
    for draft in drafts:
        if draft.kind != "list_item":
            stack, previous = [], None
            continue
        moved = previous is not None and (
            draft.page != previous.page or draft.lines[0].top < previous.lines[0].top
        )
        if moved:
            stack = []
        while stack and draft.indent < stack[-1] - 3:
            stack.pop()
        if not stack or draft.indent > stack[-1] + 3:
            stack.append(draft.indent)
        draft.level = min(len(stack) - 1, 5)
        previous = draft


def heading_levels(drafts: list[Draft]) -> None:
    """Each heading's level: the rank of its (size, weight) among the headings' styles."""
    styles = sorted(
        {(round(d.size * 2) / 2, d.bold) for d in drafts if d.kind == "heading"},
        key=lambda style: (-style[0], not style[1]),
    )
    rank = {style: min(index + 1, 6) for index, style in enumerate(styles)}
    for draft in drafts:
        if draft.kind == "heading":
            draft.level = rank[round(draft.size * 2) / 2, draft.bold]
