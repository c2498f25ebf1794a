"""Content-coding decoding under a byte bound: the one decoder of engine answers and pages.

REQ-SEC-010, REQ-SEC-013, REQ-PAGE-003/004: what is counted against the bound is the
decompressed bytes as they are produced, never a declared length. Decompression runs in
steps (`zlib`'s `max_length`) of at most what the bound still allows plus one byte, and at
most `_STEP_BYTES`: a gzip bomb is cut one byte past the bound, never held whole, nor even
one decompressed network chunk of it.

The decoder keeps nothing itself: every decoded piece is appended to the caller's `out` (a
list for engine answers, joined once; for pages, one growing buffer, so that a page is never
held twice). It raises its own two exceptions; each caller turns them into its own error.
"""

from __future__ import annotations

import zlib
from typing import Final, Protocol

__all__ = ["BoundedDecoder", "Out", "OverBound", "UnreadableCoding"]

# What one decompression step may produce; the overshoot of a bomb is at most this.
_STEP_BYTES: Final = 65536


class UnreadableCoding(Exception):
    """A coding the decoder does not read, or a compressed stream that does not decode."""


class OverBound(Exception):
    """More than the bound after decompression (with `prefix`, the first `limit` bytes were
    appended to `out` first)."""


class Out(Protocol):
    """Where decoded pieces go: a `list[bytes]` or anything with the same `append`."""

    def append(self, piece: bytes, /) -> None: ...


class BoundedDecoder:
    """Decodes one content coding ("", identity, gzip, x-gzip, deflate) chunk by chunk.

    `feed` each received chunk, then `finish`; every decoded piece that is not empty is
    appended to `out` once the count allows it. Past `limit` decoded bytes, OverBound; with
    `prefix`, the part of the last piece that still fits is appended before. UnreadableCoding
    for another coding (raised at construction), a stream that does not decode, or one that
    ends early.
    """

    __slots__ = ("_coding", "_count", "_limit", "_out", "_prefix", "_raw_tried", "_z")

    def __init__(self, coding: str, limit: int, out: Out, *, prefix: bool = False) -> None:
        self._limit = limit
        # Called as `self._out.append`, not through a stored bound method: on a list that
        # call is the interpreter's fastest (the engine answers' hot path).
        self._out = out
        self._prefix = prefix
        self._count = 0
        self._coding = coding
        self._raw_tried = False
        self._z: zlib._Decompress | None
        if coding in ("", "identity"):
            self._z = None
        elif coding in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(wbits=31)
        elif coding == "deflate":
            self._z = zlib.decompressobj(wbits=15)
        else:
            raise UnreadableCoding

    def _take(self, data: bytes) -> None:
        self._count += len(data)
        if self._count > self._limit:
            if self._prefix:
                # Only the first `limit` bytes are wanted: they are kept, and reading stops.
                # (Nothing of `data` fits when the count was already at the limit.)
                kept = data[: len(data) - (self._count - self._limit)]
                if kept:
                    self._out.append(kept)
            raise OverBound
        if data:
            self._out.append(data)

    def feed(self, chunk: bytes) -> None:
        if self._z is None:
            self._take(chunk)
            return
        if self._z.eof:
            # After the stream's end: ignored, and never handed to zlib, which would keep
            # every such byte (its `unused_data`) outside the bound.
            return
        data = chunk
        while data:
            room = self._limit - self._count + 1
            try:
                out = self._z.decompress(data, min(room, _STEP_BYTES))
            except zlib.error:
                if self._coding == "deflate" and not self._raw_tried and not self._count:
                    # "deflate" is sent both zlib-wrapped and raw; the raw form is tried once.
                    self._raw_tried = True
                    self._z = zlib.decompressobj(wbits=-15)
                    continue
                raise UnreadableCoding from None
            self._raw_tried = True
            self._take(out)
            if self._z.eof:
                return  # trailing bytes after the stream's end are ignored
            data = self._z.unconsumed_tail

    def finish(self) -> None:
        """The rest of the stream; UnreadableCoding when it did not reach its end."""
        if self._z is not None:
            try:
                self._take(self._z.flush())
            except zlib.error:
                raise UnreadableCoding from None
            if not self._z.eof:
                raise UnreadableCoding
