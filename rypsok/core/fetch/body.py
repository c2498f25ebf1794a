"""A fetched body read as a stream, decompressed here and bounded after decompression.

REQ-PAGE-003/004 and REQ-SEC-013: the count that ends a read is the count of decompressed
bytes as they are produced, never the Content-Length. Decompression runs in small steps
(`zlib`'s `max_length`), so a gzip bomb stops at the bound plus one step: it is never held
whole, nor even one decompressed network chunk of it.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Final

import httpx
import trio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["ACCEPT_ENCODING", "BodyTooLarge", "UnreadableBody", "read_bounded"]

ACCEPT_ENCODING: Final = "gzip, deflate"
# What one decompression step may produce; the overshoot of a bomb is at most this.
_STEP_BYTES: Final = 65536
# Closing the connection of an abandoned body is local work; this bounds a surprise only.
_ABANDON_S: Final = 0.1


class BodyTooLarge(Exception):
    """More than the byte limit after decompression (too_large)."""


class UnreadableBody(Exception):
    """A coding rypsok did not ask for, or a compressed stream that does not decode."""


class _PrefixFull(Exception):
    """The prefix wanted is complete (internal)."""


class _Decoder:
    def __init__(self, coding: str, limit: int, *, prefix: bool) -> None:
        self._limit = limit
        self._prefix = prefix
        self._count = 0
        # One growing buffer, not a list of chunks joined at the end: the join would hold
        # the body twice at its largest moment.
        self._buffer = bytearray()
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
            raise UnreadableBody

    def _keep(self, data: bytes) -> None:
        self._count += len(data)
        if self._count > self._limit:
            if self._prefix:
                # Only the first `limit` bytes are wanted: keep them and stop reading.
                self._buffer += data[: len(data) - (self._count - self._limit)]
                raise _PrefixFull
            raise BodyTooLarge
        self._buffer += data

    def feed(self, chunk: bytes) -> None:
        if self._z is None:
            self._keep(chunk)
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
                raise UnreadableBody from None
            self._raw_tried = True
            self._keep(out)
            if self._z.eof:
                return
            data = self._z.unconsumed_tail

    def taken(self) -> bytearray:
        return self._buffer

    def finish(self) -> bytearray:
        if self._z is not None:
            try:
                self._keep(self._z.flush())
            except zlib.error:
                raise UnreadableBody from None
            if not self._z.eof:
                raise UnreadableBody
        return self._buffer


def _content_coding(headers: httpx.Headers) -> str:
    codings = [c.strip().lower() for c in headers.get("content-encoding", "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if len(codings) > 1:
        # Stacked codings are legal but never needed for what rypsok asked for.
        raise UnreadableBody
    return codings[0] if codings else ""


async def read_bounded(response: httpx.Response, limit: int, *, prefix: bool = False) -> bytearray:
    """The decompressed body of a streamed response, at most `limit` bytes.

    Raises BodyTooLarge past the limit (with `prefix`, returns the first `limit` bytes
    instead: a robots.txt is read that way, LIM-F13) and UnreadableBody for a coding that
    cannot be read; either way (and on cancellation) the connection is closed at once.
    """
    try:
        coding = _content_coding(response.headers)
    except UnreadableBody:
        await _abandon(response, None)
        raise
    declared = response.headers.get("content-length", "").strip()
    if not prefix and not coding and declared.isdigit() and int(declared) > limit:
        # A declared length above the limit ends the read before it starts; one below it is
        # not trusted: the count of bytes received decides.
        await _abandon(response, None)
        raise BodyTooLarge
    chunks: AsyncIterator[bytes] | None = None
    try:
        decoder = _Decoder(coding, limit, prefix=prefix)
        chunks = response.aiter_raw()
        async for chunk in chunks:
            decoder.feed(chunk)
        return decoder.finish()
    except _PrefixFull:
        await _abandon(response, chunks)
        return decoder.taken()
    except BaseException:
        await _abandon(response, chunks)
        raise


async def _abandon(response: httpx.Response, chunks: AsyncIterator[bytes] | None) -> None:
    """Stop reading: close the connection, then let httpx's generator chain end.

    Shielded and short so that a cancelled read still cleans up and never waits on the
    network; once the connection is closed the next step of the chain fails at once.
    """
    with trio.CancelScope(shield=True), trio.move_on_after(_ABANDON_S):
        await response.aclose()
        if chunks is not None:
            try:
                async for _ in chunks:
                    pass
            except (httpx.HTTPError, RuntimeError):
                pass
