"""Hostile pages end the call as the book says, within LIM-F5, and never the process
(REQ-TEST-006, REQ-PAGE-003/004/006/008, REQ-SEC-012/013, LIM-F3/F4/F5/F10/F11, LIM-C3/C4/C5).

Each hostile call runs beside an ordinary call to another site in the same process; the
ordinary one is answered normally. Real sockets, the real clock, small configured limits:
deadline_ms = 1000 makes LIM-F5 two seconds.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import trio
from fetch_helpers import fetch_config, fetching_rypsok
from fetch_sites import Page, endless, gzip_bomb, serve_site

from rypsok.core.fetch import reading
from rypsok.core.model import DetailReason, ErrorKind, FetchRequest, NoticeCode, ToolError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import pytest

ARTICLE = (
    "<html><head><title>Fine</title></head><body><article><p>An ordinary page read while "
    "another call meets a hostile one, long enough to be the main block.</p></article></body>"
    "</html>"
)
OPEN = Page.text("User-agent: *\nAllow: /\n")
DEADLINE_S = 1.0
LIM_F5_S = DEADLINE_S + 1.0
# Scheduling slack of a loaded machine on top of the bound; the bound itself is LIM-F5.
SLACK_S = 0.5


def config(extra: str = "", deadline_ms: int = 1000) -> Any:
    return fetch_config(
        f"[egress]\nallow_http = true\n[fetch]\ndeadline_ms = {deadline_ms}\n"
        "connect_timeout_ms = 500\n" + extra
    )


async def fetch(rypsok: Any, url: str, **kwargs: Any) -> Any:
    try:
        return await rypsok.fetch(FetchRequest(url=url, **kwargs))
    except ToolError as error:
        return error


async def beside_an_ordinary_call(
    hostile: Page, extra: str = "", path: str = "/hostile", deadline_ms: int = 1000
) -> tuple[Any, float]:
    """The hostile page's answer and how long its call took; asserts the ordinary call."""
    async with (
        serve_site({"/robots.txt": OPEN, path: hostile}) as bad,
        serve_site({"/robots.txt": OPEN, "/fine": Page.html(ARTICLE)}, address="127.0.0.2") as ok,
    ):
        cfg = config(extra, deadline_ms)
        rypsok, _, _ = fetching_rypsok(cfg, {"bad.org": bad, "ok.org": ok})
        answers: dict[str, Any] = {}
        async with rypsok, trio.open_nursery() as nursery:

            async def hostile_call() -> None:
                start = trio.current_time()
                answers["hostile"] = await fetch(rypsok, f"http://bad.org{path}")
                answers["took"] = trio.current_time() - start

            async def ordinary_call() -> None:
                await trio.sleep(0.05)
                answers["ordinary"] = await fetch(rypsok, "http://ok.org/fine")

            nursery.start_soon(hostile_call)
            nursery.start_soon(ordinary_call)
    ordinary = answers["ordinary"]
    assert not isinstance(ordinary, ToolError), ordinary
    assert ordinary.title == "Fine"
    assert answers["took"] <= deadline_ms / 1000 + 1.0 + SLACK_S  # LIM-F5
    return answers["hostile"], answers["took"]


async def test_req_page_003_req_sec_013_a_gzip_bomb_is_too_large_never_buffered() -> None:
    bomb = gzip_bomb(200 * 1024 * 1024)  # 200 MiB of zeros in about 200 KB
    page = Page(headers=(("Content-Type", "text/html"), ("Content-Encoding", "gzip")), body=bomb)
    answer, _ = await beside_an_ordinary_call(page, "max_bytes = 65536\n")
    assert isinstance(answer, ToolError)
    assert answer.kind is ErrorKind.TOO_LARGE
    assert answer.detail.limit_bytes == 65536


async def test_req_page_003_a_declared_length_above_the_limit_ends_before_the_body() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b"<p>" + b"a" * 1000
        await trio.sleep(30)  # never sent: the declared length alone ends the call

    headers = (("Content-Type", "text/html"), ("Content-Length", str(10 * 1024 * 1024)))
    answer, took = await beside_an_ordinary_call(
        Page(headers=headers, body=body), "max_bytes = 65536\n"
    )
    assert isinstance(answer, ToolError)
    assert answer.kind is ErrorKind.TOO_LARGE
    assert took < DEADLINE_S


