"""`tools/measure-memory`: the memory of a rypsok process at rest and under concurrent
web_fetch calls from four hosts, beside `rypsok check`'s estimate for the same settings.

Four fixture sites on 127.0.0.1 to 127.0.0.4 (over TLS, with an authority made for the run)
each serve one generated page of `--page-mib` MiB and a robots.txt; `--calls` calls (four by
default) are sent at once, spread over the four hosts. rypsok runs as `conformance.launch`
does (the serve code of `rypsok serve`), with the default settings except `fetch.max_bytes`,
raised to hold the page, and the web_fetch rate (LIM-C7), raised to admit every call. The
tool reads the child's VmRSS at rest (after the start, before any call) and its VmHWM (peak
resident set) after the calls, from /proc: Linux only. Each run is a fresh process. It also
reports the longest call as the host saw it, against LIM-F5.

The page's shape (`--shape`) decides what a parse costs per byte:

    article     paragraphs of prose, the shape the extractor reads in full
    text        one block of words without markup (every step copies the whole text)
    nodes       short paragraphs to the node bound (LIM-F10)
    links       links, one kept attribute each, to the node bound and LIM-F17
    links-chrome  the same after a <nav> (chrome removed: the main block measures twice)
    links-astral  the same with one character beyond U+FFFF (the decoded text and every
                string made from it take four bytes a character)
    text-astral the plain-text shape with one character beyond U+FFFF
    attributes  elements at LIM-F16 (256 attributes, ten of them kept) to LIM-F17
    one-tag     a single <p> with as many attributes as fit

`--suite` runs the set the book's figures come from: every shape with four calls, then the
costliest shapes with 80 calls at once, then the two costliest with pages small enough
that two parse at once within the parse budget (half of LIM-F3's bytes of text; links under
half of LIM-F10's elements counted by `<`).

    tools/measure-memory [--page-mib 5] [--runs 3] [--shape article] [--calls 4] [--suite]

`--pdf` measures PDF reading instead: one worker alone, then the server and its workers
together under concurrent calls (benchmarks/measure_pdf_memory.py).

    tools/measure-memory --pdf [--runs 3] [--pdf-calls 1,2,4,8] [--pdf-documents paper,bomb]
                         [--pdf-config "pdf_memory_mib = 48; pdf_workers = 4"]

MEASURE_STDERR=FILE appends the child's log to FILE.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from benchmarks import fixture_stdio
from rypsok.config.load import load_config_text
from rypsok.config.memory import estimate
from rypsok.core.services import FETCH_CALL_MARGIN_MS
from testkit.fetch_site import temporary_folder

if TYPE_CHECKING:
    from collections.abc import Callable

MIB = 1024 * 1024
_WORDS = [
    "ownership",
    "borrowing",
    "lifetimes",
    "compiler",
    "values",
    "references",
    "moves",
    "scope",
    "memory",
    "safety",
    "threads",
    "data",
    "races",
    "traits",
    "generics",
    "modules",
    "crates",
    "testing",
    "errors",
    "results",
    "options",
]


def article(size: int) -> bytes:
    """An HTML article of exactly `size` bytes: a title, a heading, then paragraphs."""
    head = b"<!doctype html><html><head><meta charset=utf-8><title>Measured page</title>"
    head += b"</head><body><article><h1>Measured page</h1>\n"
    tail = b"</article></body></html>\n"

    def paragraph(index: int) -> bytes:
        words = " ".join(_WORDS[(index + i) % len(_WORDS)] for i in range(12))
        return f"<p>{index} {words}.</p>\n".encode()

    return _pieces(head, paragraph, tail, size)


def _pieces(head: bytes, piece: Callable[[int], bytes], tail: bytes, size: int) -> bytes:
    """`head`, then piece(0), piece(1)… while they fit, spaces, then `tail`: `size` bytes."""
    parts = [head]
    used = len(head) + len(tail)
    index = 0
    while True:
        part = piece(index)
        if used + len(part) > size:
            break
        parts.append(part)
        used += len(part)
        index += 1
    parts.append(b" " * (size - used))
    parts.append(tail)
    return b"".join(parts)


def _fill(unit: bytes, size: int, head: bytes = b"") -> bytes:
    """`unit` repeated in an HTML page of exactly `size` bytes."""
    head = b"<!doctype html><html><head><meta charset=utf-8><title>Measured page</title>" + (
        b"</head><body><article><h1>Measured page</h1>\n" + head
    )
    tail = b"</article></body></html>\n"
    count = (size - len(head) - len(tail)) // len(unit)
    body = head + unit * count
    return body + b" " * (size - len(body) - len(tail)) + tail


def _text(size: int) -> bytes:
    words = " ".join(_WORDS).encode() + b" "
    return _fill(words, size, head=b"<p>")


def _links(size: int) -> bytes:
    return _fill(b'<a href="/a">x</a>\n', size)


_ASTRAL = "\U0001f600".encode()


def _links_chrome(size: int) -> bytes:
    return _fill(b'<a href="/a">x</a>\n', size, head=b"<nav>menu</nav>")


def _links_astral(size: int) -> bytes:
    return _fill(b'<a href="/a">x</a>\n', size, head=b"<p>" + _ASTRAL + b"</p>")


def _text_astral(size: int) -> bytes:
    words = " ".join(_WORDS).encode() + b" "
    return _fill(words, size, head=b"<p>" + _ASTRAL)


def _nodes(size: int) -> bytes:
    return _fill(b"<p>x</p>\n", size)


def _attributes(size: int) -> bytes:
    kept = b" id=a class=b role=c itemprop=d href=e alt=f src=g start=h colspan=i open=j"
    others = b"".join(b" d%d=v" % index for index in range(256 - 10))
    return _fill(b"<p" + kept + others + b">x</p>\n", size)


def _one_tag(size: int) -> bytes:
    head = b"<!doctype html><html><body><article><p>Measured page, one heavy element.</p><p"
    tail = b">after</p></article></body></html>\n"
    return _pieces(head, lambda index: b" a%d=v%d" % (index, index), tail, size)


SHAPES: dict[str, Callable[[int], bytes]] = {
    "article": article,
    "text": _text,
    "nodes": _nodes,
    "links": _links,
    "links-chrome": _links_chrome,
    "links-astral": _links_astral,
    "text-astral": _text_astral,
    "attributes": _attributes,
    "one-tag": _one_tag,
}
# The suite: every shape with four calls, then the costliest with 80, then pages
# two of which share the parse budget (slots.page_share): (shape, calls, part of the page size).
SUITE: tuple[tuple[str, int, float], ...] = (
    *((shape, 4, 1.0) for shape in SHAPES),
    ("article", 80, 1.0),
    ("text", 80, 1.0),
    ("text-astral", 80, 1.0),
    ("links", 80, 1.0),
    ("links-astral", 80, 1.0),
    ("one-tag", 80, 1.0),
    ("text-astral", 80, 0.5),
    # Two `<` a link of 19 bytes: 0.45 MiB is just under half of LIM-F10's 100,000.
    ("links-astral", 80, 0.09),
)


def _child_log() -> int:
    """Where the child's log goes: MEASURE_STDERR names a file it is appended to (to read
    the calls' own latency_ms), else nowhere."""
    path = os.environ.get("MEASURE_STDERR")
    if not path:
        return subprocess.DEVNULL
    # The child inherits the descriptor; this process's copy stays open until it exits.
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


