"""The text of one PDF page as positioned segments, from PDFium's text page (REQ-PDF-001).

PDFium gives the page's text in one call, its characters in order with the spaces and line
breaks it infers. The text is cut into words there, and each word is placed by the loose
boxes (the font's ascent to descent) of its first and last characters; words on one line
closer than about an em, under the same link, make one segment, whose font size and weight
are read from its first character. Asking PDFium two boxes per word, rather than everything
per character or per text object (a browser writes one object per glyph), keeps the
reading within a small factor of PDFium's own plain text.

Coordinates are in points from the page's top-left corner.
"""

from __future__ import annotations

import ctypes
import re
from itertools import chain
from typing import TYPE_CHECKING, Final, NamedTuple

import pypdfium2.raw as pdfium_c

if TYPE_CHECKING:
    import pypdfium2 as pdfium

    from rypsok.core.fetch.pdf.links import LinkArea

__all__ = ["Segment", "page_segments"]

_BOLD_NAME: Final = re.compile(r"bold|black|heavy|semibold|demi|cmbx|cmb\d|bx\d", re.IGNORECASE)
_FORCE_BOLD: Final = 0x40000  # a font descriptor flag
_BOLD_FONTS: dict[tuple[bytes, int], bool] = {}  # whether a font is bold, by name and flags
_GAP: Final = 0.9  # a gap wider than this many ems between words splits a segment
_MAX_OBJECTS: Final = 6  # text objects in one line past which it is read word by word
# A line of a few words (a table's row, a heading) is read word by word: a gap between cells
# written in one operation does not show in its width as it does in a long line's.
_SHORT_LINE_SPACES: Final = 3
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_SPREAD: Final = 0.54  # ems per character past which a line's gaps are looked for
# A line of PDFium's text: up to a line break, or through a line-end hyphen mark.
_PIECE: Final = re.compile(r"[^\r\n\ufffe]+\ufffe?|\ufffe")
# A word: a run of characters up to a space, a line break or PDFium's line-end hyphen mark.
_TOKEN: Final = re.compile(r"[^\s\ufffe]+\ufffe?|\ufffe")


class Segment(NamedTuple):
    """A piece of one line of a page: text, box (top-down points), size in points, weight.

    A named tuple, not an attrs class: tens of thousands are made per document, and a
    tuple's construction is the cheapest immutable record Python has."""

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
    """A text page and the buffers its characters' loose boxes (the font's ascent to
    descent), fonts and text objects' rectangles are read into; the readers call PDFium
    inline, once per word or line end."""

    def __init__(self, textpage: pdfium.PdfTextPage, height: float) -> None:
        self.raw = textpage.raw
        self.height = height
        self.rect = pdfium_c.FS_RECTF()
        self.ref = ctypes.byref(self.rect)
        self.flags = ctypes.c_int(0)
        self.flags_ref = ctypes.byref(self.flags)
        self.name = ctypes.create_string_buffer(128)
        self.styled: tuple[int, float, bool] = (-1, 0.0, False)  # the last font read
        self.edges = [ctypes.c_double() for _ in range(4)]  # a text object's rectangle
        self.edge_refs = [ctypes.byref(v) for v in self.edges]


def _style(boxes: _Boxes, index: int, box_height: float) -> tuple[float, bool]:
    """Font size (in page points) and boldness of character `index`.

    Boldness is a font's: its name ("Bold", "CMBX"…), its descriptor's flag or weight,
    remembered by the font's name and flags.
    """
    if boxes.styled[0] == index:
        # A line read word by word asks again for its first character's font.
        _index, size, bold = boxes.styled
    else:
        raw = boxes.raw
        size = float(pdfium_c.FPDFText_GetFontSize(raw, index))
        pdfium_c.FPDFText_GetFontInfo(raw, index, boxes.name, 128, boxes.flags_ref)
        font = (boxes.name.value, boxes.flags.value)
        known = _BOLD_FONTS.get(font)
        if known is None:
            known = (
                bool(font[1] & _FORCE_BOLD)
                or _BOLD_NAME.search(font[0].decode("latin-1", errors="replace")) is not None
                or int(pdfium_c.FPDFText_GetFontWeight(raw, index)) >= 600
            )
            if len(_BOLD_FONTS) < 4096:
                _BOLD_FONTS[font] = known
        bold = known
        boxes.styled = (index, size, bold)
    # A font size in other units than the page's (a text matrix scales it) shows in the box.
    if size <= 0 or not 0.7 < box_height / size < 1.8:
        size = box_height / 1.15
    return (1.0 if size < 1.0 else size), bold  # (max's result, without the call)


