"""The worst-case memory of a configuration (deployment: "Does the configuration fit
MemoryMax?"), for `rypsok check`.

estimate = at rest
         + limits.fetches_in_flight × fetch.max_bytes            (the bodies being read)
         + limits.parsing_in_flight × (slope × fetch.max_bytes + per parse)
         + service.http.max_sessions × one session   (only while legacy_revisions is on)
         + service.http.max_connections × one connection     (what a peer without a token
                                                              can make each one hold)
         + cache.max_entries × cache.max_entry_bytes (only when the cache is on)

The constants are measured for the build rypsok runs as, because the interpreter and the
allocator decide how much a process holds after a parse: here CPython on Linux with glibc,
measured by `tools/measure-memory` (four fetches from four hosts, two parses at once, at a
5 MiB and a 10 MiB page) and rounded up so that the estimate is above every measured peak
(book/maintainers/measurements.md). Elsewhere the same figures are printed with a note that
they were not measured there, and nothing is compared with the unit.

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
    "MEMORY_MAX_BYTES",
    "Estimate",
    "Share",
    "estimate",
    "measured_build",
    "settings_to_lower",
]

MIB: Final = 1024 * 1024
KIB: Final = 1024
MEMORY_MAX_BYTES: Final = 256 * MIB  # LIM-M5: MemoryMax of the documented unit

# CPython 3.11 on Linux, glibc (book/maintainers/measurements.md, "Memory"): at rest 43.5
# to 43.7 MiB; four fetches from four hosts peaked at 181.0 to 183.3 MiB with 5 MiB pages and
# 309.0 to 317.4 MiB with 10 MiB pages, which is 59.8 and 116.9 MiB per parse: a line of
# 11.41 bytes per byte of page crossing at 2.75 MiB, rounded up with the rest.
AT_REST_BYTES: Final = 46 * MIB
PARSE_FIXED_BYTES: Final = 4 * MIB
PARSE_TENTHS_PER_BYTE: Final = 116  # the part of a parse that grows with the page
SESSION_BYTES: Final = 60 * KIB  # LIM-M4; a session's state is the same in kind
# The most a connection without a token makes the process hold: a header block just under
# LIM-H7 left unfinished measured 76.4 KiB a connection over HTTP/2 and 50.9 KiB over HTTP/1
# (1000 connections, `tools/bench-http --only-floods`); rounded up with one decoded header
# list besides. A longer block closes the connection as its frames arrive (issue 18.3).
CONNECTION_BYTES: Final = 96 * KIB


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


def estimate(config: Config) -> Estimate:
    fetch, limits, http = config.fetch, config.limits, config.service.http
    shares = [
        Share(
            name="bodies",
            bytes=limits.fetches_in_flight * fetch.max_bytes,
            settings=("fetch.max_bytes", "limits.fetches_in_flight"),
        ),
        Share(
            name="parses",
            bytes=limits.parsing_in_flight
            * (PARSE_TENTHS_PER_BYTE * fetch.max_bytes // 10 + PARSE_FIXED_BYTES),
            settings=("fetch.max_bytes", "limits.parsing_in_flight"),
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
