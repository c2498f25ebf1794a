"""Newline-delimited framing of the stdio transport, bounded by LIM-O3.

A line longer than the bound (newline included) is dropped without an answer and reading
goes on after its newline; the bytes of such a line are never held, only counted.
"""

from __future__ import annotations

__all__ = ["MAX_LINE_BYTES", "LineDecoder"]

MAX_LINE_BYTES = 16 * 1024 * 1024  # LIM-O3, newline included


class LineDecoder:
    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._max = max_line_bytes
        self._buffer = bytearray()
        self._discarding = False
        self.dropped = 0  # lines dropped for their length

    def feed(self, data: bytes | bytearray) -> list[bytes]:
        """The complete lines in `data` (without their newline), in order."""
        lines: list[bytes] = []
        start = 0
        while start < len(data):
            end = data.find(b"\n", start)
            if end == -1:
                self._keep(data[start:])
                break
            if self._discarding:
                self._discarding = False
            elif len(self._buffer) + (end - start) + 1 > self._max:
                self._buffer.clear()
                self.dropped += 1
            else:
                self._buffer += data[start:end]
                lines.append(bytes(self._buffer))
                self._buffer.clear()
            start = end + 1
        return lines

    def _keep(self, tail: bytes | bytearray) -> None:
        if self._discarding:
            return
        # Without its newline the line already needs len + 1 bytes: past the bound it is
        # dropped now, and its remaining bytes are skipped up to the next newline.
        if len(self._buffer) + len(tail) + 1 > self._max:
            self._buffer.clear()
            self._discarding = True
            self.dropped += 1
            return
        self._buffer += tail

    def finish(self) -> bytes | None:
        """At end of input: the last line if it had no newline (and fit the bound)."""
        if self._discarding or not self._buffer:
            return None
        line = bytes(self._buffer)
        self._buffer.clear()
        return line