def _link_at(links: list[LinkArea], x: float, y: float) -> str | None:
    for link in links:
        if link.x0 - 1 <= x <= link.x1 + 1 and link.top - 1 <= y <= link.bottom + 1:
            return link.uri
    return None


def page_segments(
    page: pdfium.PdfPage, page_index: int, links: list[LinkArea] | None = None
) -> list[Segment]:
    """The segments of `page` in PDFium's character order (empty for a page without text).

    A word goes on the segment before it when it sits on the same line, less than _GAP ems
    after it, under the same link (see the module's docstring).
    """
    textpage = page.get_textpage()
    try:
        count = textpage.count_chars()
        if count <= 0:
            return []
        text = textpage.get_text_range(0, count)
        if len(text) != count:
            # Characters outside the BMP: PDFium's indices and the string's part ways.
            text = "".join(
                chr(pdfium_c.FPDFText_GetUnicode(textpage.raw, i) or 32) for i in range(count)
            )
        boxes = _Boxes(textpage, float(page.get_height()))
        return _line_segments(text, boxes, page_index, links or [])
    finally:
        textpage.close()


def _line_segments(
    text: str, boxes: _Boxes, page_index: int, links: list[LinkArea]
) -> list[Segment]:
    """The segments of a page read by PDFium's lines, each placed by its two ends.

    A line of PDFium's text (up to a line break, or a line-end hyphen where PDFium joined
    two lines) is one segment when its two ends sit on one baseline, its width is what its
    characters explain and it has more than a few words. Otherwise (two columns' lines
    written as one, a table's row, a line stretched by justification, a link over part of
    it) it is read word by word.
    """
    out: list[Segment] = []
    get_box, raw, ref, rect, page_height = (
        pdfium_c.FPDFText_GetLooseCharBox,
        boxes.raw,
        boxes.ref,
        boxes.rect,
        boxes.height,
    )
    for match in _PIECE.finditer(text):
        whole = match.group()
        piece = whole.strip(" ")
        if not piece:
            continue
        first = match.start() + len(whole) - len(whole.lstrip(" "))
        end = first + len(piece)
        if 0 < piece.count(" ") <= _SHORT_LINE_SPACES:
            out.extend(_segments(text, boxes, page_index, links, first, end))
            continue
        # The two ends' loose boxes, top-down.
        get_box(raw, first, ref)
        x0, top, bottom = rect.left, page_height - rect.top, page_height - rect.bottom
        get_box(raw, end - 1, ref)
        x1, last_top, last_bottom = rect.right, page_height - rect.top, page_height - rect.bottom
        height = bottom - top
        slack = 0.35 * height
        rise, drop = last_top - top, last_bottom - bottom
        if rise > slack or -rise > slack or drop > slack or -drop > slack:
            out.extend(_segments(text, boxes, page_index, links, first, end))
            continue
        size, bold = _style(boxes, first, height)
        if (
            not 0 < x1 - x0 < _SPREAD * size * (end - first)
            or not _objects_close(boxes, first, end, size)
            or (links and _linked(links, x0, x1, top, bottom))
        ):
            out.extend(_segments(text, boxes, page_index, links, first, end))
            continue
        out.append(Segment(page_index, _paired(piece), x0, x1, top, bottom, size, bold, None))
    return out


