"""PDF bytes of shapes testkit/pdf_writer.py does not write: hostile and odd documents,
composed object by object for the web_fetch tests (REQ-PDF-105)."""

from __future__ import annotations

import zlib

from rypsok.core.fetch.pdf.compose import pdf_file

__all__ = [
    "TEXT_PAGE",
    "deep_nesting",
    "encrypted",
    "flate_bomb",
    "scan",
    "with_actions",
]

TEXT_PAGE = b"BT /F1 12 Tf 72 700 Td (The readable sentence of this document.) Tj ET\n"
_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def _stream(data: bytes, *, compress: bool = False, extra: bytes = b"") -> bytes:
    if compress:
        return (
            b"<< /Length %d /Filter /FlateDecode%s >>\nstream\n"
            % (
                len(data),
                extra,
            )
            + data
            + b"\nendstream"
        )
    return b"<< /Length %d%s >>\nstream\n" % (len(data), extra) + data + b"\nendstream"


def _one_page(
    content: bytes, *, page_extra: bytes = b"", catalog_extra: bytes = b""
) -> list[bytes]:
    return [
        b"<< /Type /Catalog /Pages 2 0 R%s >>" % catalog_extra,
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R"
        b" >> >> /Contents 4 0 R%s >>" % page_extra,
        content,
        _FONT,
    ]


def encrypted() -> bytes:
    """A document under the standard security handler whose user password is not empty."""
    objects = _one_page(_stream(b"\x8a\x13\x99" * 40))
    objects.append(
        b"<< /Filter /Standard /V 1 /R 2 /O <%s> /U <%s> /P -44 >>" % (b"6b" * 32, b"2c" * 32)
    )
    file_id = b"<" + b"0123456789abcdef" * 2 + b">"
    trailer = b" /Encrypt 6 0 R /ID [" + file_id + b" " + file_id + b"]"
    return pdf_file(objects, trailer=trailer)


def scan() -> bytes:
    """A page that is only an image (a scan): no text layer."""
    pixels = zlib.compress(bytes(range(256)) * 64)
    image = _stream(
        pixels,
        compress=True,
        extra=b" /Type /XObject /Subtype /Image /Width 128 /Height 128 /ColorSpace /DeviceGray"
        b" /BitsPerComponent 8",
    )
    return pdf_file(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject"
            b" << /Im1 5 0 R >> >> /Contents 4 0 R >>",
            _stream(b"q 400 0 0 400 100 200 cm /Im1 Do Q\n"),
            image,
        ]
    )


def flate_bomb(decompressed_mib: int) -> bytes:
    """One page whose Flate content stream inflates to `decompressed_mib` MiB of text-show
    operators, made without holding the inflated stream."""
    line = b"BT /F1 12 Tf 72 700 Td (" + b"A" * 60 + b") Tj ET\n"
    block = line * ((1 << 20) // len(line))
    compressor = zlib.compressobj(9)
    data = b"".join(compressor.compress(block) for _ in range(decompressed_mib))
    data += compressor.flush()
    return pdf_file(_one_page(_stream(data, compress=True)))


def deep_nesting(depth: int) -> bytes:
    """A page that reads, with an array nested `depth` deep in its dictionary."""
    nested = b"[" * depth + b"]" * depth
    return pdf_file(_one_page(_stream(TEXT_PAGE), page_extra=b" /Deep " + nested))


def with_actions(marker: str) -> bytes:
    """A page that reads, with a JavaScript open action, a launch action that would create
    `marker`, and a link whose target is javascript:."""
    objects = _one_page(
        _stream(TEXT_PAGE),
        page_extra=b" /Annots [6 0 R 7 0 R] /AA << /O 8 0 R >>",
        catalog_extra=b" /OpenAction << /S /JavaScript /JS (app.alert\\('opened'\\);) >>"
        b" /Names << /JavaScript << /Names [(a) << /S /JavaScript /JS (app.launchURL\\("
        b"'https://example.net/'\\);) >>] >> >>",
    )
    command = f"/usr/bin/touch {marker}".encode()
    objects += [
        b"<< /Type /Annot /Subtype /Link /Rect [72 690 400 715] /A << /S /URI"
        b" /URI (javascript:alert\\(1\\)) >> >>",
        b"<< /Type /Annot /Subtype /Link /Rect [72 600 400 620] /A << /S /Launch /F ("
        + command
        + b") /Win << /F (cmd.exe) /P (/c calc) >> >> >>",
        b"<< /S /Launch /F (" + command + b") >>",
    ]
    return pdf_file(objects)
