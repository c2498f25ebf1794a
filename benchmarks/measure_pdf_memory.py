"""`tools/measure-memory --pdf`: what reading PDFs costs the serving process and its workers
together, and what one worker costs (REQ-PDF-102, REQ-PERF-003 extended to PDF).

Part one, one worker alone (`worker` rows): a worker process is started as the server starts
it (the same argv, limits, empty environment) for a document, `--runs` times; the wall time
from the start to the answer, and the worker's peak resident set (its ru_maxrss, from
wait4). A one-line document gives the start-up cost per document (the interpreter, PDFium,
the warm-up read, the confinement); `paper` a 200-page document of prose at the page bound;
`bomb` a Flate bomb that meets the address-space limit.

Part two, the server's part of a read (`answer` rows): the costliest shapes of a worker's
answer at its bound (`pdf_answer_bytes`), read as the server reads one (JSON, the checked
document, its Markdown, the cleaning), with tracemalloc's peak; the figure per byte of answer
is what `rypsok.config.memory.PDF_PARENT_TIMES_ANSWER` rounds up.

Part three, the server (`server` rows): rypsok runs as `conformance.launch` does (the serve code
of `rypsok serve`) with four fixture sites on 127.0.0.1 to 127.0.0.4 over TLS serving the
document as application/pdf; `--calls` web_fetch calls are sent at once, spread over the
hosts. Every 5 ms the resident sets of the server and of each of its worker processes are
read from /proc and summed: the peak of that sum is what the unit's MemoryMax counts (a
worker's own peak between two samples can be missed; the sampling interval is far below a
worker's life of 0.3 s and more). Also the most workers seen at once.

    tools/measure-memory --pdf [--runs 3] [--calls 1,2,4,8] [--pdf-config "pdf_workers = 8"]

Linux only (it reads /proc). Local fixture sites only.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from benchmarks import fixture_stdio
from rypsok.config.load import load_config_text
from rypsok.config.memory import estimate
from rypsok.core.fetch.pdf.fetching import PdfFetching
from testkit.fetch_site import temporary_folder
from testkit.pdf_hostile import flate_bomb
from testkit.pdf_writer import Page, Text, pdf_bytes, text_lines

if TYPE_CHECKING:
    from collections.abc import Callable

    from rypsok.config.schema import Config

MIB = 1024 * 1024
_WORKER = b"rypsok.core.fetch.pdf.worker"
_SAMPLE_S = 0.005


def one_line() -> bytes:
    return pdf_bytes([Page(texts=(Text(72, 100, "One line of text."),))])


def paper(pages: int = 200) -> bytes:
    """`pages` pages of prose in paragraphs of six lines (42 lines a page), with a heading on
    every tenth page."""
    words = [
        *("the", "reading", "of", "documents", "in", "a"),
        *("worker", "process", "costs", "what", "this", "measures"),
    ]
    out = []
    for number in range(pages):
        texts: tuple[Text, ...] = ()
        if number % 10 == 0:
            texts = (Text(72, 50, f"Section {number // 10}", size=16, font="Helvetica-Bold"),)
        for paragraph in range(7):
            lines = [
                " ".join(words[(number + paragraph + i + j) % len(words)] for j in range(12))
                for i in range(6)
            ]
            texts += text_lines(lines, y=80 + paragraph * 6.5 * 12.5, size=10)
        out.append(Page(texts=texts))
    return pdf_bytes(out, title="Measured paper", compress=True)


DOCUMENTS: dict[str, Callable[[], bytes]] = {
    "one-line": one_line,
    "paper": paper,
    "bomb": lambda: flate_bomb(1024),
}


@attrs.frozen
class WorkerRun:
    wall_ms: float
    peak: int  # bytes
    status: int


def _worker_once(argv: list[str], body: bytes) -> WorkerRun:
    """One worker's wall time and peak resident set. The peak is its VmHWM, read every
    millisecond while it lives (wait4's ru_maxrss would count the parent's pages: the child
    is made by vfork, and Linux keeps the larger high-water mark across the exec)."""
    started = time.perf_counter()
    with subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={},
        cwd="/",
        close_fds=True,
    ) as process:
        exchange = threading.Thread(target=process.communicate, args=(body,))
        exchange.start()
        peak = 0
        while exchange.is_alive():
            peak = max(peak, fixture_stdio.status(process.pid, "VmHWM"))
            time.sleep(0.001)
        exchange.join()
    wall_ms = (time.perf_counter() - started) * 1000
    return WorkerRun(wall_ms=wall_ms, peak=peak, status=process.returncode)


def measure_workers(config: Config, runs: int) -> None:
    """Part one: one worker alone per document, `runs` times each."""
    argv = PdfFetching(config.fetch).limits().argv()
    for name, make in DOCUMENTS.items():
        body = make()
        results = [_worker_once(argv, body) for _ in range(runs)]
        walls = [r.wall_ms for r in results]
        sys.stdout.write(
            f"worker, {name} ({len(body) / 1024:.0f} KiB): median {statistics.median(walls):.0f} ms"
            f" (min {min(walls):.0f}, max {max(walls):.0f}); peak resident set "
            f"{max(r.peak for r in results) / MIB:.1f} MiB; exit {results[-1].status}\n"
        )
    sys.stdout.flush()


def _block(kind: str, runs: list[list[Any]] | None = None, rows: Any = None) -> dict[str, Any]:
    return {
        "kind": kind,
        "page": 0,
        "level": 0,
        "ordered": False,
        "number": 0,
        "runs": runs or [],
        "rows": rows or [],
    }


def measure_answers(config: Config) -> None:
    """Part two: the server's part of a read, for answers of the costliest shapes."""
    import tracemalloc

    from rypsok.core.fetch.pdf.isolation import _document
    from rypsok.core.fetch.pdf.worker import _bounded_answer, answer_limit
    from rypsok.core.untrusted_text import clean_in_pieces

    chars = config.fetch.pdf_max_chars
    limit = answer_limit(chars)
    shapes = {
        "one-character paragraphs": [_block("paragraph", [["a", None]])] * 200000,
        "one-character runs": [_block("paragraph", [["a", None]] * 10000)] * 200,
        "astral list items": [{**_block("list_item", [["\U0001f600", None]])}] * 200000,
        "table of one-character cells": [_block("table", rows=[["a"] * 100] * 2000)],
    }
    # The blocks spread over up to 1000 pages (an answer past its bound is cut at a page).
    shapes = {
        name: [
            {**block, "page": n // max(1, len(blocks) // 1000)} for n, block in enumerate(blocks)
        ]
        for name, blocks in shapes.items()
    }
    reading = PdfFetching(config.fetch)
    for name, blocks in shapes.items():
        wire: dict[str, object] = {
            "v": 1,
            "title": None,
            "pages_read": 2000,
            "pages_total": 2000,
            "has_text_layer": True,
            "text_cut": True,
            "blocks": blocks,
        }
        reply = _bounded_answer(wire, limit)
        tracemalloc.start()
        doc = _document(reply, 0, limit, chars)
        written = reading.markdown(doc, "https://example.org/doc.pdf")
        del doc
        clean_in_pieces(written.markdown)
        peak = tracemalloc.get_traced_memory()[1] + len(reply)
        tracemalloc.stop()
        sys.stdout.write(
            f"answer, {name}: {len(reply) / MIB:.2f} MiB of answer (bound {limit / MIB:.2f}), "
            f"server's part {peak / MIB:.1f} MiB, {peak / len(reply):.1f} bytes a byte\n"
        )
    sys.stdout.flush()


def _rss(pid: int) -> int:
    return fixture_stdio.status(pid, "VmRSS")


def _workers_of(pid: int) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
            if int(fields[1]) != pid:
                continue
            with open(f"/proc/{entry.name}/cmdline", "rb") as cmdline:
                if _WORKER in cmdline.read():
                    found.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


@attrs.define
class Sampled:
    together: int = 0  # the largest sum of the resident sets sampled at one moment
    # The server's resident set and each live worker's own peak so far, summed: above the
    # true peak together (a bound that no sampling interval can miss).
    bound: int = 0
    server_alone: int = 0
    workers_at_once: int = 0


async def _sample(pid: int, sampled: Sampled) -> None:
    while True:
        workers = _workers_of(pid)
        server = _rss(pid)
        sampled.server_alone = max(sampled.server_alone, server)
        sampled.together = max(sampled.together, server + sum(_rss(w) for w in workers))
        peaks = sum(fixture_stdio.status(w, "VmHWM") for w in workers)
        sampled.bound = max(sampled.bound, server + peaks)
        sampled.workers_at_once = max(sampled.workers_at_once, len(workers))
        await trio.sleep(_SAMPLE_S)


async def _server_run(
    body: bytes, calls: int, config_path: Path, folder: str
) -> tuple[Sampled, list[Any], float]:
    site = fixture_stdio.sites(folder, "/doc.pdf", "application/pdf", body)
    sampled = Sampled()
    async with trio.open_nursery() as nursery:
        process, buffer = await fixture_stdio.started(
            nursery, site, config_path, stderr=subprocess.DEVNULL
        )
        assert process.stdin is not None
        nursery.start_soon(_sample, process.pid, sampled)
        answers, times = await fixture_stdio.exchange(
            process, buffer, fixture_stdio.fetch_calls(calls, "/doc.pdf"), calls
        )
        await process.stdin.aclose()
        await process.wait()
        nursery.cancel_scope.cancel()
    return sampled, answers, max(times, default=0.0)


def _outcome(answer: dict[str, Any]) -> str:
    result = answer.get("result", {})
    content = result.get("structuredContent", {})
    if result.get("isError"):
        detail = content.get("error", {}).get("detail", {})
        return "error " + str(detail.get("reason", content.get("error", {}).get("kind")))
    return "ok"


async def measure_server(text: str, runs: int, calls_list: list[int], documents: list[str]) -> None:
    config = load_config_text(text, {})
    figure = estimate(config)
    sys.stdout.write(f"settings: {text.strip().replace(chr(10), '; ')}\n")
    with temporary_folder() as folder:
        config_path = Path(folder) / "measure.toml"
        config_path.write_text(text, encoding="utf-8")
        for name in documents:
            body = DOCUMENTS[name]()
            for calls in calls_list:
                for run in range(1, runs + 1):
                    sampled, answers, longest = await _server_run(body, calls, config_path, folder)
                    outcomes: dict[str, int] = {}
                    for answer in answers:
                        outcomes[_outcome(answer)] = outcomes.get(_outcome(answer), 0) + 1
                    sys.stdout.write(
                        f"server, {name}, {calls} calls at once, run {run}: peak together "
                        f"{sampled.together / MIB:.1f} MiB (bound {sampled.bound / MIB:.1f}; "
                        f"server alone "
                        f"{sampled.server_alone / MIB:.1f}), workers at once "
                        f"{sampled.workers_at_once}, all answered in {longest:.2f} s "
                        f"{outcomes}\n"
                    )
                    sys.stdout.flush()
    sys.stdout.write(f"check's estimate for these settings: {figure.total_mib:.0f} MiB\n")


def main(runs: int, calls: str, extra: str, documents: str) -> int:
    if not sys.platform.startswith("linux"):
        sys.stdout.write("measure-memory: Linux only (it reads /proc)\n")
        return 2
    calls_most = max(int(c) for c in calls.split(","))
    text = "config_version = 1\n[fetch]\n" + "".join(
        f"{line.strip()}\n" for line in extra.split(";") if line.strip()
    )
    text += f"[limits]\nweb_fetch_per_minute = {max(30, calls_most)}\n"
    config = load_config_text(text, {})
    measure_workers(config, runs)
    measure_answers(config)
    trio.run(measure_server, text, runs, [int(c) for c in calls.split(",")], documents.split(","))
    return 0