def _objects_close(boxes: _Boxes, first: int, end: int, size: float) -> bool:
    """Whether the text objects of characters first..end follow each other without a gap.

    Two columns' lines or a table's cells are written by separate operations with a gap
    between them; a line set as a few operations (a font change) has none. A line of more
    than a few objects (a browser writes one per glyph) is read word by word.
    """
    count = int(pdfium_c.FPDFText_CountRects(boxes.raw, first, end - first))
    if count == 1:
        return True
    if count > _MAX_OBJECTS:
        return False
    values, refs = boxes.edges, boxes.edge_refs
    previous_right: float | None = None
    for index in range(count):
        pdfium_c.FPDFText_GetRect(boxes.raw, index, *refs)
        left, _top, right, _bottom = (v.value for v in values)
        if previous_right is not None and not -0.3 * size < left - previous_right < _GAP * size:
            return False
        previous_right = right
    return True


def _linked(links: list[LinkArea], x0: float, x1: float, top: float, bottom: float) -> bool:
    return any(
        link.x0 < x1 and link.x1 > x0 and link.top < bottom and link.bottom > top for link in links
    )


def _segments(
    text: str,
    boxes: _Boxes,
    page_index: int,
    links: list[LinkArea],
    start: int = 0,
    end: int | None = None,
) -> list[Segment]:
    """The segments of `text[start:end]` read word by word (see the module's docstring).

    The segment being built is held in local variables: this loop runs once per word of
    every line that is not read whole, the bulk of a browser's page.
    """
    out: list[Segment] = []
    # Each word's first and last characters' loose boxes, top-down.
    get_box, raw, ref, rect, height = (
        pdfium_c.FPDFText_GetLooseCharBox,
        boxes.raw,
        boxes.ref,
        boxes.rect,
        boxes.height,
    )
    open_ = False
    seg_start = seg_end = 0
    cur_x0 = cur_x1 = cur_top = cur_bottom = cur_size = 0.0
    cur_bold = False
    cur_link: str | None = None
    # The words, then None: the segment still open at the end is closed by the same code
    # that closes one when a word does not join it.
    words = _TOKEN.finditer(text, start, len(text) if end is None else end)
    for match in chain(words, (None,)):
        if match is not None:
            first, stop = match.span()
            get_box(raw, first, ref)
            x0, right, top, bottom = rect.left, rect.right, height - rect.top, height - rect.bottom
            if stop - 1 > first:
                get_box(raw, stop - 1, ref)
                right, top2, bottom2 = rect.right, height - rect.top, height - rect.bottom
                if top2 < top:
                    top = top2
                if bottom2 > bottom:
                    bottom = bottom2
            link = _link_at(links, (x0 + right) / 2, (top + bottom) / 2) if links else None
            if open_:
                limit = 0.4 * cur_size
                gap = x0 - cur_x1
                if (
                    -limit < top - cur_top < limit
                    and -limit < bottom - cur_bottom < limit
                    and -0.3 * cur_size < gap < _GAP * cur_size
                    and link == cur_link
                ):
                    seg_end = stop
                    if right > cur_x1:
                        cur_x1 = right
                    if top < cur_top:
                        cur_top = top
                    if bottom > cur_bottom:
                        cur_bottom = bottom
                    continue
        if open_:
            out.append(
                Segment(
                    page_index,
                    _paired(text[seg_start:seg_end]),
                    cur_x0,
                    cur_x1,
                    cur_top,
                    cur_bottom,
                    cur_size,
                    cur_bold,
                    cur_link,
                )
            )
        if match is None:
            break
        cur_size, cur_bold = _style(boxes, first, bottom - top)
        open_, seg_start, seg_end, cur_link = True, first, stop, link
        cur_x0, cur_x1, cur_top, cur_bottom = x0, right, top, bottom
    return out


def _paired(text: str) -> str:
    """`text` with UTF-16 surrogate pairs as the characters they encode (PDFium counts a
    character outside the BMP as two) and a lone surrogate as U+FFFD."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
