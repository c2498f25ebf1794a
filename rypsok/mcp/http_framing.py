"""What the listener reads of the bytes before hypercorn does: sans-I/O, one object per
connection, no copy of a body.

`Http1RequestParser` holds each HTTP/1 request head back until it is complete, checks it strictly
(RFC 9112) and hands hypercorn (h11) a head that h11 and any proxy in front must read the same
way, or refuses it (request smuggling). h11 is lenient where a proxy may not be:
it accepts a folded field, a bare LF, a lower-case method (hypercorn upper-cases it), an
`HTTP/2.0` request line, and keeps the connection after refusing Content-Length with
Transfer-Encoding. After the head the body passes through as it comes, its framing followed
(a length, or chunks) so that the next head is found where h11 will find it.

`H2FrameParser` follows the HTTP/2 frame headers as they pass (the payloads are counted, never
kept): a header block (HEADERS and its CONTINUATION frames) above LIM-H7 closes the
connection at once, before h2 has buffered the fragments.
"""

from __future__ import annotations

import re
from typing import Final

import attrs

__all__ = ["GateRefusal", "H2FrameParser", "HeadRefused", "Http1RequestParser"]

_TOKEN: Final = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_REQUEST_LINE: Final = re.compile(rb"(" + _TOKEN + rb") ([^ ]+) (HTTP/[0-9]\.[0-9])")
_METHOD: Final = re.compile(rb"[A-Z]+")
_FIELD_NAME: Final = re.compile(_TOKEN)
# Field values: visible ASCII, space, tab and obs-text; never a control byte (NUL, CR, LF).
_BAD_VALUE_BYTE: Final = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
# The request-target: visible ASCII only (RFC 9112 §3.2; RFC 3986 characters are a subset).
_BAD_TARGET_BYTE: Final = re.compile(rb"[^\x21-\x7e]")
_ABSOLUTE: Final = re.compile(rb"(?i:http)://([^/?#]+)([^#]*)")
_DIGITS: Final = re.compile(rb"[0-9]{1,18}")
_CHUNK_SIZE: Final = re.compile(rb"([0-9A-Fa-f]{1,15})[ \t]*(;.*)?")
# Fields that would switch the connection to another protocol (h2c, WebSocket) in hypercorn,
# which the listener does not serve past its gate; dropped, as RFC 9110 §7.8 lets a server do.
_DROPPED: Final = frozenset({b"upgrade", b"http2-settings"})
_CHUNK_LINE_MAX: Final = 1024
_CONTINUE: Final = b"100-continue"


@attrs.frozen
class GateRefusal:
    """An answer to a head the gate refused: the status, the counted reason (None for 431:
    the contract neither counts nor logs an oversized header block)."""

    status: int
    reason: str | None


class HeadRefused(Exception):  # a refusal, not an error of the listener
    def __init__(self, refusal: GateRefusal) -> None:
        super().__init__(refusal.status)
        self.refusal = refusal


BAD_REQUEST: Final = GateRefusal(400, "bad_request")
HEAD_TOO_LARGE: Final = GateRefusal(431, None)
VERSION: Final = GateRefusal(505, "bad_request")
CODING: Final = GateRefusal(501, "bad_request")
EXPECTATION: Final = GateRefusal(417, "bad_request")
_HEAD, _LENGTH, _CHUNK_SIZE_LINE, _CHUNK_DATA, _CHUNK_END, _TRAILER = range(6)


