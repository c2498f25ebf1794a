"""Link annotations of a page, and a block's text as runs carrying them (REQ-PDF-009).

Only a link whose action is a URI action carries a target; the target is returned as the
document wrote it (bounded), and the renderer judges it as a page's link is judged. Links to
places in the document (GoTo), launch and JavaScript actions carry none: their text stays
plain and nothing is run.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Final

import attrs
import pypdfium2.raw as pdfium_c

from rypsok.core.fetch.pdf.lines import join_pieces
from rypsok.core.fetch.pdf.model import MAX_WIRE_LINK_CHARS, PdfRun
from rypsok.core.fetch.pdf.reflow import clean_text, join_lines

if TYPE_CHECKING:
    import pypdfium2 as pdfium

    from rypsok.core.fetch.pdf.lines import Line
    from rypsok.core.fetch.pdf.reflow import Vocabulary

__all__ = ["LinkArea", "page_links", "runs_of"]

_MAX_LINKS: Final = 2000  # link annotations read on one page


@attrs.frozen
class LinkArea:
    """A link's rectangle in top-down points and its URI."""

    x0: float
    top: float
    x1: float
    bottom: float
    uri: str


def _uri(document: pdfium.PdfDocument, action: object) -> str | None:
    size = int(pdfium_c.FPDFAction_GetURIPath(document.raw, action, None, 0))
    if size <= 1 or size > MAX_WIRE_LINK_CHARS + 1:
        return None
    buffer = ctypes.create_string_buffer(size)
    pdfium_c.FPDFAction_GetURIPath(document.raw, action, buffer, size)
    uri = buffer.raw[: size - 1].decode("latin-1").strip()
    return uri or None


def page_links(document: pdfium.PdfDocument, page: pdfium.PdfPage) -> list[LinkArea]:
    """The URI links of `page` (at most _MAX_LINKS)."""
    height = float(page.get_height())
    position = ctypes.c_int(0)
    link = pdfium_c.FPDF_LINK()
    out: list[LinkArea] = []
    while len(out) < _MAX_LINKS and pdfium_c.FPDFLink_Enumerate(
        page.raw, ctypes.byref(position), ctypes.byref(link)
    ):
        action = pdfium_c.FPDFLink_GetAction(link)
        if not action or pdfium_c.FPDFAction_GetType(action) != pdfium_c.PDFACTION_URI:
            continue
        uri = _uri(document, action)
        rect = pdfium_c.FS_RECTF()
        if uri is None or not pdfium_c.FPDFLink_GetAnnotRect(link, ctypes.byref(rect)):
            continue
        left, right = sorted((rect.left, rect.right))
        low, high = sorted((rect.bottom, rect.top))
        out.append(LinkArea(x0=left, top=height - high, x1=right, bottom=height - low, uri=uri))
    return out


def _pieces(lines: list[Line]) -> list[tuple[str, str | None]]:
    """The block's text in pieces of one link target (or none), in order."""
    pieces: list[tuple[str, str | None]] = []
    for line in lines:
        for seg in line.segments:
            if pieces and pieces[-1][1] == seg.link:
                pieces[-1] = (join_pieces([pieces[-1][0], seg.text]), seg.link)
            else:
                pieces.append((seg.text, seg.link))
    return pieces


def runs_of(lines: list[Line], vocabulary: Vocabulary) -> tuple[PdfRun, ...]:
    """A block's lines as running text, the linked stretches as runs of their own."""
    text = join_lines([line.text for line in lines], vocabulary)
    if all(seg.link is None for line in lines for seg in line.segments):
        return (PdfRun(text=text),)
    runs: list[PdfRun] = []
    cursor = 0
    for piece, link in _pieces(lines):
        if link is None:
            continue
        wanted = " ".join(clean_text(piece).split()).rstrip("-\ufffe")
        at = text.find(wanted, cursor) if wanted else -1
        if at < 0:
            continue
        if at > cursor:
            runs.append(PdfRun(text=text[cursor:at]))
        runs.append(PdfRun(text=wanted, link=link))
        cursor = at + len(wanted)
    if cursor < len(text):
        runs.append(PdfRun(text=text[cursor:]))
    return tuple(runs)