@attrs.frozen(kw_only=True)
class Run:
    idle: int
    peak: int
    answers: list[Any]
    longest_s: float  # the longest call, from its line sent to its answer read
    times_s: list[float]  # each answer's arrival, from the lines sent


async def _one_run(body: bytes, calls: int, config_path: Path, folder: str) -> Run:
    site = fixture_stdio.sites(folder, "/page", "text/html; charset=utf-8", body)
    async with trio.open_nursery() as nursery:
        process, buffer = await fixture_stdio.started(
            nursery, site, config_path, stderr=_child_log()
        )
        assert process.stdin is not None
        idle = fixture_stdio.status(process.pid, "VmRSS")
        answers, times = await fixture_stdio.exchange(
            process, buffer, fixture_stdio.fetch_calls(calls, "/page"), calls
        )
        # A parse whose call ended at its deadline may still be finishing in its worker
        # thread: the peak is read once it has stopped growing for two seconds.
        peak = fixture_stdio.status(process.pid, "VmHWM")
        steady = 0
        with trio.move_on_after(60):
            while steady < 4:
                await trio.sleep(0.5)
                now = fixture_stdio.status(process.pid, "VmHWM")
                steady = steady + 1 if now == peak else 0
                peak = now
        await process.stdin.aclose()
        await process.wait()
        nursery.cancel_scope.cancel()
    return Run(
        idle=idle, peak=peak, answers=answers, longest_s=max(times, default=0.0), times_s=times
    )


