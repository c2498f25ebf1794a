"""What a connection's socket buffer holds that nobody has read yet: a whole request head,
and whose it probably is.

The accept loop and the room made at the cap look at a connection before its task reads it
(under a flood a new connection waits many scheduling rounds for its first read): a whole
head there is a request about to start, and its token names its caller.
"""

from __future__ import annotations

import socket as stdlib_socket
from typing import Final, Protocol

from rypsok.mcp.http_app import HEADER_BLOCK_BYTES

__all__ = [
    "H2_PREFACE",
    "Socket",
    "authorization",
    "peek",
    "waiting_request",
    "whole_h2_head",
    "whole_http1_head",
]

H2_PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# HTTP/2 frames, for a newcomer's buffer (`whole_h2_head`): a frame's header is 9 bytes; a
# header block is a HEADERS frame and its CONTINUATION frames, the last flagged END_HEADERS.
_H2_FRAME_HEADER: Final = 9
_H2_BLOCK_FRAMES: Final = frozenset({0x1, 0x9})
_H2_END_HEADERS: Final = 0x4
_PEEK: Final = stdlib_socket.MSG_PEEK | stdlib_socket.MSG_DONTWAIT


class Socket(Protocol):
    """A socket object that owns its descriptor (trio's or the standard library's): its
    `fileno()` is -1 once it is closed, so a descriptor number is never kept past its
    socket's life (the number is reused by the next accept or file)."""

    def fileno(self) -> int: ...


def peek(sock: Socket) -> bytes:
    """What `sock` has received and nobody has read yet (nothing is consumed); b"" once it
    is closed, or when the peer's socket fails (that error is its reader's to meet)."""
    if isinstance(sock, stdlib_socket.socket) and not sock.gettimeout():
        # Its own object, without a timeout (a timeout would wait for readable before the
        # receive): no second object to make, once per refused newcomer of a flood.
        try:
            return sock.recv(HEADER_BLOCK_BYTES, _PEEK)
        except OSError:
            return b""  # closed (EBADF), nothing there yet (EAGAIN), or the peer's error
    fd = sock.fileno()
    if fd < 0:
        return b""
    try:
        # A second object on the same descriptor, for a non-blocking peek trio does not
        # offer; detached below, so that the descriptor stays `sock`'s.
        probe = stdlib_socket.socket(fileno=fd)
    except OSError:
        return b""
    try:
        return probe.recv(HEADER_BLOCK_BYTES, _PEEK)
    except OSError:
        return b""
    finally:
        probe.detach()


def whole_http1_head(peeked: bytes) -> bytes | None:
    """The first HTTP/1 head of `peeked` when it is whole, else None."""
    if peeked.startswith(H2_PREFACE[:3]):
        return None
    head, found, _ = peeked.partition(b"\r\n\r\n")
    return head if found else None


def whole_h2_head(peeked: bytes) -> bool:
    """Whether `peeked` holds the HTTP/2 preface and, after it, a whole header block: frames
    each wholly there up to a HEADERS or CONTINUATION frame that ends the block (an h2c
    client writes its preface, SETTINGS and first request together)."""
    if not peeked.startswith(H2_PREFACE):
        return False
    at = len(H2_PREFACE)
    while at + _H2_FRAME_HEADER <= len(peeked):
        length = int.from_bytes(peeked[at : at + 3], "big")
        kind, flags = peeked[at + 3], peeked[at + 4]
        at += _H2_FRAME_HEADER + length
        if at > len(peeked):
            return False
        if kind in _H2_BLOCK_FRAMES and flags & _H2_END_HEADERS:
            return True
    return False


def waiting_request(peeked: bytes) -> bytes | None:
    """The whole request head at the start of `peeked`: an HTTP/1 head, b"" for an HTTP/2
    preface and header block (its caller is not known without HPACK), else None."""
    head = whole_http1_head(peeked)
    if head is None and whole_h2_head(peeked):
        return b""
    return head


def authorization(head: bytes) -> bytes | None:
    """The Authorization field of an HTTP/1 head, unchecked (the gate and the app check the
    head; this only tells the accept loop whose connection it probably is)."""
    for line in head.split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if colon and name.lower() == b"authorization":
            return value.strip()
    return None
