"""A PDF file's bytes from its objects: the header, the objects numbered from 1, the
cross-reference table and the trailer.

The PDF worker composes its warm-up document with it (it may open no file once confined), and
the test kit's writers compose theirs with it, so that one writer of the file's frame serves
both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["pdf_file"]


def pdf_file(objects: Sequence[bytes], *, root: int = 1, trailer: bytes = b"") -> bytes:
    """A PDF 1.7 file of `objects` (object n is `objects[n - 1]`), with a correct
    cross-reference table; `root` is the catalog's number and `trailer` more entries of the
    trailer's dictionary (` /Info 7 0 R`). The same objects always give the same bytes."""
    # The comment of four bytes above 127 tells a reader the file holds binary data.
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root %d 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        root,
        trailer,
        xref,
    )
    return bytes(out)
