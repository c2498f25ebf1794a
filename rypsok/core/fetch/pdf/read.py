"""A PDF's bytes read into a document of blocks in reading order (REQ-PDF-001).

PDFium opens the bytes from memory (no file, no network; it runs no JavaScript and no
action: rypsok never initialises its form environment). Each page read gives positioned
segments of text (chars.py); the running headers, footers and page numbers go
(furniture.py); each page's columns give streams of lines in reading order (order.py); the
streams are cut into blocks (blocks.py) whose lines are joined into running text
(reflow.py) with their links (links.py). The body text's size and pitch, against which
headings and paragraph breaks are judged, are measured over all the pages read.

The title is the document's metadata title, else its first heading (REQ-PDF-011). At most
`max_pages` pages are read (`pages_read` then is below `pages_total`) and at most
`max_chars` characters of text are kept (REQ-PDF-012; `text_cut` then says whether text was
left out).
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections import Counter
from typing import TYPE_CHECKING

import attrs
import pypdfium2 as pdfium

from rypsok.core.fetch.pdf.blocks import Draft, Metrics, draft_blocks
from rypsok.core.fetch.pdf.chars import page_segments
from rypsok.core.fetch.pdf.furniture import remove_furniture
from rypsok.core.fetch.pdf.lines import group_lines
from rypsok.core.fetch.pdf.links import page_links, runs_of
from rypsok.core.fetch.pdf.lists import marker_of
from rypsok.core.fetch.pdf.model import (
    PdfBlock,
    PdfEncrypted,
    PdfText,
    PdfUnreadable,
)
from rypsok.core.fetch.pdf.order import page_streams
from rypsok.core.fetch.pdf.reflow import Vocabulary, clean_text

if TYPE_CHECKING:
    from rypsok.core.fetch.pdf.chars import Segment
    from rypsok.core.fetch.pdf.lines import Line

__all__ = ["read_document"]

_PASSWORD_ERROR = 4  # FPDF_ERR_PASSWORD
_GLUED_MARK = re.compile(r"^(\d{1,3}|[*†‡§¶])(?=[^\W\d_])")


def _open(data: bytes) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as error:
        if getattr(error, "err_code", None) == _PASSWORD_ERROR:
            raise PdfEncrypted("the document is encrypted") from None
        raise PdfUnreadable("the bytes are not a readable PDF") from None


def _metrics(streams: list[list[Line]]) -> Metrics:
    """The size most of the text is set in, and the pitch of its lines within a column."""
    sizes: Counter[float] = Counter()
    for stream in streams:
        for line in stream:
            sizes[round(line.size * 2) / 2] += sum([len(s.text) for s in line.segments])
    if not sizes:
        return Metrics(size=10.0, pitch=12.0)
    body = sizes.most_common(1)[0][0]
    pitches = [
        after.top - before.top
        for stream in streams
        for before, after in itertools.pairwise(stream)
        if abs(before.size - body) < 0.6
        and abs(after.size - body) < 0.6
        and 0 < after.top - before.top < 3 * body
    ]
    pitch = statistics.median(pitches) if pitches else 1.2 * body
    return Metrics(size=body, pitch=pitch)


def _title(document: pdfium.PdfDocument, drafts: list[Draft]) -> str | None:
    try:
        title = " ".join(clean_text(document.get_metadata_value("Title")).split())
    except (pdfium.PdfiumError, UnicodeDecodeError):
        title = ""
    if title:
        return title[:4096]
    heading = next((d for d in drafts if d.kind == "heading"), None)
    return None if heading is None else " ".join(clean_text(heading.text).split())[:4096]


def _read_page(document: pdfium.PdfDocument, index: int) -> tuple[float, float, list[Segment]]:
    """Page `index`'s height, width and segments; a page PDFium cannot load reads as empty."""
    try:
        page = document[index]
    except pdfium.PdfiumError:
        return 792.0, 612.0, []
    try:
        height, width = float(page.get_height()), float(page.get_width())
        return height, width, page_segments(page, index, page_links(document, page))
    except pdfium.PdfiumError:
        return 792.0, 612.0, []
    finally:
        page.close()


def read_document(data: bytes, *, max_pages: int, max_chars: int) -> PdfText:
    """The document in `data`: raises PdfEncrypted or PdfUnreadable when it cannot be read."""
    document = _open(data)
    try:
        total = len(document)
        count = max(0, min(total, max_pages))
        pages: list[list[Segment]] = []
        heights: list[float] = []
        widths: list[float] = []
        for index in range(count):
            height, width, segments = _read_page(document, index)
            heights.append(height)
            widths.append(width)
            pages.append(segments)
        has_text = any(seg.text.strip() for segs in pages for seg in segs)
        page_lines = remove_furniture([group_lines(segs) for segs in pages], heights)
        streams: list[list[Line]] = []
        for lines, width in zip(page_lines, widths, strict=True):
            streams.extend(page_streams(lines, width))
        metrics = _metrics(streams)
        vocabulary = Vocabulary.of(seg.text for segs in pages for seg in segs)
        drafts = draft_blocks(streams, metrics)
        blocks, cut = _bounded([_block(d, vocabulary) for d in drafts], max_chars)
        return PdfText(
            title=_title(document, drafts),
            blocks=blocks,
            pages_read=count,
            pages_total=total,
            has_text_layer=has_text,
            text_cut=cut,
        )
    finally:
        document.close()


def _block(draft: Draft, vocabulary: Vocabulary) -> PdfBlock:
    if draft.kind == "table":
        rows = tuple(tuple(" ".join(clean_text(c).split()) for c in row) for row in draft.rows)
        return PdfBlock(kind="table", page=draft.page, rows=rows)
    runs = runs_of(draft.lines, vocabulary)
    if draft.kind == "list_item" and runs:
        marker = marker_of(runs[0].text)
        if marker is not None:
            runs = (attrs.evolve(runs[0], text=marker.rest), *runs[1:])
    elif draft.kind == "footnote" and runs:
        # A raised note mark set against its text ("1Classification") is a word of its own.
        runs = (attrs.evolve(runs[0], text=_GLUED_MARK.sub(r"\1 ", runs[0].text)), *runs[1:])
    return PdfBlock(
        kind=draft.kind,  # type: ignore[arg-type]
        page=draft.page,
        runs=runs,
        level=draft.level if draft.kind in ("heading", "list_item") else 0,
        ordered=draft.ordered,
        number=draft.number,
    )


def _bounded(blocks: list[PdfBlock], max_chars: int) -> tuple[tuple[PdfBlock, ...], bool]:
    """The first blocks whose text fits in `max_chars`, the last one cut to fit, and whether
    any text was left out (a text exactly `max_chars` long is whole)."""
    out: list[PdfBlock] = []
    left = max_chars
    for block in blocks:
        size = len(block.text)
        if size <= left:
            out.append(block)
            left -= size
            continue
        cut = _cut(block, left) if left > 0 else None
        if cut is not None:
            out.append(cut)
        return tuple(out), True
    return tuple(out), False


def _cut(block: PdfBlock, left: int) -> PdfBlock | None:
    """`block`'s first `left` characters of text (a table's first whole rows), if any."""
    if block.kind == "table":
        rows = []
        for row in block.rows:
            left -= sum(len(cell) for cell in row) + len(row)
            if left < 0:
                break
            rows.append(row)
        return attrs.evolve(block, rows=tuple(rows)) if rows else None
    runs = []
    for run in block.runs:
        if left <= 0:
            break
        runs.append(attrs.evolve(run, text=run.text[:left]))
        left -= len(run.text)
    return attrs.evolve(block, runs=tuple(runs))
