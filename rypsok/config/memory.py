"""The worst-case memory of a configuration (deployment: "Does the configuration fit
MemoryMax?"), for `rypsok check`.

estimate = at rest
         + limits.fetches_in_flight × fetch.max_bytes            (the bodies read or waiting)
         + one parse of a page at the bounds, or of a PDF if that costs more
                                                                 (the pages parsing at once)
         + (limits.parsing_in_flight − 1) × what rides on a permit    (the other permits)
         + service.http.max_sessions × one session   (only while legacy_revisions is on)
         + service.http.max_connections × one connection     (what a peer without a token
                                                              can make each one hold)
         + cache.max_entries × cache.max_entry_bytes (only when the cache is on)

one parse = the larger of the two costliest shapes of page, plus a part that does not grow:
         prose or plain text, which grows with the page:      slope × fetch.max_bytes
         a page dense in elements, which reaches the node bound (LIM-F10) and the kept
         attributes' bound (LIM-F17) within its first megabytes:  node bound + the document

A body is held under its fetch slot until its parse has a permit, and a permit is held until
its thread ends, an abandoned one too (rypsok/core/parsing.py): so however many calls
wait, the bodies and the parses alive are the ones counted here.

The pages parsing at once share the parse budget (slots.py): each takes the
larger of its part of fetch.max_bytes and its part of LIM-F10's elements, and together they
take at most the whole. A parse's cost is at most linear in both (the larger of the text's
slope and the tree's), so the pages parsing at once cost at most one page at both bounds,
plus the part that does not grow for each further parse. The JSON engines' answers decoded
off the event loop share the same budget when they are large: a decode costs at most 27 bytes
a byte of answer (JSON of empty objects, the costliest measured), and one costing more than
the part of a parse that does not grow (about 150 KiB of JSON) takes that cost's part of the
budget; a smaller one rides on its permit, inside that fixed part. DuckDuckGo's results page
is parsed by its own streaming target under a permit and no share (4.3 MiB measured for
256 KiB; counted at 27 bytes a byte), so with that engine enabled each further permit may
hold it.

A PDF is read by a worker process (REQ-PDF-102) whose address space is bounded by
fetch.pdf_memory_mib, and its answer is written as Markdown in this process under a parse
permit: the two together are one PDF read (`pdf_read_bytes`), and it takes that cost's part
of the same parse budget. The unit's MemoryMax counts the workers with the server, so the
pages and PDFs read at once cost at most the larger of one parse at the bounds and one PDF
read, whatever fetch.pdf_workers allows.

The constants are measured for the build rypsok runs as, because the interpreter and the
allocator decide how much a process holds after a parse: here CPython on Linux with glibc
(with the allocator settings of rypsok/shared/allocator.py),
measured one parse at a time and by `tools/measure-memory --suite` (every page shape with four
calls from four hosts and the costliest with 80 at once, 5 MiB pages, the worst page
shapes among them) and rounded up so that the estimate is above every measured peak
(book/maintainers/measurements.md). Elsewhere the same figures
are printed with a note that they were not measured there, and nothing is compared with the
unit.

Implements REQ-PERF-003. The three constants take the place of LIM-M6 to LIM-M8, measured
for CPython (the book's figures are a Rust build's); LIM-M1 to LIM-M3, a musl build's, have
no counterpart.
"""

from __future__ import annotations

import platform
import sys
from typing import TYPE_CHECKING, Final

import attrs

if TYPE_CHECKING:
    from rypsok.config.schema import Config

__all__ = [
    "ANSWER_MAX_BYTES",
    "MEMORY_MAX_BYTES",
    "Estimate",
    "Share",
    "answer_bytes",
    "estimate",
    "measured_build",
    "parse_bytes",
    "pdf_answer_bytes",
    "pdf_read_bytes",
    "settings_to_lower",
]

MIB: Final = 1024 * 1024
KIB: Final = 1024
MEMORY_MAX_BYTES: Final = 256 * MIB  # LIM-M5: MemoryMax of the documented unit

