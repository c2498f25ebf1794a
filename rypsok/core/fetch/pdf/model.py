"""What reading a PDF gives: a document as blocks of text in reading order (REQ-PDF-001).

The classes are frozen and JSON-safe: the worker process that reads a PDF sends the parent a
`to_wire` dictionary as JSON, and the parent rebuilds it with `from_wire`, which reads it as
hostile data (the worker ran a large C library on attacker-supplied bytes): every type, key,
count and length is checked and anything else raises `PdfWireError` (REQ-PDF-010).

A block is one of:

- ``heading``: `runs` at `level` 1..6 (from the text's size and weight against the body);
- ``paragraph``: `runs`, line breaks already joined;
- ``list_item``: `runs`, `ordered` with its `number` (1 and up), `level` 0 for the outer
  list and 1..5 for nested ones;
- ``table``: `rows` of cell texts (the first row is the header when the table has one);
- ``footnote``: `runs`, placed by the renderer after the text of its `page`.

`page` is the 0-based index of the page the block starts on. `text_cut` says whether the
reader left text out at its character bound (REQ-PDF-104): a document whose text is exactly
that long is read whole, which its length alone cannot tell.
"""

from __future__ import annotations

from typing import Final, Literal

import attrs

__all__ = [
    "KINDS",
    "MAX_WIRE_BLOCKS",
    "MAX_WIRE_CELLS",
    "MAX_WIRE_CHARS",
    "MAX_WIRE_LINK_CHARS",
    "MAX_WIRE_PAGES",
    "MAX_WIRE_RUNS",
    "PdfBlock",
    "PdfEncrypted",
    "PdfError",
    "PdfRun",
    "PdfText",
    "PdfUnreadable",
    "PdfWireError",
    "from_wire",
    "to_wire",
]

BlockKind = Literal["heading", "paragraph", "list_item", "table", "footnote"]
KINDS: Final[tuple[BlockKind, ...]] = ("heading", "paragraph", "list_item", "table", "footnote")

WIRE_VERSION: Final = 1
# Bounds of what from_wire accepts. The reader's own max_chars is far below MAX_WIRE_CHARS;
# these bound what a worker gone wrong can make the parent build.
MAX_WIRE_CHARS: Final = 8_000_000  # text of all runs, cells and the title together
MAX_WIRE_BLOCKS: Final = 200_000
MAX_WIRE_RUNS: Final = 100_000  # runs in one block
MAX_WIRE_CELLS: Final = 200_000  # cells in one table
MAX_WIRE_COLUMNS: Final = 256  # cells in one row
MAX_WIRE_LINK_CHARS: Final = 8192  # one link target
MAX_WIRE_PAGES: Final = 10_000_000
MAX_HEADING_LEVEL: Final = 6
MAX_LIST_LEVEL: Final = 5


class PdfError(Exception):
    """A document that cannot be read; the message names no text of the document."""


class PdfEncrypted(PdfError):
    """The document is encrypted and opens with no empty password."""


class PdfUnreadable(PdfError):
    """The bytes are not a PDF or are broken past what the parser repairs."""


class PdfWireError(ValueError):
    """A worker's answer is not a well-formed document within the wire's bounds."""


@attrs.frozen
class PdfRun:
    """A stretch of inline text, with the target of the link annotation over it if any."""

    text: str
    link: str | None = None


@attrs.frozen
class PdfBlock:
    """One block of a document in reading order (see the module's docstring)."""

    kind: BlockKind
    page: int
    runs: tuple[PdfRun, ...] = ()
    level: int = 0
    ordered: bool = False
    number: int = 0
    rows: tuple[tuple[str, ...], ...] = ()

    @property
    def text(self) -> str:
        """The block's text without link targets (cells joined by spaces for a table)."""
        if self.kind == "table":
            return "\n".join(" ".join(row) for row in self.rows)
        return "".join(run.text for run in self.runs)


@attrs.frozen
class PdfText:
    """A read document: its title, its blocks in reading order and how much of it was read
    (`pages_read` of `pages_total` pages; `text_cut`: text of those pages left out at the
    character bound)."""

    title: str | None
    blocks: tuple[PdfBlock, ...]
    pages_read: int
    pages_total: int
    has_text_layer: bool
    text_cut: bool = False


def to_wire(doc: PdfText) -> dict[str, object]:
    """`doc` as plain dictionaries, lists, strings, integers and booleans (JSON-safe)."""
    return {
        "v": WIRE_VERSION,
        "title": doc.title,
        "pages_read": doc.pages_read,
        "pages_total": doc.pages_total,
        "has_text_layer": doc.has_text_layer,
        "text_cut": doc.text_cut,
        "blocks": [_block_to_wire(block) for block in doc.blocks],
    }


def _block_to_wire(block: PdfBlock) -> dict[str, object]:
    return {
        "kind": block.kind,
        "page": block.page,
        "level": block.level,
        "ordered": block.ordered,
        "number": block.number,
        "runs": [[run.text, run.link] for run in block.runs],
        "rows": [list(row) for row in block.rows],
    }


_DOC_KEYS: Final = frozenset(
    {"v", "title", "pages_read", "pages_total", "has_text_layer", "text_cut", "blocks"}
)
_BLOCK_KEYS: Final = frozenset({"kind", "page", "level", "ordered", "number", "runs", "rows"})


