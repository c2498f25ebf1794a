"""The PDF worker: the process that reads one document, started by `isolation.py`. Its
`main` never runs in the serving process (which takes only `answer_limit` from here).

    python -I -B -m rypsok.core.fetch.pdf.worker MAX_BYTES MAX_PAGES MAX_CHARS MEMORY CPU_S

It confines itself before it reads a byte of the document (REQ-PDF-102):

- an address-space limit (RLIMIT_AS, `MEMORY` bytes): an allocation past it fails, in
  Python (MemoryError, answered `memory`) or in PDFium (which then aborts the process);
- a CPU-time limit (RLIMIT_CPU, `CPU_S`): a document that keeps the parser busy is ended by
  the kernel (SIGXCPU, then SIGKILL a second later) even if the parent were gone;
- no new file descriptor at all (RLIMIT_NOFILE 0, after the code it needs is loaded and run
  once on a document of its own): no socket, no file, no pipe can be opened, even in the
  place of a descriptor it closes, so the worker reaches no network and reads no file; it
  has only the pipe it was handed the document on and the pipe it answers on;
- no process started (RLIMIT_NPROC 0; a limit root is not held to);
- no file written (RLIMIT_FSIZE 0) and no core dump (RLIMIT_CORE 0: a crash leaves no copy
  of the document on disk);
- killed with its parent (Linux's PR_SET_PDEATHSIG), so that no worker outlives the server.

The document comes on standard input, at most `MAX_BYTES` (LIM-F3) of it; the answer goes to
standard output as one JSON object, `{"ok": <to_wire>}` or `{"error": "encrypted" |
"unreadable" | "memory"}`, at most `answer_limit(MAX_CHARS)` bytes (the blocks that would pass
the bound are left out, and the document counts as read up to the page they start on). The
parent reads it as hostile data.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
import zlib
from typing import Final

from rypsok.config.memory import pdf_answer_bytes
from rypsok.core.fetch.pdf.compose import pdf_file

__all__ = ["answer", "answer_limit", "main"]

_PR_SET_PDEATHSIG: Final = 1


def answer_limit(max_chars: int) -> int:
    """The most bytes an answer of a document read to `max_chars` characters takes (JSON
    writes a character in at most 6 bytes, and the blocks' keys and numbers take a fixed
    part): the parent reads no more, whatever the document."""
    return pdf_answer_bytes(max_chars)


def _warm_document() -> bytes:
    """A one-page PDF with a heading, a line and a link: reading it before the confinement
    loads every module and codec the reading of a document needs (Python imports some on
    first use, and no file can be opened once confined)."""
    content = zlib.compress(
        b"BT /F1 18 Tf 72 700 Td (Warm) Tj ET\nBT /F1 11 Tf 72 660 Td (Body text.) Tj ET\n"
    )
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R"
        b" >> >> /Contents 4 0 R /Annots [6 0 R] >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content)
        + content
        + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Annot /Subtype /Link /Rect [72 655 140 672] /A << /S /URI"
        b" /URI (https://example.org/) >> >>",
        b"<< /Title (Warm \\376\\377) >>",
    ]
    return pdf_file(objects, trailer=b" /Info 7 0 R")


def _die_with_parent() -> None:
    # Linux only (the C library's prctl, found in the process's own symbols: no search for
    # the library, which would start ldconfig); elsewhere the CPU limit still ends a worker
    # whose parent is gone.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:
        # The parent ended before the call took effect.
        os._exit(1)


def _confine(memory: int, cpu_s: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    # No descriptor can be made from here on, not even in the place of one closed (a new
    # descriptor's number must be below the limit); the three open ones still work.
    resource.setrlimit(resource.RLIMIT_NOFILE, (0, 0))
    # No process can be started (a user other than root: the server's own process counts).
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


def _json(value: object) -> bytes:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", errors="replace")


def _bounded_answer(wire: dict[str, object], limit: int) -> bytes:
    """The answer's JSON within `limit` bytes: the blocks that fit, in order. A document whose
    answer would be longer (blocks of a few characters each) is answered in part: read up to
    the page of the first block left out, so that the answer says it was read in part."""
    data = _json({"ok": wire})
    if len(data) <= limit:
        return data
    blocks = wire["blocks"]
    assert isinstance(blocks, list)
    # `{"ok":{...,"blocks":[]}}`, then each block and its comma.
    used = len(_json({"ok": {**wire, "blocks": []}}))
    kept = 0
    for block in blocks:
        used += len(_json(block)) + 1
        if used > limit:
            break
        kept += 1
    # The page of the first block left out is left out whole: the document is read to the
    # page before it.
    first_left = blocks[kept]
    assert isinstance(first_left, dict)
    page = first_left["page"]
    whole = [block for block in blocks[:kept] if isinstance(block, dict) and block["page"] < page]
    return _json({"ok": {**wire, "blocks": whole, "pages_read": page}})


def answer(data: bytes, *, max_pages: int, max_chars: int) -> bytes:
    """The answer to a document: its wire form as JSON within `answer_limit(max_chars)`, or
    the failure. Any exception of the reading is an unreadable document: the reader runs a
    large C library and its own analysis on hostile bytes, and an error it did not foresee
    (PDFium refusing one page of a document it opened) is still a document not read."""
    from rypsok.core.fetch.pdf.model import PdfEncrypted, to_wire
    from rypsok.core.fetch.pdf.read import read_document

    try:
        doc = read_document(data, max_pages=max_pages, max_chars=max_chars)
        return _bounded_answer(to_wire(doc), answer_limit(max_chars))
    except PdfEncrypted:
        return b'{"error":"encrypted"}'
    except MemoryError:
        return b'{"error":"memory"}'
    except Exception:
        return b'{"error":"unreadable"}'


def main(argv: list[str]) -> int:
    """Read one document from standard input and answer on standard output."""
    max_bytes, max_pages, max_chars, memory, cpu_s = (int(value) for value in argv)
    _die_with_parent()
    # Imported and run once before the confinement (see _warm_document).
    answer(_warm_document(), max_pages=2, max_chars=1000)
    _confine(memory, cpu_s)
    data = sys.stdin.buffer.read(max_bytes + 1)
    if len(data) > max_bytes:
        reply = b'{"error":"unreadable"}'
    else:
        reply = answer(data, max_pages=max_pages, max_chars=max_chars)
    out = sys.stdout.buffer
    out.write(reply)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