# CPython 3.11 on Linux, glibc (book/maintainers/measurements.md, "Memory under load").
# At rest 42 to 58 MiB. Per parse, the
# peak of `tools/measure-memory --suite` less the process at rest (57 MiB) and the four
# bodies, halved (two parses at once, before the parse budget): links to the node bound with
# one character beyond U+FFFF (the decoded text four bytes a character) 117 MiB (lxml's tree
# of the links is 70), the same without it 103, behind a <nav> 98; 5 MiB of plain text with
# such a character 89 MiB, 18 bytes a byte of page; prose 47. With glibc's mmap threshold
# fixed and a trim after each large parse (rypsok/shared/allocator.py) two parses cost what
# two alone do; before, the arenas kept up to 43 MiB more a parse. Rounded up: 123 MiB a
# parse of a 5 MiB page. Under the parse budget (one such parse at a time), 80 calls: 102 to
# 124 MiB a parse (the peak less 57 MiB at rest and four bodies waiting); two pages of half
# the bound parsing together cost less than one of the whole (the model is linear).
AT_REST_BYTES: Final = 58 * MIB
PARSE_FIXED_BYTES: Final = 4 * MIB
PARSE_TENTHS_PER_BYTE: Final = 180  # the part of a parse of text that grows with the page
NODE_BOUND_BYTES: Final = 84 * MIB  # a tree at LIM-F10 and LIM-F17, measured, selected, written
DOCUMENT_TENTHS_PER_BYTE: Final = 70  # the body and its decoded text beside that tree
# An engine's answer decoded under a LIM-C5 permit: `json.loads` of 2 MiB of `[{},{},…]`
# (or of empty lists) takes 51.9 MiB, 26 bytes a byte, the costliest JSON measured; the
# answer itself beside it. DuckDuckGo's 256 KiB page, read by a streaming target: 4.3 MiB.
ANSWER_TIMES_BYTES: Final = 27
# The largest answer each driver type reads (its admission record's response_max_bytes,
# after decompression; a test holds the two equal).
ANSWER_MAX_BYTES: Final[dict[str, int]] = {
    "wikipedia": MIB,
    "brave": MIB,
    "duckduckgo": 256 * KIB,
    "searxng": MIB,
    "stackexchange": MIB,
    "arxiv": MIB,
    "hackernews": MIB,
    "crossref": 2 * MIB,
}
# A PDF worker's answer is JSON of at most 6 bytes a character of fetch.pdf_max_chars (a
# character escaped as \u0000) and a fixed part for the blocks' keys; the serving process's
# part of a read is at most this many bytes a byte of answer: the answer, its objects, the
# document built from them, its Markdown and the cleaned copy. The costliest shape measured,
# blocks of one-character runs, took 15.6 (book/maintainers/measurements.md, "PDF reading:
# the worker process and the memory of concurrent PDF calls").
PDF_ANSWER_BYTES_PER_CHAR: Final = 6
PDF_ANSWER_FIXED_BYTES: Final = 256 * KIB
PDF_PARENT_TIMES_ANSWER: Final = 16
SESSION_BYTES: Final = 60 * KIB  # LIM-M4; a session's state is the same in kind
# The most a connection without a token makes the process hold: a header block just under
# LIM-H7 left unfinished measured 87.3 KiB a connection over HTTP/2 and 50.4 KiB over HTTP/1
# (1000 connections), and while a flood of longer blocks is read and closed (each read and
# h2's copy of it held at once) at most 185 KiB (64 connections; 168 KiB with 256), all by
# `tools/bench-http --only-floods`; rounded up. After a flood the memory goes back
# (`rypsok.mcp.listener.memory.MemoryReturn`).
CONNECTION_BYTES: Final = 192 * KIB


@attrs.frozen(kw_only=True)
class Share:
    """One term of the estimate above the process at rest, and the settings that raise it
    (the memory warning names them)."""

    name: str
    bytes: int
    settings: tuple[str, ...]


@attrs.frozen(kw_only=True)
class Estimate:
    total_bytes: int
    build: str
    measured: bool  # False on a build the constants were not measured for
    shares: tuple[Share, ...] = ()

    @property
    def total_mib(self) -> float:
        return self.total_bytes / MIB


def measured_build() -> tuple[str, bool]:
    """A description of this build, and whether the constants were measured for it."""
    python = f"CPython {sys.version_info.major}.{sys.version_info.minor}"
    if platform.python_implementation() != "CPython" or not sys.platform.startswith("linux"):
        return f"{platform.python_implementation()} on {sys.platform}", False
    libc, version = platform.libc_ver()
    if libc != "glibc":
        return f"{python} on Linux ({libc or 'unknown C library'})", False
    return f"{python} on Linux (glibc {version})", True