class Http1RequestParser:
    """The HTTP/1 bytes of one connection, fed as they arrive.

    `feed` returns what hypercorn may read now, or raises `HeadRefused`; after a refusal the
    connection is to be answered (if idle) and closed, and nothing more is fed.
    """

    __slots__ = (
        "_buffer",
        "_limit",
        "_remaining",
        "_scanned",
        "_state",
        "expects_continue",
        "head_started",
        "refused",
    )

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._state = _HEAD
        self._buffer = bytearray()  # a head, a chunk-size line or a trailer line, never a body
        self._scanned = 0  # how much of `_buffer` is known to hold no end of head
        self._remaining = 0
        self.head_started = False  # a head's first bytes came, its end not yet
        self.expects_continue = False  # the last head asked for 100 (not passed on)
        self.refused: GateRefusal | None = None

    @property
    def in_body(self) -> bool:
        """Between a head and the end of its body: a refusal here cannot be answered."""
        return self._state != _HEAD

    def feed(self, data: bytes) -> bytes:
        """What may be passed on now; after a refusal (`refused`), nothing more."""
        out = bytearray()
        if self.refused is not None:
            return b""
        try:
            self._feed(memoryview(data), out)
        except HeadRefused as exc:
            self.refused = exc.refusal
        return bytes(out)

    def _feed(self, view: memoryview, out: bytearray) -> None:
        while view:
            if self._state == _HEAD:
                view = self._head(view, out)
            elif self._state in (_LENGTH, _CHUNK_DATA):
                # Body bytes pass as they come; only their count is followed.
                taken = min(self._remaining, len(view))
                out += view[:taken]
                view = view[taken:]
                self._remaining -= taken
                if not self._remaining:
                    self._state = _HEAD if self._state == _LENGTH else _CHUNK_END
            else:
                view = self._chunk_line(view, out)

    # -- the head -----------------------------------------------------------------------------

    def _head(self, view: memoryview, out: bytearray) -> memoryview:
        if not self._buffer:
            # RFC 9112 §2.2: empty lines before a request line are ignored.
            while view[:2].tobytes() == b"\r\n":
                view = view[2:]
            if not view:
                return view
        self.head_started = True
        start = len(self._buffer)
        self._buffer += view
        # Only the new bytes are searched (and the three before, for an end split across
        # reads): a head trickled a byte at a time costs its length, not its square.
        begin = max(self._scanned - 3, 0)
        end = self._buffer.find(b"\r\n\r\n", begin)
        if end < 0:
            if len(self._buffer) > self._limit:
                raise HeadRefused(HEAD_TOO_LARGE)
            self._check_line_ends(begin, len(self._buffer))
            self._scanned = len(self._buffer)
            return view[len(view) :]
        size = end + 4
        if size > self._limit:
            raise HeadRefused(HEAD_TOO_LARGE)
        self._check_line_ends(begin, size)
        head = bytes(self._buffer[:size])
        rest = view[size - start :]
        self._buffer.clear()
        self._scanned = 0
        self.head_started = False
        out += self._checked(head)
        return rest

    def _check_line_ends(self, begin: int, end: int) -> None:
        # A bare LF or CR: a proxy could end the line there, h11 does not (or the reverse).
        buffer = self._buffer
        at = buffer.find(b"\n", begin, end)
        while at >= 0:
            if at == 0 or buffer[at - 1] != 0x0D:
                raise HeadRefused(BAD_REQUEST)
            at = buffer.find(b"\n", at + 1, end)
        at = buffer.find(b"\r", begin, end)
        while at >= 0:
            if at + 1 < len(buffer) and buffer[at + 1] != 0x0A:
                raise HeadRefused(BAD_REQUEST)
            at = buffer.find(b"\r", at + 1, end)

    def _checked(self, head: bytes) -> bytes:
        """The head as hypercorn gets it, or HeadRefused; sets the body's framing."""
        lines = head[:-4].split(b"\r\n")
        match = _REQUEST_LINE.fullmatch(lines[0])
        if match is None:
            raise HeadRefused(BAD_REQUEST)
        method, target, version = match.groups()
        if version not in (b"HTTP/1.1", b"HTTP/1.0"):
            raise HeadRefused(VERSION)
        if _METHOD.fullmatch(method) is None:  # methods are case-sensitive (RFC 9110 §9.1)
            raise HeadRefused(BAD_REQUEST)
        if _BAD_TARGET_BYTE.search(target):
            raise HeadRefused(BAD_REQUEST)
        authority: bytes | None = None
        if not (target.startswith(b"/") or (target == b"*" and method == b"OPTIONS")):
            absolute = _ABSOLUTE.fullmatch(target)
            if absolute is None:
                raise HeadRefused(BAD_REQUEST)
            # RFC 9112 §3.2.2: the absolute form is accepted, and its authority stands for
            # the Host field, whatever that says.
            authority = absolute.group(1)
            target = absolute.group(2) or b"/"
            if not target.startswith(b"/"):
                target = b"/" + target
        fields: list[tuple[bytes, bytes]] = []
        for line in lines[1:]:
            if line[:1] in (b" ", b"\t"):
                raise HeadRefused(BAD_REQUEST)  # obsolete line folding (RFC 9112 §5.2)
            name, colon, value = line.partition(b":")
            if not colon or _FIELD_NAME.fullmatch(name) is None:
                raise HeadRefused(BAD_REQUEST)  # no colon, or space before it (§5.1)
            value = value.strip(b" \t")
            if _BAD_VALUE_BYTE.search(value):
                raise HeadRefused(BAD_REQUEST)
            fields.append((name.lower(), value))
        names = [name for name, _ in fields]
        lengths = [value for name, value in fields if name == b"content-length"]
        codings = [value for name, value in fields if name == b"transfer-encoding"]
        hosts = names.count(b"host")
        if lengths and codings:
            raise HeadRefused(BAD_REQUEST)  # RFC 9112 §6.3: refused, then closed
        if len(lengths) > 1 or len(codings) > 1:
            raise HeadRefused(BAD_REQUEST)
        if hosts > 1 or (hosts == 0 and version == b"HTTP/1.1" and authority is None):
            raise HeadRefused(BAD_REQUEST)  # RFC 9112 §3.2
        self._remaining = 0
        state = _HEAD
        if lengths:
            if _DIGITS.fullmatch(lengths[0]) is None:
                raise HeadRefused(BAD_REQUEST)
            self._remaining = int(lengths[0])
            state = _LENGTH if self._remaining else _HEAD
        elif codings:
            if version == b"HTTP/1.0":
                raise HeadRefused(BAD_REQUEST)
            if codings[0].lower() != b"chunked":
                raise HeadRefused(CODING)
            state = _CHUNK_SIZE_LINE
        expects = [value.lower() for name, value in fields if name == b"expect"]
        if expects and (expects != [_CONTINUE] or version == b"HTTP/1.0"):
            raise HeadRefused(EXPECTATION)
        # Not passed on: h11 would answer 100 before the app has decided (401, 413); the
        # listener sends it when the app first reads the body.
        self.expects_continue = bool(expects)
        self._state = state
        kept = [
            b"%s: %s" % (name, value)
            for name, value in fields
            if name not in _DROPPED and name != b"expect"
            and not (authority is not None and name == b"host")
        ]  # fmt: skip
        if authority is not None:
            kept.insert(0, b"host: " + authority)
        return b"\r\n".join([b"%s %s %s" % (method, target, version), *kept]) + b"\r\n\r\n"

    # -- chunks -------------------------------------------------------------------------------

    def _chunk_line(self, view: memoryview, out: bytearray) -> memoryview:
        """A chunk-size line, the CRLF after a chunk's data, or a trailer line."""
        start = len(self._buffer)
        self._buffer += view[: _CHUNK_LINE_MAX + 2]
        end = self._buffer.find(b"\r\n")
        if end < 0:
            if len(self._buffer) > _CHUNK_LINE_MAX or b"\n" in self._buffer:
                raise HeadRefused(BAD_REQUEST)
            out += view
            return view[len(view) :]
        line = bytes(self._buffer[:end])
        consumed = end + 2 - start
        out += view[:consumed]
        rest = view[consumed:]
        self._buffer.clear()
        if b"\n" in line or b"\r" in line:
            raise HeadRefused(BAD_REQUEST)
        if self._state == _CHUNK_END:
            if line:
                raise HeadRefused(BAD_REQUEST)
            self._state = _CHUNK_SIZE_LINE
        elif self._state == _CHUNK_SIZE_LINE:
            match = _CHUNK_SIZE.fullmatch(line)
            if match is None:
                raise HeadRefused(BAD_REQUEST)
            self._remaining = int(match.group(1), 16)
            self._state = _CHUNK_DATA if self._remaining else _TRAILER
        elif not line:  # _TRAILER: the empty line ends the message
            self._state = _HEAD
        return rest


