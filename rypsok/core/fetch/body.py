"""A fetched body read as a stream, decompressed as it comes and bounded after decompression.

REQ-PAGE-003/004 and REQ-SEC-013: the count that ends a read is the count of decompressed
bytes as they are produced, never the Content-Length. The decoder is `rypsok.core.content_coding`'s
(the engines' too); it decompresses in small steps, so a gzip bomb stops one byte past the
bound: it is never held whole, nor even one decompressed network chunk of it.

Implements LIM-F3.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import trio

from rypsok.core.content_coding import BoundedDecoder, OverBound, UnreadableCoding
from rypsok.core.egress.clients import TRANSPORT_ERRORS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from rypsok.core.egress.clients import HttpResponse, ResponseHeaders

__all__ = ["ACCEPT_ENCODING", "BodyTooLarge", "UnreadableBody", "read_bounded"]

ACCEPT_ENCODING: Final = "gzip, deflate"
# Closing the connection of an abandoned body is local work; this bounds a surprise only.
_ABANDON_S: Final = 0.1


class BodyTooLarge(Exception):
    """More than the byte limit after decompression (too_large)."""


class UnreadableBody(Exception):
    """A coding rypsok did not ask for, or a compressed stream that does not decode."""


class _Buffer:
    """The decoded body in one growing buffer, not a list of pieces joined at the end: the
    join would hold the body twice at its largest moment."""

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data = bytearray()

    def append(self, piece: bytes) -> None:
        self.data += piece


def _content_coding(headers: ResponseHeaders) -> str:
    codings = [c.strip().lower() for c in headers.get("content-encoding", "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if len(codings) > 1:
        # Stacked codings are legal but never needed for what rypsok asked for.
        raise UnreadableBody
    return codings[0] if codings else ""


async def read_bounded(response: HttpResponse, limit: int, *, prefix: bool = False) -> bytearray:
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
    body = _Buffer()
    try:
        decoder = BoundedDecoder(coding, limit, body, prefix=prefix)
        chunks = response.aiter_raw()
        async for chunk in chunks:
            decoder.feed(chunk)
        decoder.finish()
        return body.data
    except OverBound:
        await _abandon(response, chunks)
        if prefix:
            # Only the first `limit` bytes were wanted: the decoder kept them, reading stops.
            return body.data
        raise BodyTooLarge from None
    except UnreadableCoding:
        await _abandon(response, chunks)
        raise UnreadableBody from None
    except BaseException:
        await _abandon(response, chunks)
        raise


async def _abandon(response: HttpResponse, chunks: AsyncIterator[bytes] | None) -> None:
    """Stop reading: close the connection, then let httpcore's stream end.

    Shielded and short so that a cancelled read still cleans up and never waits on the
    network; once the connection is closed the next step of the chain fails at once.
    """
    with trio.CancelScope(shield=True), trio.move_on_after(_ABANDON_S):
        await response.aclose()
        if chunks is not None:
            try:
                async for _ in chunks:
                    pass
            except (*TRANSPORT_ERRORS, RuntimeError):
                pass