def parse_bytes(max_bytes: int) -> int:
    """The worst case of one parse of a page of at most `max_bytes`."""
    text = PARSE_TENTHS_PER_BYTE * max_bytes // 10
    dense = NODE_BOUND_BYTES + DOCUMENT_TENTHS_PER_BYTE * max_bytes // 10
    return max(text, dense) + PARSE_FIXED_BYTES


def pdf_answer_bytes(pdf_max_chars: int) -> int:
    """The most bytes a PDF worker's answer takes for a document read to `pdf_max_chars`."""
    return PDF_ANSWER_BYTES_PER_CHAR * pdf_max_chars + PDF_ANSWER_FIXED_BYTES


def pdf_read_bytes(pdf_memory_mib: int, pdf_max_chars: int) -> int:
    """The worst case of one PDF read: the worker at its address-space limit, and this
    process's part for an answer at its bound."""
    return pdf_memory_mib * MIB + PDF_PARENT_TIMES_ANSWER * pdf_answer_bytes(pdf_max_chars)


def answer_bytes(config: Config) -> int:
    """What each LIM-C5 permit beyond the first can hold outside the parse budget: the part
    of a parse that does not grow (a second page within the budget, or an engine's answer
    small enough to ride on its permit: see `EngineClient.off_loop`), or, when a DuckDuckGo
    engine is enabled, its results page parsed under a permit alone (its own target, not
    the budget). An engine's larger answer takes its share of the budget and is within
    the one parse at the bounds."""
    scraped = any(engine.enabled and engine.type == "duckduckgo" for engine in config.engines)
    page = ANSWER_TIMES_BYTES * ANSWER_MAX_BYTES["duckduckgo"] if scraped else 0
    return max(page, PARSE_FIXED_BYTES)


def estimate(config: Config) -> Estimate:
    fetch, limits, http = config.fetch, config.limits, config.service.http
    page = parse_bytes(fetch.max_bytes)
    pdf = pdf_read_bytes(fetch.pdf_memory_mib, fetch.pdf_max_chars)
    shares = [
        Share(
            name="bodies",
            bytes=limits.fetches_in_flight * fetch.max_bytes,
            settings=("fetch.max_bytes", "limits.fetches_in_flight"),
        ),
        Share(
            # The parse budget: the pages and the engines' large answers parsing at once cost
            # at most one page at the bounds; each other permit holds what rides on it.
            name="parses",
            bytes=max(page, pdf) + (limits.parsing_in_flight - 1) * answer_bytes(config),
            settings=("fetch.max_bytes", "limits.parsing_in_flight")
            + (("fetch.pdf_memory_mib", "fetch.pdf_max_chars") if pdf > page else ()),
        ),
    ]
    if http.legacy_revisions:
        shares.append(
            Share(
                name="sessions",
                bytes=http.max_sessions * SESSION_BYTES,
                settings=("service.http.max_sessions",),
            )
        )
    shares.append(
        Share(
            name="connections",
            bytes=http.max_connections * CONNECTION_BYTES,
            settings=("service.http.max_connections",),
        )
    )
    if config.cache.enabled:
        shares.append(
            Share(
                name="cache",
                bytes=config.cache.max_entries * config.cache.max_entry_bytes,
                settings=("cache.max_entries", "cache.max_entry_bytes"),
            )
        )
    total = AT_REST_BYTES + sum(share.bytes for share in shares)
    build, measured = measured_build()
    return Estimate(total_bytes=total, build=build, measured=measured, shares=tuple(shares))


def settings_to_lower(figure: Estimate, limit: int) -> tuple[str, ...]:
    """The settings whose shares bring the estimate past `limit`, largest share first: each
    share that could bring it back under alone; when none can, the largest shares until
    together they could."""
    excess = figure.total_bytes - limit
    ordered = sorted(figure.shares, key=lambda share: share.bytes, reverse=True)
    chosen = [share for share in ordered if share.bytes >= excess]
    if not chosen:
        covered = 0
        for share in ordered:
            chosen.append(share)
            covered += share.bytes
            if covered >= excess:
                break
    names: list[str] = []
    for share in chosen:
        names += [name for name in share.settings if name not in names]
    return tuple(names)