async def test_lim_f3_a_page_at_the_limit_is_read_and_one_byte_more_is_not() -> None:
    limit = 65536
    head, tail = b"<html><body><p>", b"</p></body></html>"
    fits = head + b"w " * ((limit - len(head) - len(tail)) // 2) + tail
    fits += b" " * (limit - len(fits))
    assert len(fits) == limit
    for body, too_large in ((fits, False), (fits + b" ", True)):
        page = Page(headers=(("Content-Type", "text/html"),), body=body, content_length=False)
        answer, _ = await beside_an_ordinary_call(page, f"max_bytes = {limit}\n")
        assert isinstance(answer, ToolError) is too_large
        if too_large:
            assert answer.kind is ErrorKind.TOO_LARGE


async def test_req_page_004_a_page_that_never_ends_is_too_large() -> None:
    page = Page(headers=(("Content-Type", "text/html"),), body=endless())
    answer, _ = await beside_an_ordinary_call(page, "max_bytes = 65536\n")
    assert isinstance(answer, ToolError)
    assert answer.kind is ErrorKind.TOO_LARGE


async def test_lim_f4_a_slow_drip_that_outlives_the_deadline_is_unavailable_deadline() -> None:
    async def drip() -> AsyncIterator[bytes]:
        yield b"<html><body><p>"
        while True:
            await trio.sleep(0.1)
            yield b"x"

    page = Page(headers=(("Content-Type", "text/html"),), body=drip)
    answer, took = await beside_an_ordinary_call(page)
    assert isinstance(answer, ToolError)
    assert (answer.kind, answer.detail.reason) == (ErrorKind.UNAVAILABLE, DetailReason.DEADLINE)
    assert answer.message == "the page was not retrieved before the deadline; retry later"
    assert took >= DEADLINE_S


async def test_lim_f4_a_site_that_never_answers_is_unavailable_deadline() -> None:
    page = Page.html(ARTICLE, delay_s=30)
    answer, _ = await beside_an_ordinary_call(page)
    assert isinstance(answer, ToolError)
    assert answer.detail.reason is DetailReason.DEADLINE


async def test_req_page_006_lim_f11_a_million_nested_elements_are_read_in_part() -> None:
    body = "<html><body><article><p>Text before the nesting, enough to be read.</p>"
    body += "<div>" * 1_000_000 + "deep" + "</div>" * 10 + "</article></body></html>"
    page = Page(headers=(("Content-Type", "text/html"),), body=body.encode())
    answer, _ = await beside_an_ordinary_call(page, "max_bytes = 10485760\n")
    assert not isinstance(answer, ToolError), answer
    assert "Text before the nesting" in answer.content
    assert NoticeCode.EXTRACTION_PARTIAL in {n.code for n in answer.notices}


async def test_req_page_006_lim_f10_two_hundred_thousand_nodes_are_read_in_part() -> None:
    body = "<html><body><article>" + "<p>para</p>" * 200_000 + "</article></body></html>"
    page = Page(headers=(("Content-Type", "text/html"),), body=body.encode())
    # Extracting 100000 nodes takes about 1.5 s here: the default deadline, not the short one.
    answer, _ = await beside_an_ordinary_call(page, deadline_ms=10000)
    assert not isinstance(answer, ToolError), answer
    assert answer.content.startswith("para")
    assert NoticeCode.EXTRACTION_PARTIAL in {n.code for n in answer.notices}


async def test_req_page_006_malformed_html_is_read_or_refused_never_a_crash() -> None:
    for body in (b"<html><body><p>unclosed <b>bold <i>text" * 50, b"\x00\xff<\x80>" * 1000):
        page = Page(headers=(("Content-Type", "text/html"),), body=body)
        answer, _ = await beside_an_ordinary_call(page)
        if isinstance(answer, ToolError):
            assert answer.detail.reason is DetailReason.EXTRACTION_FAILED
        else:
            assert answer.content


async def test_req_page_008_a_parse_never_extends_the_call_past_lim_f5(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = reading.extract

    def slow(document: str, kind: Any, base_url: str) -> Any:
        if "slow.org" in base_url:
            time.sleep(3 * LIM_F5_S)
        return real(document, kind, base_url)

    monkeypatch.setattr(reading, "extract", slow)
    async with serve_site({"/robots.txt": OPEN, "/p": Page.html(ARTICLE)}) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"slow.org": site})
        async with rypsok:
            start = trio.current_time()
            answer = await fetch(rypsok, "http://slow.org/p")
            took = trio.current_time() - start
    assert isinstance(answer, ToolError)
    assert answer.detail.reason is DetailReason.DEADLINE
    assert took <= LIM_F5_S + SLACK_S


async def test_req_page_008_lim_c5_parses_run_in_threads_at_most_two_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = reading.extract
    lock = threading.Lock()
    running = 0
    most = 0
    threads: set[int] = set()
    loop_thread = threading.get_ident()

    def counting(document: str, kind: Any, base_url: str) -> Any:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            threads.add(threading.get_ident())
        time.sleep(0.15)
        with lock:
            running -= 1
        return real(document, kind, base_url)

    monkeypatch.setattr(reading, "extract", counting)
    routes = {"/robots.txt": OPEN, "/p": Page.html(ARTICLE)}
    cfg = config("[limits]\nfetches_in_flight = 4\nparsing_in_flight = 2\n")
    async with (
        serve_site(routes) as a,
        serve_site(routes, address="127.0.0.2") as b,
        serve_site(routes, address="127.0.0.3") as c,
        serve_site(routes, address="127.0.0.4") as d,
    ):
        sites = {"a.org": a, "b.org": b, "c.org": c, "d.org": d}
        rypsok, _, _ = fetching_rypsok(cfg, sites)
        results: list[Any] = []
        async with rypsok, trio.open_nursery() as nursery:
            for name in sites:
                nursery.start_soon(lambda n=name: _append(results, rypsok, f"http://{n}/p"))
    assert all(r.title == "Fine" for r in results)
    assert most == 2
    assert loop_thread not in threads


