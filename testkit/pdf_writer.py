"""A small deterministic writer of PDF bytes, for tests that compose a document in the test.

It writes what a test of the PDF reading needs and nothing else: pages of a given size, text
placed at positions in one of the standard-14 fonts at a size, link annotations (a URI
action), the info dictionary's title, and optionally Flate-compressed content streams. The
same input always gives the same bytes (no dates, no random ids), so a test can also build a
file, change a few bytes and know what it changed.

Positions are in points from the page's top-left corner (``y`` is the text's baseline), the
way a test author thinks of a page; the writer turns them into PDF's bottom-left space.

Text is encoded in WinAnsiEncoding; the ligatures ``ﬁ`` and ``ﬂ`` are written as the fonts'
own ligature glyphs (a Differences entry naming /fi and /fl), as TeX writes them, so a test
can check that the reading expands them.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Final

import attrs

from rypsok.core.fetch.pdf.compose import pdf_file

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["FONTS", "Link", "Page", "Text", "pdf_bytes", "text_lines"]

# The standard-14 text fonts a test may name (Symbol and ZapfDingbats have no WinAnsi text).
FONTS: Final = (
    "Helvetica",
    "Helvetica-Bold",
    "Helvetica-Oblique",
    "Times-Roman",
    "Times-Bold",
    "Times-Italic",
    "Courier",
    "Courier-Bold",
)

# Codes 1 and 2 name the ligature glyphs through the font's Differences array.
_LIGATURES: Final = {"\ufb01": b"\x01", "\ufb02": b"\x02"}


@attrs.frozen
class Text:
    """A run of text whose baseline starts at (x, y), y measured down from the page's top."""

    x: float
    y: float
    text: str
    size: float = 11.0
    font: str = "Helvetica"


@attrs.frozen
class Link:
    """A link annotation over the rectangle (x0, y0)-(x1, y1), y measured down from the top.

    The action is a URI action with `uri` as written (any scheme, ``javascript:`` too: the
    reader must judge it, the writer does not).
    """

    x0: float
    y0: float
    x1: float
    y1: float
    uri: str


@attrs.frozen
class Page:
    """One page: its text runs, its links and its size in points (US Letter by default)."""

    texts: tuple[Text, ...] = ()
    links: tuple[Link, ...] = ()
    width: float = 612.0
    height: float = 792.0


def text_lines(
    lines: list[str] | tuple[str, ...],
    *,
    x: float = 72.0,
    y: float = 100.0,
    size: float = 11.0,
    leading: float = 1.25,
    font: str = "Helvetica",
) -> tuple[Text, ...]:
    """Lines of text set one under the other from (x, y), `leading` times the size apart."""
    return tuple(
        Text(x=x, y=y + i * size * leading, text=line, size=size, font=font)
        for i, line in enumerate(lines)
    )


def _encode(text: str) -> bytes:
    out = bytearray()
    for ch in text:
        lig = _LIGATURES.get(ch)
        raw = lig if lig is not None else ch.encode("cp1252", errors="replace")
        for byte in raw:
            if byte in b"()\\":
                out += b"\\" + bytes([byte])
            elif byte < 32 or byte > 126:
                out += b"\\%03o" % byte
            else:
                out.append(byte)
    return bytes(out)


def _number(value: float) -> bytes:
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return (text if text not in ("", "-0") else "0").encode("ascii")


def _string(text: str) -> bytes:
    return b"(" + _encode(text) + b")"


def _content(page: Page, font_ids: dict[str, int]) -> bytes:
    ops = []
    for run in page.texts:
        ops.append(
            b"BT /F%d %s Tf %s %s Td %s Tj ET"
            % (
                font_ids[run.font],
                _number(run.size),
                _number(run.x),
                _number(page.height - run.y),
                _string(run.text),
            )
        )
    return b"\n".join(ops) + b"\n"


def pdf_bytes(
    pages: list[Page] | tuple[Page, ...],
    *,
    title: str | None = None,
    compress: bool = False,
) -> bytes:
    """The bytes of a PDF holding `pages` (at least one), with `title` in its info dictionary.

    `compress` writes each content stream Flate-encoded, as most producers do.
    """
    if not pages:
        raise ValueError("a PDF needs at least one page")
    used = sorted({run.font for page in pages for run in page.texts} or {"Helvetica"})
    for font in used:
        if font not in FONTS:
            raise ValueError(f"not a standard-14 text font: {font}")
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled in once the page tree's number is known
    pages_id = add(b"")
    font_ids: dict[str, int] = {}
    font_refs = []
    for index, font in enumerate(used, start=1):
        font_ids[font] = index
        ref = add(
            b"<< /Type /Font /Subtype /Type1 /BaseFont /%s /Encoding << /Type /Encoding"
            b" /BaseEncoding /WinAnsiEncoding /Differences [1 /fi /fl] >> >>" % font.encode()
        )
        font_refs.append(b"/F%d %d 0 R" % (index, ref))
    resources = b"<< /Font << " + b" ".join(font_refs) + b" >> >>"
    kids = []
    for page in pages:
        stream = _content(page, font_ids)
        if compress:
            stream = zlib.compress(stream, 9)
            head = b"<< /Length %d /Filter /FlateDecode >>" % len(stream)
        else:
            head = b"<< /Length %d >>" % len(stream)
        content = add(head + b"\nstream\n" + stream + b"\nendstream")
        annots = [_link(link, page.height, add) for link in page.links]
        annot_part = (
            b" /Annots [" + b" ".join(b"%d 0 R" % a for a in annots) + b"]" if annots else b""
        )
        kids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 %s %s] /Resources %s"
                b" /Contents %d 0 R%s >>"
                % (
                    pages_id,
                    _number(page.width),
                    _number(page.height),
                    resources,
                    content,
                    annot_part,
                )
            )
        )
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % pages_id
    objects[pages_id - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )
    info = add(b"<< /Title " + _utf16_string(title) + b" >>") if title is not None else None
    return pdf_file(objects, root=catalog, trailer=b"" if info is None else b" /Info %d 0 R" % info)


def _link(link: Link, height: float, add: Callable[[bytes], int]) -> int:
    uri = link.uri.encode("latin-1", errors="replace")
    escaped = uri.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")
    body = b"<< /Type /Annot /Subtype /Link /Rect [%s %s %s %s] /Border [0 0 0]" % (
        _number(link.x0),
        _number(height - link.y1),
        _number(link.x1),
        _number(height - link.y0),
    )
    body += b" /A << /S /URI /URI (" + escaped + b") >> >>"
    return add(body)


def _utf16_string(text: str) -> bytes:
    if text.isascii():
        return (
            b"("
            + text.encode("ascii")
            .replace(b"\\", b"\\\\")
            .replace(b"(", b"\\(")
            .replace(b")", b"\\)")
            + b")"
        )
    return b"<FEFF" + text.encode("utf-16-be").hex().upper().encode("ascii") + b">"