# -- HTTP/2 -----------------------------------------------------------------------------------

_FRAME_HEADER: Final = 9
_HEADERS: Final = 0x1
_CONTINUATION: Final = 0x9
_END_HEADERS: Final = 0x4


class H2FrameParser:
    """The frame headers of one HTTP/2 connection's incoming bytes (after the preface).

    `feed` returns False once a header block is above `limit` bytes: the sum of its HEADERS
    and CONTINUATION payloads, counted as they arrive (padding included: a few bytes stricter
    than the header list it decodes to, never looser).
    """

    __slots__ = ("_header", "_in_block", "_kind_flags", "_limit", "_payload", "block_bytes")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._header = bytearray()  # a frame header split across reads
        self._payload = 0  # payload bytes of the current frame still to pass
        self._kind_flags = (0, 0)
        self._in_block = False
        self.block_bytes = 0

    @property
    def in_block(self) -> bool:
        """A header block has begun and not ended (the peer owes its CONTINUATION frames)."""
        return self._in_block

    def feed(self, data: bytes) -> bool:
        at = 0
        size = len(data)
        while at < size:
            if self._payload:
                taken = min(self._payload, size - at)
                self._payload -= taken
                at += taken
                continue
            need = _FRAME_HEADER - len(self._header)
            self._header += data[at : at + need]
            at += need
            if len(self._header) < _FRAME_HEADER:
                break
            header = self._header
            length = int.from_bytes(header[0:3], "big")
            kind, flags = header[3], header[4]
            self._header = bytearray()
            self._payload = length
            if kind == _HEADERS:
                self.block_bytes = length
                self._in_block = not flags & _END_HEADERS
            elif kind == _CONTINUATION:
                self.block_bytes += length
                self._in_block = not flags & _END_HEADERS
            if (kind in (_HEADERS, _CONTINUATION)) and self.block_bytes > self._limit:
                return False
            if not self._in_block:
                self.block_bytes = 0
        return True
