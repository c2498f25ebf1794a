"""The memory of web_fetch under load (REQ-SEC-012, REQ-PAGE-008,
REQ-PERF-003): how many page bodies are alive at once, what an abandoned parse keeps, and
when a call waiting for a parse permit answers.

Bodies are counted from outside the pipeline: each fixture site counts the page bodies it
has sent in full, the extractor (replaced by a counting one) the parses it has finished. A
body sent and not yet parsed is alive in rypsok (or on its way there), so the difference
bounds the bodies rypsok holds. Real loopback sockets; the deadline test runs on MockClock.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import trio
import trio.testing
from fetch_helpers import fetch_config, fetching_rypsok
from fetch_sites import Page, serve_site

from rypsok.core.fetch import reading
from rypsok.core.fetch.parse import parse_html
from rypsok.core.fetch.parse.target import BoundedTarget
from rypsok.core.model import DetailReason, ErrorKind, FetchRequest, ToolError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import pytest

OPEN = Page.text("User-agent: *\nAllow: /\n")
HOSTS = ("a.org", "b.org", "c.org", "d.org")
ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4")
# Long enough that a body is read in many pieces; small enough for a quick test.
PAGE_BYTES = 256 * 1024


def large_page() -> bytes:
    paragraph = b"<p>" + b"words of an ordinary article, read in full " * 4 + b"</p>\n"
    head = b"<html><head><title>Large</title></head><body><article>"
    body = head + paragraph * ((PAGE_BYTES - len(head)) // len(paragraph))
    return body + b"</article></body></html>"


class Counts:
    """Bodies sent in full by the sites, and parses finished by the extractor."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent = 0
        self.parsed = 0
        self.parsing = 0
        self.most_parsing = 0
        self.most_alive = 0

    def alive(self) -> int:
        with self.lock:
            return self.sent - self.parsed

    def note(self) -> None:
        self.most_alive = max(self.most_alive, self.alive())


def counted_page(counts: Counts, body: bytes) -> Page:
    async def chunks() -> AsyncIterator[bytes]:
        for offset in range(0, len(body), 16384):
            yield body[offset : offset + 16384]
        # Resumed once the last piece is written: the whole body has left the site.
        with counts.lock:
            counts.sent += 1
        counts.note()

    return Page(headers=(("Content-Type", "text/html; charset=utf-8"),), body=chunks)


def gated_extract(monkeypatch: pytest.MonkeyPatch) -> tuple[Counts, threading.Event]:
    """Every parse waits at the gate returned (a thread cannot be stopped: this is a slow
    page), and is counted."""
    counts = Counts()
    gate = threading.Event()
    real = reading.extract

    def extract(document: str, kind: Any, base_url: str) -> Any:
        with counts.lock:
            counts.parsing += 1
            counts.most_parsing = max(counts.most_parsing, counts.parsing)
        try:
            gate.wait(timeout=20)
            return real(document, kind, base_url)
        finally:
            with counts.lock:
                counts.parsing -= 1
                counts.parsed += 1

    monkeypatch.setattr(reading, "extract", extract)
    return counts, gate


async def fetch(rypsok: Any, url: str) -> Any:
    try:
        return await rypsok.fetch(FetchRequest(url=url))
    except ToolError as error:
        return error


async def settle(counts: Counts) -> None:
    """Until a parse has begun and the bodies sent have not grown for 0.5 s (at most 10 s):
    every body rypsok would read while the parses are held has been read."""
    last, still = -1, 0.0
    with trio.move_on_after(10):
        while still < 0.5:
            await trio.sleep(0.05)
            steady = counts.parsing > 0 and counts.sent == last
            still = still + 0.05 if steady else 0.0
            last = counts.sent