def _summary(answer: dict[str, Any]) -> str:
    result = answer.get("result", {})
    content = result.get("structuredContent", {})
    if result.get("isError"):
        return "error " + json.dumps(content.get("error", {}).get("detail", {}))
    notices = ",".join(n["code"] for n in content.get("notices", []))
    return f"ok ({notices or 'no notice'})"


def _outcomes(answers: list[Any]) -> str:
    counts = collections.Counter(_summary(answer) for answer in answers)
    return "; ".join(f"{count} × {summary}" for summary, count in counts.most_common())


async def _main(page_mib: float, runs: int, plan: tuple[tuple[str, int, float], ...]) -> int:
    if not sys.platform.startswith("linux"):
        sys.stdout.write("measure-memory: Linux only (it reads /proc)\n")
        return 2
    page_size = int(page_mib * MIB)
    max_bytes = max(page_size, 5 * MIB)
    calls_most = max(calls for _, calls, _ in plan)
    text = f"config_version = 1\n[fetch]\nmax_bytes = {max_bytes}\n"
    figure = estimate(load_config_text(text, {}))
    # Admitting every call changes nothing the estimate counts (LIM-C7 is a rate).
    text += f"[limits]\nweb_fetch_per_minute = {max(30, calls_most)}\n"
    config = load_config_text(text, {})
    lim_f5_s = (config.fetch.deadline_ms + FETCH_CALL_MARGIN_MS) / 1000
    peaks = []
    late = 0
    with temporary_folder() as folder:
        config_path = Path(folder) / "measure.toml"
        config_path.write_text(text, encoding="utf-8")
        for shape, calls, part in plan:
            size = int(page_size * part)
            body = SHAPES[shape](size)
            for run in range(1, runs + 1):
                result = await _one_run(body, calls, config_path, folder)
                peaks.append(result.peak)
                past = sum(t > lim_f5_s for t in result.times_s)
                late += past > 0
                sys.stdout.write(
                    f"{shape}, {calls} calls, run {run}: page {size / MIB:.2f} MiB, "
                    f"at rest {result.idle / MIB:.1f} MiB, peak {result.peak / MIB:.1f} MiB, "
                    f"longest call {result.longest_s:.2f} s ({past} past LIM-F5) "
                    f"[{_outcomes(result.answers)}]\n"
                )
    above = figure.total_bytes > max(peaks)
    sys.stdout.write(
        f"check's estimate for these settings: {figure.total_mib:.0f} MiB ({figure.build}); "
        f"highest measured peak {max(peaks) / MIB:.1f} MiB; "
        f"{'above' if above else 'NOT above'} every measured peak; "
        f"{late} run(s) with a call past LIM-F5 ({lim_f5_s:.1f} s)\n"
    )
    return 0 if above and not late else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/measure-memory")
    parser.add_argument("--page-mib", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="article")
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--suite", action="store_true", help="every shape, 4 then 80 calls")
    parser.add_argument("--pdf", action="store_true", help="PDF workers, then concurrent calls")
    parser.add_argument("--pdf-calls", default="1,2,4,8")
    parser.add_argument("--pdf-documents", default="paper,bomb")
    parser.add_argument("--pdf-config", default="", help="[fetch] keys, separated by ;")
    args = parser.parse_args(argv)
    if args.pdf:
        from benchmarks import measure_pdf_memory

        return measure_pdf_memory.main(
            args.runs, args.pdf_calls, args.pdf_config, args.pdf_documents
        )
    plan = SUITE if args.suite else ((args.shape, args.calls, 1.0),)
    return trio.run(_main, args.page_mib, args.runs, plan)


if __name__ == "__main__":
    sys.exit(main())
