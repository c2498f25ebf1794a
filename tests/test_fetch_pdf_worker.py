"""The PDF worker's confinement, the parent's reading of its answer, and the callers' shares
of the workers (REQ-PDF-102, REQ-PDF-103)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

from rypsok.core.fetch.pdf.isolation import Failure, WorkerFailed, WorkerLimits, run_worker
from rypsok.core.fetch.pdf.isolation import _document as read_answer
from rypsok.core.fetch.pdf.share import WorkerShare
from rypsok.core.fetch.pdf.worker import _bounded_answer as bounded_answer
from rypsok.core.fetch.pdf.worker import answer_limit
from testkit.pdf_writer import Page, pdf_bytes, text_lines

if TYPE_CHECKING:
    from pathlib import Path

# What a confined worker tries: every way out it could take once PDFium's code is not its own.
PROBE = """
import os, socket, sys
from rypsok.core.fetch.pdf.worker import _confine
_confine(256 * 1024 * 1024, 5)
outcomes = []
for attempt in (
    lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM),
    lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM),
    lambda: socket.create_connection(("127.0.0.1", 9)),
    lambda: open("/etc/hostname", "rb"),
    lambda: open("written", "wb").write(b"x" * 10),
    lambda: os.pipe(),
    lambda: (os.close(0), socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
    lambda: bytearray(512 * 1024 * 1024),
):
    try:
        attempt()
        outcomes.append("done")
    except (OSError, MemoryError) as error:
        outcomes.append(type(error).__name__)
