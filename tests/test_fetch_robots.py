"""robots.txt (REQ-CMP-005, LIM-F12, LIM-F13, LIM-F15) through the real pipeline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing
from fetch_helpers import fetch_config, fetching_rypsok
from fetch_sites import Page, serve_site

from rypsok.core.fetch.robots import ROBOTS_UNREADABLE_TTL_S, Robots, RobotsCache
from rypsok.core.model import DetailReason, ErrorKind, FetchRequest, ToolError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

ARTICLE = (
    "<html><head><title>Page</title></head><body><article><p>Readable article text that "
    "is long enough to be the main block of this page.</p></article></body></html>"
)


async def fetch(rypsok: Any, url: str, **kwargs: Any) -> Any:
    try:
        return await rypsok.fetch(FetchRequest(url=url, **kwargs))
    except ToolError as error:
        return error


def config(extra: str = "") -> Any:
    return fetch_config("[egress]\nallow_http = true\n" + extra)


def is_robots_denial(answer: Any) -> bool:
    return (
        isinstance(answer, ToolError)
        and answer.kind is ErrorKind.DENIED
        and answer.detail.reason is DetailReason.ROBOTS_TXT
    )


@pytest.mark.parametrize(
    ("robots", "path", "denied"),
    [
        ("User-agent: rypsok\nDisallow: /private\n", "/private/page", True),
        ("User-agent: rypsok\nDisallow: /private\n", "/public", False),
        ("User-agent: *\nDisallow: /\n", "/anything", True),
        # The group of rypsok's own token wins over *.
        ("User-agent: *\nDisallow: /\n\nUser-agent: rypsok\nAllow: /\n", "/page", False),
        ("User-agent: RYPSOK\nDisallow: /\n", "/page", True),
        ("User-agent: otherbot\nDisallow: /\n", "/page", False),
        ("User-agent: *\nDisallow: /*.html$\n", "/page.html", True),
        ("# only a comment\n", "/page", False),
        # RFC 9309 §2.2.1: the product token a user-agent line starts with names the group.
        ("User-agent: rypsok/1.0\nDisallow: /\n", "/page", True),
        ("User-agent: rypsok bot\nDisallow: /\n", "/page", True),
        ("User-agent: Rypsok (+https://example.org)\nDisallow: /\n", "/page", True),
        # ... and no other: a prefix of rypsok, or a longer token, is another crawler.
        ("User-agent: ryp\nDisallow: /\n", "/page", False),
        ("User-agent: rypsokbot\nDisallow: /\n", "/page", False),
        # A Crawl-delay, Sitemap or unknown line neither ends a group nor starts one.
        ("User-agent: rypsok\nCrawl-delay: 5\nUser-agent: other\nDisallow: /\n", "/page", True),
        ("User-agent: rypsok\nSitemap: /s.xml\nUser-agent: x\nDisallow: /\n", "/page", True),
        ("User-agent: rypsok\nNo-such-line: 1\nUser-agent: x\nDisallow: /\n", "/page", True),
        ("User-agent: rypsok\nCrawl-delay: 5\nDisallow: /\n", "/page", True),
    ],
)
async def test_req_cmp_005_rules_for_rypsok_and_star(robots: str, path: str, denied: bool) -> None:
    routes = {"/robots.txt": Page.text(robots), path: Page.html(ARTICLE)}
    async with serve_site(routes) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"robots.org": site})
        async with rypsok:
            answer = await fetch(rypsok, f"http://robots.org{path}")
    assert is_robots_denial(answer) is denied
    # A disallowed page is never requested.
    assert (path in site.paths()) is not denied


@pytest.mark.parametrize(
    ("status", "denied"),
    [
        (200, False),
        (404, False),
        (401, False),
        (403, False),
        (410, False),
        (429, False),
        (500, True),
        (502, True),
        (503, True),
        (599, True),
    ],
)
async def test_req_cmp_005_4xx_allows_and_5xx_disallows(status: int, denied: bool) -> None:
    robots = Page(status=status, headers=(("Content-Type", "text/plain"),), body=b"")
    async with serve_site({"/robots.txt": robots, "/p": Page.html(ARTICLE)}) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"status.org": site})
        async with rypsok:
            answer = await fetch(rypsok, "http://status.org/p")
    assert is_robots_denial(answer) is denied


async def test_req_cmp_005_a_robots_txt_that_cannot_be_read_whole_disallows() -> None:
    # Declared gzip, sent garbage: the file is unreadable, so everything is disallowed.
    robots = Page(headers=(("Content-Encoding", "gzip"),), body=b"not gzip at all")
    async with serve_site({"/robots.txt": robots, "/p": Page.html(ARTICLE)}) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"broken.org": site})
        async with rypsok:
            answer = await fetch(rypsok, "http://broken.org/p")
    assert is_robots_denial(answer)


async def test_req_cmp_005_the_verdict_is_kept_per_origin_and_a_hop_costs_no_request() -> None:
    routes = {
        "/robots.txt": Page.text("User-agent: *\nDisallow: /no\n"),
        "/a": Page.redirect("/b"),
        "/b": Page.html(ARTICLE),
        "/c": Page.html(ARTICLE),
    }
    async with serve_site(routes) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"cache.org": site})
        async with rypsok:
            await fetch(rypsok, "http://cache.org/a")
            await fetch(rypsok, "http://cache.org/c")
    assert site.paths() == ["/robots.txt", "/a", "/b", "/c"]


async def test_req_cmp_005_each_redirect_target_is_checked_on_the_same_host() -> None:
    routes = {
        "/robots.txt": Page.text("User-agent: *\nDisallow: /private\n"),
        "/open": Page.redirect("/private/page"),
        "/private/page": Page.html(ARTICLE),
    }
    async with serve_site(routes) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"hop.org": site})
        async with rypsok:
            answer = await fetch(rypsok, "http://hop.org/open")
    assert is_robots_denial(answer)
    assert "/private/page" not in site.paths()


async def test_req_cmp_005_a_followed_cross_host_target_is_checked_on_its_host() -> None:
    async with (
        serve_site({"/go": Page.redirect("http://two.org/p"), "/robots.txt": Page.text("")}) as one,
        serve_site(
            {"/robots.txt": Page.text("User-agent: *\nDisallow: /p\n"), "/p": Page.html(ARTICLE)},
            address="127.0.0.2",
        ) as two,
    ):
        cfg = config("[fetch]\nfollow_cross_host_redirects = true\n")
        rypsok, _, _ = fetching_rypsok(cfg, {"one.org": one, "two.org": two})
        async with rypsok:
            answer = await fetch(rypsok, "http://one.org/go")
    assert is_robots_denial(answer)
    assert two.paths() == ["/robots.txt"]


async def test_req_cmp_005_the_operator_may_turn_the_check_off() -> None:
    routes = {"/robots.txt": Page.text("User-agent: *\nDisallow: /\n"), "/p": Page.html(ARTICLE)}
    async with serve_site(routes) as site:
        rypsok, _, _ = fetching_rypsok(config("[fetch]\nrobots_txt = false\n"), {"off.org": site})
        async with rypsok:
            answer = await fetch(rypsok, "http://off.org/p")
    assert answer.title == "Page"
    assert site.paths() == ["/p"]


async def test_lim_f13_only_the_first_512_kib_of_a_robots_txt_count() -> None:
    filler = "# " + "x" * 1000 + "\n"
    early = "User-agent: *\nDisallow: /early\n"
    late = "User-agent: *\nDisallow: /late\n"
    body = early + filler * 600 + late  # the late rule starts after 600 KB
    routes = {
        "/robots.txt": Page.text(body),
        "/early": Page.html(ARTICLE),
        "/late": Page.html(ARTICLE),
    }
    async with serve_site(routes) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"big.org": site})
        async with rypsok:
            early_answer = await fetch(rypsok, "http://big.org/early")
            late_answer = await fetch(rypsok, "http://big.org/late")
    assert is_robots_denial(early_answer)
    assert late_answer.title == "Page"


async def test_lim_f13_the_cut_is_at_exactly_512_kib() -> None:
    # The rule `Disallow: /x` ends at the 524288th byte; a `y` after it is cut off. A
    # byte fewer would leave `Disallow: /` (everything), a byte more `Disallow: /xy`.
    head = b"User-agent: *\n"
    rule = b"Disallow: /x"
    filler = b"#" * (512 * 1024 - len(head) - len(rule) - 1) + b"\n"
    body = head + filler + rule + b"y\n"
    assert body.index(b"y\n") == 512 * 1024
    robots = Page(headers=(("Content-Type", "text/plain"),), body=body)
    routes = {"/robots.txt": robots, "/xz": Page.html(ARTICLE), "/y": Page.html(ARTICLE)}
    async with serve_site(routes) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"cut.org": site})
        async with rypsok:
            cut = await fetch(rypsok, "http://cut.org/xz")
            other = await fetch(rypsok, "http://cut.org/y")
    assert is_robots_denial(cut)
    assert other.title == "Page"


async def test_lim_f15_the_cache_holds_at_most_the_configured_origins() -> None:
    cfg = config("[limits]\nrobots_cache_entries = 10\n")
    routes = {"/robots.txt": Page.text(""), "/p": Page.html(ARTICLE)}
    async with serve_site(routes) as site:
        names = [f"host{i}.org" for i in range(11)]
        rypsok, _, _ = fetching_rypsok(cfg, dict.fromkeys(names, site))
        async with rypsok:
            for name in names[:10]:
                await fetch(rypsok, f"http://{name}/p")
            await fetch(rypsok, f"http://{names[0]}/p")  # still known: no read
            assert site.paths().count("/robots.txt") == 10
            await fetch(rypsok, f"http://{names[10]}/p")  # the eleventh pushes out the oldest
            await fetch(rypsok, f"http://{names[0]}/p")  # host0 was used last: still known
            await fetch(rypsok, f"http://{names[1]}/p")  # host1 was the oldest: read again
    assert site.paths().count("/robots.txt") == 12


async def test_lim_f12_a_verdict_expires_after_a_day(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cache = RobotsCache(10)
    reads = 0

    async def read() -> Robots:
        nonlocal reads
        reads += 1
        return Robots.parse(b"User-agent: *\nDisallow: /x\n")

    await cache.rules_for("https://a.org:443", read)
    await trio.sleep(24 * 3600 - 1)
    await cache.rules_for("https://a.org:443", read)
    assert reads == 1
    await trio.sleep(1)
    robots = await cache.rules_for("https://a.org:443", read)
    assert reads == 2
    assert not robots.allows("https://a.org/x/y")


async def test_lim_f15_lru_order(autojump_clock: trio.testing.MockClock) -> None:
    cache = RobotsCache(2)
    cache.put("a", Robots.allowing())
    cache.put("b", Robots.allowing())
    assert cache.get("a") is not None  # a is now the most recent
    cache.put("c", Robots.allowing())
    assert cache.get("b") is None
    assert cache.get("a") is not None
    cache.put("d", Robots.unreachable())
    assert cache.get("c") is None
    assert len(cache) == 2
    # A verdict put again (read anew) is the most recent too, and replaces the old one.
    cache.put("a", Robots.unreachable())
    cache.put("e", Robots.allowing())
    assert cache.get("d") is None
    robots = cache.get("a")
    assert robots is not None
    assert not robots.allows("https://a.org/")


def test_lim_f15_the_cache_holds_at_least_one_origin() -> None:
    with pytest.raises(ValueError, match="at least one"):
        RobotsCache(0)
    cache = RobotsCache(1)
    assert len(cache) == 0


async def test_lim_f12_an_expired_verdict_is_let_go(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cache = RobotsCache(10)
    cache.put("a", Robots.allowing())
    await trio.sleep(24 * 3600)
    assert cache.get("a") is None
    assert len(cache) == 0


async def test_req_cmp_005_an_unreadable_verdict_is_kept_five_minutes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    assert ROBOTS_UNREADABLE_TTL_S == 300
    cache = RobotsCache(10)
    reads = 0

    async def read() -> Robots:
        nonlocal reads
        reads += 1
        return Robots.unreachable()

    robots = await cache.rules_for("https://a.org:443", read)
    assert not robots.allows("https://a.org/")
    await trio.sleep(ROBOTS_UNREADABLE_TTL_S - 0.001)
    await cache.rules_for("https://a.org:443", read)
    assert reads == 1
    await trio.sleep(0.001)
    await cache.rules_for("https://a.org:443", read)
    assert reads == 2


def hanging(pause_s: float) -> Page:
    """A robots.txt whose answer starts and then never ends: a byte now and then."""

    async def body() -> AsyncIterator[bytes]:
        yield b"User-agent: *\n"
        while True:
            await trio.sleep(pause_s)
            yield b"#"

    return Page(headers=(("Content-Type", "text/plain"),), body=body)


@pytest.mark.parametrize(
    "robots",
    [
        pytest.param(Page(delay_s=30.0), id="no-answer"),
        pytest.param(hanging(0.05), id="drip"),
        pytest.param(hanging(30.0), id="stalled-body"),
    ],
)
async def test_req_cmp_005_a_robots_txt_that_hangs_disallows_within_its_share(
    robots: Page,
) -> None:
    # A deadline of 1 s: robots.txt has half of it, and the verdict is remembered.
    cfg = config("[fetch]\ndeadline_ms = 1000\n")
    async with serve_site({"/robots.txt": robots, "/p": Page.html(ARTICLE)}) as site:
        rypsok, _, _ = fetching_rypsok(cfg, {"slow.org": site})
        async with rypsok:
            started = trio.current_time()
            first = await fetch(rypsok, "http://slow.org/p")
            first_s = trio.current_time() - started
            started = trio.current_time()
            second = await fetch(rypsok, "http://slow.org/p")
            second_s = trio.current_time() - started
    assert is_robots_denial(first)
    assert is_robots_denial(second)
    # Half the deadline, then denied (not `deadline`); the second call waits for nothing.
    assert first_s >= 0.45
    assert second_s < 0.4
    assert site.paths() == ["/robots.txt"]


async def test_req_cmp_005_a_slow_robots_txt_within_its_share_is_read() -> None:
    cfg = config("[fetch]\ndeadline_ms = 1000\n")
    robots = Page(headers=(("Content-Type", "text/plain"),), body=b"", delay_s=0.3)
    async with serve_site({"/robots.txt": robots, "/p": Page.html(ARTICLE)}) as site:
        rypsok, _, _ = fetching_rypsok(cfg, {"slow.org": site})
        async with rypsok:
            answer = await fetch(rypsok, "http://slow.org/p")
    assert answer.title == "Page"


@pytest.mark.parametrize(
    ("routes", "asked"),
    [
        pytest.param({"/robots.txt": Page.redirect("/robots.txt")}, 1, id="to-itself"),
        pytest.param(
            {"/robots.txt": Page.redirect("/a"), "/a": Page.redirect("/robots.txt")},
            2,
            id="loop",
        ),
        pytest.param(
            {"/robots.txt": Page.redirect("/r1")}
            | {f"/r{i}": Page.redirect(f"/r{i + 1}") for i in range(1, 6)}
            | {"/r6": Page.text("")},
            6,
            id="six-redirects",
        ),
    ],
)
async def test_req_cmp_005_a_robots_txt_redirect_loop_disallows(
    routes: dict[str, Page], asked: int
) -> None:
    async with serve_site(routes | {"/p": Page.html(ARTICLE)}) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"loop.org": site})
        async with rypsok:
            first = await fetch(rypsok, "http://loop.org/p")
            second = await fetch(rypsok, "http://loop.org/p")
    assert is_robots_denial(first)
    assert is_robots_denial(second)
    # A URL asked before ends the chain at once; the verdict is remembered.
    assert len(site.paths()) == asked


async def test_req_cmp_005_five_redirects_reach_the_file() -> None:
    routes = (
        {"/robots.txt": Page.redirect("/r1")}
        | {f"/r{i}": Page.redirect(f"/r{i + 1}") for i in range(1, 5)}
        | {"/r5": Page.text("User-agent: *\nDisallow: /no\n"), "/p": Page.html(ARTICLE)}
    )
    async with serve_site(routes) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"chain.org": site})
        async with rypsok:
            answer = await fetch(rypsok, "http://chain.org/p")
    assert answer.title == "Page"


@pytest.mark.parametrize(
    "bom",
    [b"\xef\xbb\xbf", b"\xef\xbb", b"\xef"],
    ids=["bom", "two-bytes-of-it", "one-byte-of-it"],
)
async def test_req_cmp_005_a_byte_order_mark_is_no_part_of_the_first_line(bom: bytes) -> None:
    body = bom + b"User-agent: *\nDisallow: /\n"
    robots = Page(headers=(("Content-Type", "text/plain"),), body=body)
    async with serve_site({"/robots.txt": robots, "/p": Page.html(ARTICLE)}) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"bom.org": site})
        async with rypsok:
            answer = await fetch(rypsok, "http://bom.org/p")
    assert is_robots_denial(answer)
    assert "/p" not in site.paths()


async def test_req_cmp_005_a_redirected_robots_txt_is_followed_and_judged() -> None:
    routes = {
        "/robots.txt": Page.redirect("/real-robots.txt"),
        "/real-robots.txt": Page.text("User-agent: *\nDisallow: /p\n"),
        "/p": Page.html(ARTICLE),
    }
    async with serve_site(routes) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"moved.org": site})
        async with rypsok:
            answer = await fetch(rypsok, "http://moved.org/p")
    assert is_robots_denial(answer)
    assert site.paths() == ["/robots.txt", "/real-robots.txt"]


async def test_req_cmp_005_a_robots_txt_redirected_to_a_refused_address_disallows() -> None:
    routes = {"/robots.txt": Page.redirect("http://10.0.0.1/robots.txt"), "/p": Page.html(ARTICLE)}
    async with serve_site(routes) as site:
        rypsok, network_backend, _ = fetching_rypsok(config(), {"moved.org": site})
        async with rypsok:
            answer = await fetch(rypsok, "http://moved.org/p")
    assert is_robots_denial(answer)
    assert all(str(address) == site.address for address, _ in network_backend.attempts)