@attrs.define
class _Budget:
    """What is left of MAX_WIRE_CHARS while one answer is read."""

    chars: int

    def text(self, value: object, what: str, *, limit: int | None = None) -> str:
        if type(value) is not str:
            raise PdfWireError(f"{what} is not a string")
        if limit is not None and len(value) > limit:
            raise PdfWireError(f"{what} is longer than {limit} characters")
        self.chars -= len(value)
        if self.chars < 0:
            raise PdfWireError(f"the document's text is longer than {MAX_WIRE_CHARS} characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise PdfWireError(f"{what} holds a lone surrogate") from None
        return value


def _int(value: object, what: str, low: int, high: int) -> int:
    # bool is a subclass of int: the exact type keeps True out of a count.
    if type(value) is not int or not low <= value <= high:
        raise PdfWireError(f"{what} is not an integer in {low}..{high}")
    return value


def _bool(value: object, what: str) -> bool:
    if type(value) is not bool:
        raise PdfWireError(f"{what} is not a boolean")
    return value


def _list(value: object, what: str, limit: int) -> list[object]:
    if type(value) is not list:
        raise PdfWireError(f"{what} is not a list")
    if len(value) > limit:
        raise PdfWireError(f"{what} has more than {limit} entries")
    return value


def _dict(value: object, what: str, keys: frozenset[str]) -> dict[str, object]:
    if type(value) is not dict or set(value) != keys:
        raise PdfWireError(f"{what} is not an object with exactly the keys {sorted(keys)}")
    return value


def from_wire(obj: object, *, max_chars: int = MAX_WIRE_CHARS) -> PdfText:
    """The document `obj` describes (as `to_wire` writes it), or `PdfWireError`.

    `max_chars` (at most MAX_WIRE_CHARS) bounds the text of all runs, cells and the title.
    """
    doc = _dict(obj, "the answer", _DOC_KEYS)
    _int(doc["v"], "the wire version", WIRE_VERSION, WIRE_VERSION)
    budget = _Budget(chars=min(max_chars, MAX_WIRE_CHARS))
    title = doc["title"]
    pages_total = _int(doc["pages_total"], "pages_total", 0, MAX_WIRE_PAGES)
    pages_read = _int(doc["pages_read"], "pages_read", 0, pages_total)
    blocks = tuple(
        _block_from_wire(block, budget, pages_read)
        for block in _list(doc["blocks"], "blocks", MAX_WIRE_BLOCKS)
    )
    return PdfText(
        title=None if title is None else budget.text(title, "the title", limit=4096),
        blocks=blocks,
        pages_read=pages_read,
        pages_total=pages_total,
        has_text_layer=_bool(doc["has_text_layer"], "has_text_layer"),
        text_cut=_bool(doc["text_cut"], "text_cut"),
    )


def _block_from_wire(obj: object, budget: _Budget, pages_read: int) -> PdfBlock:
    block = _dict(obj, "a block", _BLOCK_KEYS)
    kind = block["kind"]
    if kind not in KINDS or type(kind) is not str:
        raise PdfWireError("a block's kind is not one of " + ", ".join(KINDS))
    page = _int(block["page"], "a block's page", 0, max(pages_read - 1, 0))
    ordered = _bool(block["ordered"], "a block's ordered")
    number = _int(block["number"], "a list item's number", 0, 10**9)
    if kind == "heading":
        level = _int(block["level"], "a heading's level", 1, MAX_HEADING_LEVEL)
    elif kind == "list_item":
        level = _int(block["level"], "a list item's level", 0, MAX_LIST_LEVEL)
    else:
        level = _int(block["level"], "a block's level", 0, 0)
    runs = tuple(_run_from_wire(run, budget) for run in _list(block["runs"], "runs", MAX_WIRE_RUNS))
    rows = _rows_from_wire(block["rows"], budget)
    if (kind == "table") != bool(rows) or (kind == "table" and runs):
        raise PdfWireError("a table has rows and no runs; other blocks have runs and no rows")
    return PdfBlock(
        kind=kind, page=page, runs=runs, level=level, ordered=ordered, number=number, rows=rows
    )


def _run_from_wire(obj: object, budget: _Budget) -> PdfRun:
    pair = _list(obj, "a run", 2)
    if len(pair) != 2:
        raise PdfWireError("a run is not a [text, link] pair")
    link = pair[1]
    return PdfRun(
        text=budget.text(pair[0], "a run's text"),
        link=None if link is None else budget.text(link, "a link", limit=MAX_WIRE_LINK_CHARS),
    )


def _rows_from_wire(obj: object, budget: _Budget) -> tuple[tuple[str, ...], ...]:
    rows = _list(obj, "rows", MAX_WIRE_CELLS)
    cells = 0
    out = []
    for row in rows:
        entries = _list(row, "a row", MAX_WIRE_COLUMNS)
        cells += len(entries)
        if cells > MAX_WIRE_CELLS:
            raise PdfWireError(f"a table has more than {MAX_WIRE_CELLS} cells")
        out.append(tuple(budget.text(cell, "a cell") for cell in entries))
    return tuple(out)
