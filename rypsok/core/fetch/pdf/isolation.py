"""One PDF read in a worker process of its own (REQ-PDF-102), from the serving process's side.

A fresh interpreter per document (`python -I -B -m rypsok.core.fetch.pdf.worker`): isolated
mode (no environment variables, no user site, no current directory on the import path), an
empty environment, no descriptor but the three pipes (close_fds), its own session, standard
error to the null device (the document's text never reaches a log), the current directory an
empty one of its own. The worker confines itself before it reads the document (worker.py:
address space, CPU, no new descriptor, no file written, no core). Nothing is shared with
another document: a worker reads one and ends.

The document goes over the worker's standard input; the answer comes back on its standard
output, read up to a bound, as JSON, and is handed to `from_wire`, which reads it as hostile
data. The call's deadline ends the worker: when the scope around `run_worker` is cancelled
(the call's deadline, LIM-F5, or the caller's cancellation), the worker is killed with
SIGKILL at once, never waited for beyond its reaping.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import tempfile
from enum import StrEnum
from typing import TYPE_CHECKING, Final

import attrs
import trio

from rypsok.core.fetch.pdf.model import PdfText, PdfWireError, from_wire
from rypsok.core.fetch.pdf.worker import answer_limit

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["Failure", "WorkerFailed", "WorkerLimits", "run_worker"]

_WORKER: Final = "rypsok.core.fetch.pdf.worker"
_CHUNK: Final = 65536
# A killed worker is reaped within this; a process the kernel cannot end sooner (stuck in
# an uninterruptible wait) is left to be reaped by trio later rather than hold the call.
_REAP_S: Final = 1.0


class Failure(StrEnum):
    """Why a worker gave no document."""

    ENCRYPTED = "encrypted"
    UNREADABLE = "unreadable"
    MEMORY = "memory"  # past its address-space limit (MemoryError, or PDFium's abort)
    CPU = "cpu"  # past its CPU-time limit
    START = "start"  # the system would not start it (out of descriptors or processes)


class WorkerFailed(Exception):
    def __init__(self, failure: Failure) -> None:
        super().__init__(str(failure))
        self.failure = failure


@attrs.frozen(kw_only=True)
class WorkerLimits:
    """What one worker may use: LIM-F3's bytes in, LIM-F18's pages, LIM-F19's characters,
    LIM-F20's address space, and CPU seconds (the call's deadline, rounded up)."""

    max_bytes: int
    max_pages: int
    max_chars: int
    memory_bytes: int
    cpu_s: int

    def argv(self) -> list[str]:
        return [
            sys.executable,
            "-I",
            "-B",
            "-m",
            _WORKER,
            str(self.max_bytes),
            str(self.max_pages),
            str(self.max_chars),
            str(self.memory_bytes),
            str(self.cpu_s),
        ]


async def run_worker(data: bytes | bytearray, limits: WorkerLimits) -> PdfText:
    """The document `data` holds, read by a worker under `limits`; raises `WorkerFailed`.

    Cancelling the caller's scope kills the worker (SIGKILL) and re-raises the cancellation.
    """
    limit = answer_limit(limits.max_chars)
    with _empty_directory() as empty:
        try:
            process = await trio.lowlevel.open_process(
                limits.argv(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={},
                cwd=empty,
                close_fds=True,
                start_new_session=True,
            )
        except OSError:
            # The system refused the pipes or the process (out of descriptors, EMFILE, or
            # processes, EAGAIN): a passing shortage of this host, not the document's fault.
            raise WorkerFailed(Failure.START) from None
        try:
            answer = await _exchange(process, data, limit)
            code = await process.wait()
        finally:
            await _end(process)
    return _document(answer, code, limit, limits.max_chars)


@contextlib.contextmanager
def _empty_directory() -> Iterator[str]:
    """An empty directory of the worker's own, removed after it; the root where none can be
    made (a read-only root without a writable /tmp, as `docker run --read-only` gives), which
    costs nothing: the worker can open no file and write none wherever it starts."""
    try:
        made = tempfile.TemporaryDirectory(prefix="rypsok-pdf-")
    except OSError:
        yield "/"
        return
    with made as empty:
        yield empty


async def _exchange(process: trio.Process, data: bytes | bytearray, limit: int) -> bytes:
    """Write the document, close the pipe, and read the answer up to `limit` + 1 bytes."""
    assert process.stdin is not None
    assert process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    answer = bytearray()

    async def send() -> None:
        try:
            view = memoryview(data)
            for start in range(0, len(view), _CHUNK):
                await stdin.send_all(view[start : start + _CHUNK])
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            # The worker ended before reading it all (its bound, a crash): its exit says why.
            pass
        finally:
            await stdin.aclose()

    async def receive() -> None:
        while len(answer) <= limit:
            chunk = await stdout.receive_some(_CHUNK)
            if not chunk:
                return
            answer.extend(chunk)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send)
        nursery.start_soon(receive)
    await stdout.aclose()
    return bytes(answer)


async def _end(process: trio.Process) -> None:
    """Kill the worker if it still runs, and reap it (shielded: the call is ending)."""
    if process.returncode is None:
        process.kill()
    with trio.CancelScope(shield=True), trio.move_on_after(_REAP_S):
        await process.wait()


def _document(answer: bytes, code: int, limit: int, max_chars: int) -> PdfText:
    """The worker's answer read as hostile data; its exit status when it gave none."""
    if code != 0 or not answer:
        if code in (-signal.SIGXCPU, -signal.SIGKILL):
            # SIGKILL here is the CPU limit's hard end: the parent's own kill ends the call.
            raise WorkerFailed(Failure.CPU)
        if code == -signal.SIGABRT:
            # PDFium aborts the process when an allocation fails (past RLIMIT_AS).
            raise WorkerFailed(Failure.MEMORY)
        raise WorkerFailed(Failure.UNREADABLE)
    if len(answer) > limit:
        raise WorkerFailed(Failure.UNREADABLE)
    try:
        obj = json.loads(answer)
    except (ValueError, RecursionError):
        # RecursionError: JSON nested deeper than the interpreter's stack.
        raise WorkerFailed(Failure.UNREADABLE) from None
    if type(obj) is not dict or len(obj) != 1:
        raise WorkerFailed(Failure.UNREADABLE)
    if "error" in obj:
        named = obj["error"]
        known = {str(failure) for failure in Failure}
        raise WorkerFailed(
            Failure(named) if type(named) is str and named in known else Failure.UNREADABLE
        )
    try:
        return from_wire(obj.get("ok"), max_chars=max_chars + _TITLE_CHARS)
    except PdfWireError:
        raise WorkerFailed(Failure.UNREADABLE) from None


# The title is read beside the document's characters (from_wire counts it with them).
_TITLE_CHARS: Final = 4096
