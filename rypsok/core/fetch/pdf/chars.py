"""The text of one PDF page as positioned segments, from PDFium's text page (REQ-PDF-001).

PDFium groups a page's characters into rectangles, one per text object (a show-text
operation), in the order of its character list. A segment is one such rectangle with its
text, font size and weight: a piece of one line, from a word to a whole line. Asking PDFium
per rectangle rather than per character keeps the reading within a small factor of PDFium's
own plain text (the per-character loop through ctypes costs six times as much).

A rectangle much wider than its text (a table row or two columns written in one operation)
is split at its wide gaps from the boxes of its characters, the only place where this module
asks per character.

Coordinates are in points from the page's top-left corner.
"""

from __future__ import annotations

import ctypes
import re
from typing import TYPE_CHECKING, Final

import attrs
import pypdfium2.raw as pdfium_c

if TYPE_CHECKING:
    import pypdfium2 as pdfium

    from rypsok.core.fetch.pdf.links import LinkArea

__all__ = ["Segment", "page_segments"]

# A character PDFium marks as a hyphen at a line's end (it joins the two lines).
LINE_END_HYPHEN: Final = "\ufffe"
_BOLD_NAME: Final = re.compile(r"bold|black|heavy|semibold|demi|cmbx|cmb\d|bx\d", re.IGNORECASE)
_FORCE_BOLD: Final = 0x40000  # a font descriptor flag
_WIDE: Final = 0.95  # rectangle width per character, in ems, past which gaps are looked for
_GAP: Final = 0.9  # a gap wider than this many ems splits a segment


@attrs.frozen
class Segment:
    """A piece of one line of a page: text, box (top-down points), size in points, weight."""

    page: int
    text: str
    x0: float
    x1: float
    top: float
    bottom: float
    size: float
    bold: bool
    link: str | None = None

    @property
    def height(self) -> float:
        return self.bottom - self.top


class _Boxes:
    """Reused ctypes doubles for the boxes of a text page (one allocation per page)."""

    def __init__(self, textpage: pdfium.PdfTextPage) -> None:
        self.raw = textpage.raw
        self.values = [ctypes.c_double() for _ in range(4)]
        self.refs = [ctypes.byref(v) for v in self.values]

    def rect(self, index: int) -> tuple[float, float, float, float]:
        """Rectangle `index` as (left, top, right, bottom) in PDF space."""
        pdfium_c.FPDFText_GetRect(self.raw, index, *self.refs)
        left, top, right, bottom = (v.value for v in self.values)
        return left, top, right, bottom

    def char(self, index: int) -> tuple[float, float, float, float]:
        """Character `index`'s box as (left, right, bottom, top) in PDF space."""
        pdfium_c.FPDFText_GetCharBox(self.raw, index, *self.refs)
        left, right, bottom, top = (v.value for v in self.values)
        return left, right, bottom, top


def _style(textpage: pdfium.PdfTextPage, index: int) -> tuple[float, bool]:
    """Font size and boldness of character `index`."""
    raw = textpage.raw
    size = float(pdfium_c.FPDFText_GetFontSize(raw, index))
    weight = int(pdfium_c.FPDFText_GetFontWeight(raw, index))
    flags = ctypes.c_int(0)
    buffer = ctypes.create_string_buffer(128)
    pdfium_c.FPDFText_GetFontInfo(raw, index, buffer, 128, ctypes.byref(flags))
    name = buffer.value.decode("latin-1", errors="replace")
    bold = weight >= 600 or bool(flags.value & _FORCE_BOLD) or _BOLD_NAME.search(name) is not None
    return size, bold


def page_segments(
    page: pdfium.PdfPage, page_index: int, links: list[LinkArea] | None = None
) -> list[Segment]:
    """The segments of `page` in PDFium's character order (empty for a page without text).

    A segment under one of `links` is split where the link's rectangle starts and ends, and
    the pieces under it carry its target.
    """
    textpage = page.get_textpage()
    try:
        count = textpage.count_chars()
        if count <= 0:
            return []
        text = textpage.get_text_range(0, count)
        height = float(page.get_height())
        boxes = _Boxes(textpage)
        rects = int(pdfium_c.FPDFText_CountRects(textpage.raw, 0, -1))
        starts = _rect_starts(textpage, boxes, rects, len(text))
        out: list[Segment] = []
        for i, start in enumerate(starts):
            if start < 0:
                continue
            end = next((s for s in starts[i + 1 :] if s > start), len(text))
            left, top, right, bottom = boxes.rect(i)
            piece = text[start:end]
            if not piece.strip():
                continue
            size, bold = _style(textpage, start)
            seg = Segment(
                page=page_index,
                text=piece,
                x0=left,
                x1=right,
                top=height - top,
                bottom=height - bottom,
                size=_size(size, top - bottom),
                bold=bold,
            )
            for piece, piece_start in _split_wide(seg, start, boxes):
                out.extend(_linked(piece, piece_start, boxes, height, links or []))
        return out
    finally:
        textpage.close()