print(" ".join(outcomes))
"""


def test_req_pdf_102_a_confined_worker_can_open_no_socket_file_or_pipe(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-B", "-c", PROBE],
        capture_output=True,
        cwd=tmp_path,
        env={},
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # No descriptor can be made (so no socket, no file, no pipe, not even in the place of
    # one closed), no file written, no allocation past the address space.
    assert done.stdout.split() == [b"OSError"] * 7 + [b"MemoryError"]
    assert list(tmp_path.iterdir()) == []


async def test_req_pdf_102_the_worker_reads_a_document_over_its_pipe() -> None:
    body = pdf_bytes([Page(texts=text_lines(["One plain line of text."]))], title="T")
    limits = WorkerLimits(
        max_bytes=1 << 20, max_pages=5, max_chars=10000, memory_bytes=96 << 20, cpu_s=10
    )
    doc = await run_worker(body, limits)
    assert doc.title == "T"
    assert [block.text for block in doc.blocks] == ["One plain line of text."]
    # More bytes than it is handed for: it reads no further and answers unreadable.
    with pytest.raises(WorkerFailed) as failed:
        await run_worker(body, attrs_evolve(limits, max_bytes=len(body) - 1))
    assert failed.value.failure is Failure.UNREADABLE


def attrs_evolve(limits: WorkerLimits, **changes: int) -> WorkerLimits:
    import attrs

    return attrs.evolve(limits, **changes)


GOOD = {
    "ok": {
        "v": 1,
        "title": "T",
        "pages_read": 1,
        "pages_total": 1,
        "has_text_layer": True,
        "text_cut": False,
        "blocks": [
            {
                "kind": "paragraph",
                "page": 0,
                "level": 0,
                "ordered": False,
                "number": 0,
                "runs": [["text", None]],
                "rows": [],
            }
        ],
    }
}


@pytest.mark.parametrize(
    ("answer", "code", "failure"),
    [
        (b"", 0, Failure.UNREADABLE),  # ended without a word
        (b"{", 0, Failure.UNREADABLE),  # not JSON
        (b"[]", 0, Failure.UNREADABLE),  # not an object
        (b'{"ok": {}, "error": "x"}', 0, Failure.UNREADABLE),  # two answers
        (b'{"error": "formatted your disk"}', 0, Failure.UNREADABLE),  # not a failure named
        (b'{"error": "encrypted"}', 0, Failure.ENCRYPTED),
        (b'{"error": "memory"}', 0, Failure.MEMORY),
        (b'{"error": ["memory"]}', 0, Failure.UNREADABLE),
        (b"[" * 100000 + b"]" * 100000, 0, Failure.UNREADABLE),  # deeper than the stack
        (json.dumps({"ok": {**GOOD["ok"], "pages_read": 2}}).encode(), 0, Failure.UNREADABLE),
        (json.dumps(GOOD).encode(), 1, Failure.UNREADABLE),  # a good answer, a bad exit
        (b"", -signal.SIGABRT, Failure.MEMORY),  # PDFium's abort past RLIMIT_AS
        (b"", -signal.SIGXCPU, Failure.CPU),
        (b"", -signal.SIGSEGV, Failure.UNREADABLE),
        (b" " * 300000 + json.dumps(GOOD).encode(), 0, Failure.UNREADABLE),  # past the bound
    ],
)
def test_req_pdf_102_the_workers_answer_is_read_as_hostile_data(
    answer: bytes, code: int, failure: Failure
) -> None:
    with pytest.raises(WorkerFailed) as failed:
        read_answer(answer, code, 300000, 1000)
    assert failed.value.failure is failure


def test_req_pdf_102_a_well_formed_answer_within_its_bound_is_a_document() -> None:
    data = json.dumps(GOOD).encode()
    doc = read_answer(data, 0, len(data), 1000)
    assert doc.title == "T"
    assert answer_limit(1000) > len(data)


# -- REQ-PDF-103: the callers' shares ----------------------------------------------------------


async def test_req_pdf_103_a_caller_with_many_documents_waits_its_turn_behind_others() -> None:
    share = WorkerShare(2)
    order: list[str] = []
    done = {name: trio.Event() for name in ("busy0", "busy1", "busy2", "busy3", "other0")}

    async def read(caller: str, name: str) -> None:
        async with share.worker(caller):
            order.append(name)
            await done[name].wait()

    async with trio.open_nursery() as nursery:
        for n in range(4):
            nursery.start_soon(read, "busy", f"busy{n}")
            await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(read, "other", "other0")
        await trio.testing.wait_all_tasks_blocked()
        # "busy" holds both workers; two more of its calls wait, and then "other"'s one.
        assert order == ["busy0", "busy1"]
        assert share.waiting == 3
        # The first worker freed goes to the caller with none running, though it came last.
        done["busy0"].set()
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["busy0", "busy1", "other0"]
        # Then each caller's turn by how many it runs: "busy" runs one, "other" one; the
        # longest waiting goes first.
        done["other0"].set()
        await trio.testing.wait_all_tasks_blocked()
        assert order[3] == "busy2"
        for event in done.values():
            event.set()
    assert order == ["busy0", "busy1", "other0", "busy2", "busy3"]


async def test_req_pdf_103_with_one_worker_the_callers_take_turns() -> None:
    share = WorkerShare(1)
    order: list[str] = []
    done = {name: trio.Event() for name in ("a0", "a1", "a2", "b0", "c0")}

    async def read(caller: str, name: str) -> None:
        async with share.worker(caller):
            order.append(name)
            await done[name].wait()

    async with trio.open_nursery() as nursery:
        for caller, name in (("a", "a0"), ("a", "a1"), ("a", "a2"), ("b", "b0"), ("c", "c0")):
            nursery.start_soon(read, caller, name)
            await trio.testing.wait_all_tasks_blocked()
        for name in ("a0", "b0", "c0", "a1", "a2"):
            assert order[-1] == name
            done[name].set()
            await trio.testing.wait_all_tasks_blocked()
    # "a" came first with three; "b" and "c" each had their turn before its second.
    assert order == ["a0", "b0", "c0", "a1", "a2"]
    assert share.free == 1
    assert share._last_turn == {}


async def test_req_pdf_103_a_cancelled_wait_gives_its_place_up() -> None:
    share = WorkerShare(1)
    async with share.worker("a"):
        with trio.move_on_after(0.01):
            async with share.worker("b"):
                pytest.fail("a worker was granted beyond the count")
        assert share.waiting == 0
    assert share.free == 1
    async with share.worker("b"):
        assert share.running("b") == 1


def test_req_pdf_104_an_answer_past_its_bound_keeps_the_blocks_that_fit() -> None:
    block = {
        "kind": "paragraph",
        "page": 0,
        "level": 0,
        "ordered": False,
        "number": 0,
        "runs": [["\U0001f600 a block of text", None]],
        "rows": [],
    }
    blocks = [{**block, "page": n // 1000} for n in range(100000)]
    wire = {**GOOD["ok"], "pages_read": 100, "pages_total": 100, "blocks": blocks}
    limit = answer_limit(10000)
    data = bounded_answer(wire, limit)
    assert len(data) <= limit
    doc = read_answer(data, 0, limit, 10**6)
    assert 0 < len(doc.blocks) < 100000
    assert {b.text for b in doc.blocks} == {"\U0001f600 a block of text"}
    # Read in part: the pages from the first block left out count as not read.
    assert doc.pages_read < doc.pages_total
