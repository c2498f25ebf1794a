"""The log's writer thread: serving never waits for standard error.

A host may start `rypsok serve` with standard error on a pipe it never reads (the MCP stdio
transport lets it). A blocking write from the event loop then stops every call once the pipe
is full. So the loop only appends a line to a bounded buffer, and one thread of its own
writes the buffer out, blocking as long as the reader makes it. When the buffer is full a
line is dropped and counted; once a write goes through again, one line says how many were
lost.

Why a thread and not O_NONBLOCK on standard error: the flag belongs to the open file
description, which the process shares with its parent and its siblings (a shell's terminal,
a supervisor's pipe, the journal's socket). Setting it would make their writes fail with
EAGAIN, and a dup shares the description, so it would not help.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING, Final, TextIO

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["BUFFER_BYTES", "BackgroundWriter"]

# What may wait for the reader: about 500 call lines, a few seconds of a busy service, and
# a small part of the memory at rest the estimate of `rypsok check` counts.
BUFFER_BYTES: Final = 256 * 1024


class BackgroundWriter:
    """Lines handed over by any thread, written in order by one daemon thread.

    `stream` is asked for the stream at each write (standard error may be replaced);
    `notice(count, total)` makes the line that reports `count` lines lost (`total` since
    the start); `dropped(count)` is told of each loss as it happens, for the counters.

    The lines travel through a `queue.SimpleQueue`, whose `put` and blocking `get` are C
    code; the byte count is kept beside it under a plain lock. (A `threading.Condition`,
    written in Python, cost every call's line a Python-level notify on the event loop's
    thread and a Python-level wait in this one: about 20,000 instructions a call.)
    """

    def __init__(
        self,
        stream: Callable[[], TextIO],
        notice: Callable[[int, int], str],
        dropped: Callable[[int], None],
        *,
        max_bytes: int = BUFFER_BYTES,
    ) -> None:
        self._stream = stream
        self._notice = notice
        self._on_dropped = dropped
        self._max_bytes = max_bytes
        # Lines, in order; None only wakes the thread (a flush, a loss with nothing queued).
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._lock = threading.Lock()  # the counts below
        self._bytes = 0  # of the lines put and not yet taken by the thread
        self._unwritten = 0  # lines put and not yet written
        self._lost = 0  # dropped since the last notice
        self._total_lost = 0
        # Told when a batch is written, only while a flush waits for it.
        self._written = threading.Condition(threading.Lock())
        self._flushing = 0
        self._thread = threading.Thread(target=self._run, name="rypsok-log", daemon=True)
        self._thread.start()

    @property
    def total_lost(self) -> int:
        return self._total_lost

    def put(self, line: str) -> None:
        """Queue one whole line; never blocks on the stream. A line that does not fit is
        dropped and counted (the newest go, so what is written stays in order)."""
        with self._lock:
            if self._bytes + len(line) > self._max_bytes:
                self._lost += 1
                self._total_lost += 1
                lost = True
            else:
                self._bytes += len(line)
                self._unwritten += 1
                # Put under the lock: lines enter the queue in the order they were counted.
                self._queue.put(line)
                lost = False
        if lost:
            self._on_dropped(1)

    def flush(self, timeout_s: float) -> bool:
        """Wait until everything queued is written, at most `timeout_s`; True if it was."""
        deadline = time.monotonic() + timeout_s
        with self._written:
            self._flushing += 1
            try:
                # A loss with nothing queued behind it still needs its notice written.
                self._queue.put(None)
                while self._pending():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._written.wait(left)
            finally:
                self._flushing -= 1
        return True

    def _pending(self) -> bool:
        with self._lock:
            return bool(self._unwritten or self._lost)

    def _run(self) -> None:
        take = self._queue.get
        more = self._queue.get_nowait
        while True:
            lines = [take()]
            try:
                while True:
                    lines.append(more())
            except queue.Empty:
                pass
            batch = "".join([line for line in lines if line is not None])
            taken = len(lines) - lines.count(None)
            with self._lock:
                self._bytes -= len(batch)
                # Every line lost so far came after every line taken: the buffer was full,
                # and it empties only here, so the notice follows the batch.
                lost, self._lost = self._lost, 0
                total = self._total_lost
            if lost:
                batch += self._notice(lost, total)
            if batch:
                self._write(batch)
            with self._lock:
                self._unwritten -= taken
            if self._flushing:
                with self._written:
                    self._written.notify_all()

    def _write(self, text: str) -> None:
        try:
            stream = self._stream()
            stream.write(text)
            stream.flush()
        except (OSError, ValueError):
            # A closed or broken stderr cannot be reported anywhere; serving goes on.
            pass