def _rect_starts(textpage: pdfium.PdfTextPage, boxes: _Boxes, rects: int, length: int) -> list[int]:
    """The index of each rectangle's first character (-1 where PDFium finds none)."""
    starts = []
    last = -1
    for i in range(rects):
        left, top, right, bottom = boxes.rect(i)
        probe = min(left + 0.5, (left + right) / 2)
        index = int(
            pdfium_c.FPDFText_GetCharIndexAtPos(textpage.raw, probe, (top + bottom) / 2, 1.0, 1.0)
        )
        # A rectangle whose start is not after the previous one's overlaps other text (PDFium
        # found a character of another object): it is dropped rather than read twice.
        if index <= last or index >= length:
            starts.append(-1)
            continue
        starts.append(index)
        last = index
    return starts


def _size(font_size: float, box_height: float) -> float:
    """The text's size in points: the font size, unless a text matrix scales the font."""
    if font_size <= 1.5 or box_height > 2.5 * font_size:
        return max(box_height, 1.0)
    return font_size


def _split_wide(seg: Segment, start: int, boxes: _Boxes) -> list[tuple[Segment, int]]:
    """`seg`, split at gaps wider than _GAP ems when it is wider than its text explains."""
    text = seg.text
    visible = len(text.rstrip())
    if visible < 3 or (seg.x1 - seg.x0) < _WIDE * seg.size * visible:
        return [(seg, start)]
    pieces: list[tuple[Segment, int]] = []
    begin = 0
    previous_right: float | None = None
    piece_left = seg.x0
    for offset, ch in enumerate(text[:visible]):
        if ch.isspace():
            continue
        left, right, _bottom, _top = boxes.char(start + offset)
        if previous_right is not None and left - previous_right > _GAP * seg.size:
            piece = attrs.evolve(seg, text=text[begin:offset], x0=piece_left, x1=previous_right)
            pieces.append((piece, start + begin))
            begin, piece_left = offset, left
        previous_right = right
    if not pieces:
        return [(seg, start)]
    pieces.append((attrs.evolve(seg, text=text[begin:], x0=piece_left, x1=seg.x1), start + begin))
    return [(p, s) for p, s in pieces if p.text.strip()]


def _under(link: LinkArea, x: float, y: float) -> bool:
    return link.x0 - 1 <= x <= link.x1 + 1 and link.top - 1 <= y <= link.bottom + 1


def _linked(
    seg: Segment, start: int, boxes: _Boxes, height: float, links: list[LinkArea]
) -> list[Segment]:
    """`seg` in pieces of one link target each (itself when no link overlaps it)."""
    near = [
        link
        for link in links
        if link.x0 < seg.x1 and link.x1 > seg.x0 and link.top < seg.bottom and link.bottom > seg.top
    ]
    if not near:
        return [seg]
    pieces: list[Segment] = []
    begin = 0
    current: str | None = None
    bounds: list[float] = []
    for offset, ch in enumerate(seg.text):
        if ch.isspace() or ch == "\ufffe":
            continue
        left, right, bottom, top = boxes.char(start + offset)
        middle = height - (bottom + top) / 2
        target = next((lk.uri for lk in near if _under(lk, (left + right) / 2, middle)), None)
        if target != current and offset > begin:
            pieces.append(
                attrs.evolve(
                    seg,
                    text=seg.text[begin:offset],
                    link=current,
                    x0=bounds[0] if bounds else seg.x0,
                    x1=bounds[-1] if bounds else seg.x1,
                )
            )
            begin, bounds = offset, []
        if target != current:
            current = target
        bounds += [left, right]
    pieces.append(
        attrs.evolve(
            seg, text=seg.text[begin:], link=current, x0=bounds[0] if bounds else seg.x0, x1=seg.x1
        )
    )
    return [p for p in pieces if p.text]