async def test_req_sec_012_req_perf_003_bodies_waiting_for_a_parse_permit_stay_under_lim_c3(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts, gate = gated_extract(monkeypatch)
    fetches, parses, calls = 2, 1, 12
    cfg = fetch_config(
        "[egress]\nallow_http = true\n[fetch]\ndeadline_ms = 10000\n"
        f"[limits]\nfetches_in_flight = {fetches}\nparsing_in_flight = {parses}\n"
    )
    routes = {"/robots.txt": OPEN, "/page": counted_page(counts, large_page())}
    async with (
        serve_site(routes, address=ADDRESSES[0]) as a,
        serve_site(routes, address=ADDRESSES[1]) as b,
        serve_site(routes, address=ADDRESSES[2]) as c,
        serve_site(routes, address=ADDRESSES[3]) as d,
    ):
        rypsok, _, _ = fetching_rypsok(cfg, dict(zip(HOSTS, (a, b, c, d), strict=True)))
        answers: list[Any] = []

        async def call(host: str) -> None:
            answers.append(await fetch(rypsok, f"http://{host}/page"))

        async with rypsok, trio.open_nursery() as nursery:
            for index in range(calls):
                nursery.start_soon(call, HOSTS[index % len(HOSTS)])
            # Every parse is held: the calls that read a body meanwhile keep it.
            await settle(counts)
            held = counts.alive()
            gate.set()
    assert counts.parsed == calls
    assert all(not isinstance(answer, ToolError) for answer in answers), answers
    assert all(answer.title == "Large" for answer in answers)
    # LIM-C3 bodies under their slots and LIM-C5 in their parses, no more, at any moment.
    assert held == fetches + parses
    assert counts.most_alive <= fetches + parses
    assert counts.most_parsing == parses


async def test_req_page_008_an_abandoned_parse_keeps_its_permit_until_it_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts, gate = gated_extract(monkeypatch)
    cfg = fetch_config(
        "[egress]\nallow_http = true\n[fetch]\ndeadline_ms = 1000\n"
        "[limits]\nfetches_in_flight = 2\nparsing_in_flight = 1\n"
    )
    routes = {"/robots.txt": OPEN, "/page": counted_page(counts, large_page())}
    async with (
        serve_site(routes, address=ADDRESSES[0]) as a,
        serve_site(routes, address=ADDRESSES[1]) as b,
    ):
        rypsok, _, _ = fetching_rypsok(cfg, {"a.org": a, "b.org": b})
        async with rypsok:
            # The first call's parse outlives it (LIM-F5 = 2 s): the call ends, the thread
            # goes on, and keeps the one permit.
            first = await fetch(rypsok, "http://a.org/page")
            assert counts.parsing == 1
            # So the next body waits for that permit, and never starts a second parse.
            start = trio.current_time()
            second = await fetch(rypsok, "http://b.org/page")
            took = trio.current_time() - start
            assert counts.parsing == 1
            gate.set()
            # Once the abandoned thread has ended, its permit serves the next call.
            third = await fetch(rypsok, "http://b.org/page")
    for answer in (first, second):
        assert isinstance(answer, ToolError)
        assert (answer.kind, answer.detail.reason) == (ErrorKind.UNAVAILABLE, DetailReason.DEADLINE)
    assert took < 2.0  # the wait ends at LIM-F4 (1 s), before LIM-F5
    assert not isinstance(third, ToolError), third
    assert counts.most_parsing == 1
    assert counts.most_alive <= 2 + 1


async def test_req_page_008_a_call_waiting_for_a_parse_permit_answers_deadline_at_lim_f4(
    monkeypatch: pytest.MonkeyPatch, mock_clock: trio.testing.MockClock
) -> None:
    """On MockClock: the clock jumps once every task waits (the parse holds the permit)."""
    mock_clock.autojump_threshold = 0.2
    counts, gate = gated_extract(monkeypatch)
    deadline_s, lim_f5_s = 10.0, 11.0  # the defaults: LIM-F4 and LIM-F5
    reserve_s = 0.5  # of LIM-F5's margin, left for ending the call and its answer
    cfg = fetch_config("[egress]\nallow_http = true\n[limits]\nparsing_in_flight = 1\n")
    routes = {"/robots.txt": OPEN, "/page": counted_page(counts, large_page())}
    timed: list[tuple[Any, float]] = []
    try:
        async with (
            serve_site(routes, address=ADDRESSES[0]) as a,
            serve_site(routes, address=ADDRESSES[1]) as b,
        ):
            rypsok, _, _ = fetching_rypsok(cfg, {"a.org": a, "b.org": b})

            async def call(url: str, after: float) -> None:
                await trio.sleep(after)
                start = trio.current_time()
                answer = await fetch(rypsok, url)
                timed.append((answer, trio.current_time() - start))

            async with rypsok, trio.open_nursery() as nursery:
                nursery.start_soon(call, "http://a.org/page", 0.0)
                nursery.start_soon(call, "http://b.org/page", 1.0)
    finally:
        gate.set()
    (parsed, parse_took), (waited, wait_took) = sorted(timed, key=lambda t: t[1], reverse=True)
    for answer in (parsed, waited):
        assert isinstance(answer, ToolError)
        assert answer.detail.reason is DetailReason.DEADLINE
    # The parse is cut before LIM-F5, the time left kept for the answer; the body that waited
    # for its permit is answered at the fetch deadline, however many calls wait.
    assert parse_took == lim_f5_s - reserve_s
    assert wait_took == deadline_s


async def test_req_page_008_an_abandoned_parse_stops_within_a_slice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A parse whose call ended stops at the next slice (FEED_SLICE): it holds its permit
    and its memory only that long, not for the rest of a page that takes seconds."""
    elements = 500_000
    html = "<html><body>" + "<i>x</i>" * elements + "</body></html>"
    counted = 0
    begun = threading.Event()
    ended = threading.Event()
    real = BoundedTarget.start

    def start(target: Any, tag: object, attrib: dict[str, str]) -> None:
        nonlocal counted
        counted += 1
        if counted == 1000:
            begun.set()
        real(target, tag, attrib)

    def run() -> object:
        try:
            return parse_html(html, max_nodes=10**7, max_depth=256)
        finally:
            ended.set()

    monkeypatch.setattr(BoundedTarget, "start", start)
    limiter = trio.CapacityLimiter(1)
    with trio.move_on_after(20) as call:
        async with trio.open_nursery() as nursery:

            async def abandon_once_begun() -> None:
                await trio.to_thread.run_sync(begun.wait, 10)
                call.cancel()

            nursery.start_soon(abandon_once_begun)
            await trio.to_thread.run_sync(run, limiter=limiter, abandon_on_cancel=True)
    assert call.cancelled_caught
    assert await trio.to_thread.run_sync(ended.wait, 10)
    await trio.sleep(0.05)  # the release is delivered to the loop once the thread has ended
    assert counted < elements // 10  # stopped within a slice or two of the cancellation
    assert limiter.borrowed_tokens == 0


# Words of a page whose instruction check reads it all: "ignore" is one of the check's
# anchors, so its phrases are looked for over the whole text (read in one piece, 5 MB of it
# would hold the GIL for seconds), and no phrase is there.
_CHECKED_LINE = "ignore the weather, the words go on and on without an end in sight.\n"


async def test_lim_f5_req_page_008_a_call_ends_within_lim_f5_while_a_large_page_is_read() -> None:
    """Real clock, the smallest LIM-F4 (1 s, so LIM-F5 2 s). The read of a text page at the
    largest LIM-F3 (10 MiB) outlives the call; the event loop must still end the call on time,
    and answer other work meanwhile (a task that ticks every 10 ms is never held up long).
    (At 5 MiB the read took 1.5 s on a quiet CI machine and the call ended with its answer,
    testing nothing.)"""
    page = _CHECKED_LINE * (10 * 1024 * 1024 // len(_CHECKED_LINE))
    cfg = fetch_config(
        "[egress]\nallow_http = true\n[fetch]\ndeadline_ms = 1000\nmax_bytes = 10485760\n"
    )
    routes = {"/robots.txt": OPEN, "/page": Page.text(page)}
    async with serve_site(routes, address=ADDRESSES[0]) as a:
        rypsok, _, _ = fetching_rypsok(cfg, {"a.org": a})
        gaps: list[float] = []
        async with rypsok, trio.open_nursery() as nursery:

            async def tick() -> None:
                last = trio.current_time()
                while True:
                    await trio.sleep(0.01)
                    now = trio.current_time()
                    gaps.append(now - last)
                    last = now

            nursery.start_soon(tick)
            start = trio.current_time()
            answer = await fetch(rypsok, "http://a.org/page")
            took = trio.current_time() - start
            nursery.cancel_scope.cancel()
    assert isinstance(answer, ToolError), "the read ended before the deadline: nothing tested"
    assert (answer.kind, answer.detail.reason) == (ErrorKind.UNAVAILABLE, DetailReason.DEADLINE)
    assert took <= 2.0, took
    # No single step of the read holds the GIL for long (decode, the text's normalisation,
    # the invisible-character removal and NFC, the instruction check).
    assert max(gaps) < 0.75, max(gaps)  # one scan of the page held it 1.3 to 1.9 s