async def _append(results: list[Any], rypsok: Any, url: str) -> None:
    results.append(await fetch(rypsok, url))


def slow_page(delay_s: float) -> Page:
    return Page.html(ARTICLE, delay_s=delay_s)


async def test_lim_c4_one_fetch_per_host_at_a_time() -> None:
    async with serve_site({"/robots.txt": OPEN, "/p": slow_page(0.2)}) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"host.org": site})
        results: list[Any] = []
        async with rypsok, trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(_append, results, rypsok, "http://host.org/p")
    assert [r.title for r in results] == ["Fine"] * 3
    assert site.max_active == 1


async def test_lim_c3_fetches_in_flight_in_the_process() -> None:
    routes = {"/robots.txt": OPEN, "/p": slow_page(0.2)}
    async with serve_site(routes) as a, serve_site(routes, address="127.0.0.2") as b:
        cfg = config("[limits]\nfetches_in_flight = 1\n")
        rypsok, _, _ = fetching_rypsok(cfg, {"a.org": a, "b.org": b})
        results: list[Any] = []
        active: list[int] = []

        async def watch() -> None:
            while True:
                active.append(a.active + b.active)
                await trio.sleep(0.01)

        async with rypsok, trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            async with trio.open_nursery() as calls:
                calls.start_soon(_append, results, rypsok, "http://a.org/p")
                calls.start_soon(_append, results, rypsok, "http://b.org/p")
            nursery.cancel_scope.cancel()
    assert [r.title for r in results] == ["Fine", "Fine"]
    assert max(active) == 1


async def test_req_sec_012_a_call_that_waits_past_its_deadline_for_a_slot_is_busy() -> None:
    async with serve_site({"/robots.txt": OPEN, "/p": Page.html(ARTICLE)}) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"busy.org": site})
        release = trio.Event()

        async def other_fetch(task_status: trio.TaskStatus[None]) -> None:
            slots = rypsok._fetch_slots
            async with slots.body() as slot, slots.host("busy.org", slot):
                task_status.started()
                await release.wait()

        async with rypsok, trio.open_nursery() as nursery:
            # Another task holds the host's one slot (LIM-C4) for longer than the deadline:
            # the call waits, then ends as busy, without a request.
            await nursery.start(other_fetch)
            start = trio.current_time()
            answer = await fetch(rypsok, "http://busy.org/p")
            took = trio.current_time() - start
            release.set()
            after = await fetch(rypsok, "http://busy.org/p")
    assert isinstance(answer, ToolError)
    assert (answer.kind, answer.detail.reason) == (ErrorKind.UNAVAILABLE, DetailReason.BUSY)
    assert DEADLINE_S <= took <= LIM_F5_S + SLACK_S
    assert after.title == "Fine"
    assert site.paths() == ["/robots.txt", "/p"]


async def test_req_page_008_lim_c5_large_engine_answers_are_decoded_on_the_same_limiter() -> None:
    from rypsok.core.engines.client import EngineClient

    loop_thread = threading.get_ident()
    seen: list[tuple[int, int]] = []
    limiter = trio.CapacityLimiter(1)

    def decode(body: bytes) -> int:
        seen.append((len(body), threading.get_ident()))
        return len(body)

    async with EngineClient() as http:
        http.parse_limiter = limiter
        assert await http.off_loop(decode, b"{}" * 100) == 200
        assert await http.off_loop(decode, b" " * 70000) == 70000
    small, large = seen
    assert small[1] == loop_thread  # a small answer costs less inline than a thread trip
    assert large[1] != loop_thread
    assert limiter.borrowed_tokens == 0


async def test_req_page_007_a_wrong_charset_is_read_with_replacements_never_a_failure() -> None:
    # Declared UTF-8, sent as Shift_JIS: undecodable bytes are replaced, the call goes on.
    text = "<html><body><article><p>" + "日本語の文章です。" * 200 + "</p></article></body></html>"
    page = Page(
        headers=(("Content-Type", "text/html; charset=utf-8"),), body=text.encode("shift_jis")
    )
    answer, _ = await beside_an_ordinary_call(page)
    assert not isinstance(answer, ToolError), answer
    assert "\ufffd" in answer.content
