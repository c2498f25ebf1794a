"""The parse budget beside the LIM-C5 permits (REQ-PERF-003, REQ-PAGE-008,
REQ-SEC-012): which pages parse at once, in what order they wait, when a page waiting for
the budget answers, and what an abandoned parse stops doing.

Through the pipeline, parses are counted by a gated extractor (test_fetch_load's): a parse
waits at the gate, so the parses running at once can be read while it is held. Real
loopback sockets; the deadline test runs on MockClock.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import hypothesis
import hypothesis.strategies as st
import test_fetch_load as load
import trio
import trio.testing
from fetch_helpers import fetch_config, fetching_rypsok
from fetch_sites import serve_site

from rypsok.core.fetch import extract as extract_mod
from rypsok.core.fetch import parse
from rypsok.core.fetch.extract import DocumentKind, DocumentText, extract_document
from rypsok.core.model import DetailReason, ToolError
from rypsok.core.parsing import ParseBudget, page_share

if TYPE_CHECKING:
    import pytest

KIB = 1024
MAX_BYTES = 256 * KIB  # LIM-F3 in these tests (the smallest allowed is 64 KiB)


def article(size: int, title: str = "Large") -> bytes:
    """Prose: few elements, so its share is its part of LIM-F3."""
    paragraph = b"<p>" + b"words of an ordinary article, read in full " * 4 + b"</p>\n"
    head = f"<html><head><title>{title}</title></head><body><article>".encode()
    body = head + paragraph * ((size - len(head)) // len(paragraph))
    return body + b"</article></body></html>"


def config(extra: str = "", max_bytes: int = MAX_BYTES) -> Any:
    # LIM-C5 at its default, 2: two permits, so what keeps two pages apart is the budget.
    return fetch_config(
        f"[egress]\nallow_http = true\n[fetch]\nmax_bytes = {max_bytes}\n{extra}"
        "[limits]\nparsing_in_flight = 2\n"
    )


async def parse_two(
    monkeypatch: pytest.MonkeyPatch, first: bytes, second: bytes, cfg: Any
) -> tuple[load.Counts, int, list[Any]]:
    """Fetch `first` from a.org and `second` from b.org at once, every parse held at the gate
    until the bodies are read; returns the counts, the parses running while held, and the
    answers."""
    counts, gate = load.gated_extract(monkeypatch)
    answers: list[Any] = []
    async with (
        serve_site(
            {"/robots.txt": load.OPEN, "/page": load.counted_page(counts, first)},
            address=load.ADDRESSES[0],
        ) as a,
        serve_site(
            {"/robots.txt": load.OPEN, "/page": load.counted_page(counts, second)},
            address=load.ADDRESSES[1],
        ) as b,
    ):
        rypsok, _, _ = fetching_rypsok(cfg, {"a.org": a, "b.org": b})

        async def call(url: str) -> None:
            answers.append(await load.fetch(rypsok, url))

        try:
            async with rypsok, trio.open_nursery() as nursery:
                nursery.start_soon(call, "http://a.org/page")
                nursery.start_soon(call, "http://b.org/page")
                await load.settle(counts)
                held = counts.parsing
                gate.set()
        finally:
            gate.set()
    return counts, held, answers


async def test_req_perf_003_two_large_pages_never_parse_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    page = article(MAX_BYTES * 3 // 4)
    counts, held, answers = await parse_two(monkeypatch, page, page, config())
    assert counts.sent == 2  # both bodies read: the second waited with its body, not unread
    assert held == 1
    assert counts.most_parsing == 1
    # Both are read in turn, neither refused.
    assert all(not isinstance(answer, ToolError) for answer in answers), answers
    assert counts.parsed == 2


async def test_req_perf_003_two_pages_dense_in_elements_never_parse_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under half of LIM-F3 in bytes each, but more than half of LIM-F10's elements each:
    two trees near the node bound are what does not fit the unit."""
    elements = 55_000
    page = b"<html><head><title>Dense</title></head><body>" + b"<p>x" * elements
    page += b"</body></html>"
    max_bytes = 512 * KIB
    assert len(page) < max_bytes // 2
    counts, held, answers = await parse_two(monkeypatch, page, page, config(max_bytes=max_bytes))
    assert counts.sent == 2
    assert held == 1
    assert counts.most_parsing == 1
    assert counts.parsed == 2
    assert all(not isinstance(answer, ToolError) for answer in answers), answers


async def test_req_perf_003_a_small_page_parses_beside_a_large_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    large = article(MAX_BYTES * 3 // 4)
    small = article(16 * KIB, "Small")
    counts, held, answers = await parse_two(monkeypatch, large, small, config())
    assert held == 2
    assert counts.most_parsing == 2
    assert sorted(answer.title for answer in answers) == ["Large", "Small"]


async def test_req_perf_003_two_small_pages_parse_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    small = article(MAX_BYTES // 3, "Small")
    counts, held, answers = await parse_two(monkeypatch, small, small, config())
    assert held == 2
    assert counts.most_parsing == 2
    assert [answer.title for answer in answers] == ["Small", "Small"]


def test_req_perf_003_a_pages_share_is_its_larger_part_of_the_bounds() -> None:
    share, whole = page_share(b"x" * 100, max_bytes=1000, max_nodes=10)
    assert share * 10 == whole  # a tenth of the bytes, no element
    share, whole = page_share(b"<p>" * 5, max_bytes=1000, max_nodes=10)
    assert share * 2 == whole  # 15 bytes, but half the elements
    share, whole = page_share(b"<" * 5000, max_bytes=1000, max_nodes=10)
    assert share == whole  # beyond both bounds: the whole budget, no more


async def test_req_perf_003_a_large_page_is_not_starved_by_small_ones() -> None:
    """First come, first served: a small page that would fit waits behind a large one
    already waiting, however many small ones come."""
    budget = ParseBudget(10)
    order: list[str] = []
    taken: dict[str, int] = {}

    async def parse(name: str, share: int) -> None:
        taken[name] = await budget.take(share)
        order.append(name)

    async with trio.open_nursery() as nursery:
        await budget.take(3)  # a small page parsing
        nursery.start_soon(parse, "large", 10)
        await trio.testing.wait_all_tasks_blocked()
        for index in range(5):
            # One at a time, so that they queue in this order (trio starts a batch of new
            # tasks in any order).
            nursery.start_soon(parse, f"small {index}", 3)
            await trio.testing.wait_all_tasks_blocked()
        # 7 free would hold two of the small ones: none goes before the large page.
        assert order == []
        assert budget.waiting == 6
        budget.give_back(3)
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["large"]
        budget.give_back(taken["large"])
        await trio.testing.wait_all_tasks_blocked()
        # Then the small ones, first come first served, as many as fit at once (three of
        # 3 in 10; trio may wake the ones served at one turn in any order).
        assert set(order[1:]) == {"small 0", "small 1", "small 2"}
        for name in ("small 0", "small 1", "small 2"):
            budget.give_back(taken[name])
        await trio.testing.wait_all_tasks_blocked()
        assert set(order[4:]) == {"small 3", "small 4"}
        budget.give_back(taken["small 3"])
        budget.give_back(taken["small 4"])
    assert budget.free == 10


async def test_req_perf_003_a_share_larger_than_the_budget_waits_for_all_of_it() -> None:
    budget = ParseBudget(10)
    first = await budget.take(4)
    done = trio.Event()

    async def huge() -> None:
        assert await budget.take(25) == 10  # not refused: the whole budget
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(huge)
        await trio.testing.wait_all_tasks_blocked()
        assert not done.is_set()
        budget.give_back(first)
        await done.wait()
        assert budget.free == 0
        budget.give_back(10)


async def test_req_sec_012_a_page_that_leaves_the_queue_lets_the_next_ones_in() -> None:
    """A waiter cancelled at the head of the queue (its deadline) is removed, and those
    behind it that fit are served."""
    budget = ParseBudget(10)
    held = await budget.take(5)
    got: list[int] = []

    async def take(share: int) -> None:
        got.append(await budget.take(share))

    waiting = trio.CancelScope()

    async def cancelled_take() -> None:
        with waiting:
            await budget.take(10)
            raise AssertionError("served past its deadline")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancelled_take)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(take, 5)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []  # 5 free, but behind the page of 10
        waiting.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert got == [5]
    budget.give_back(held)
    budget.give_back(5)
    assert budget.free == 10
    assert budget.waiting == 0


async def test_req_page_008_a_call_waiting_for_the_parse_budget_answers_deadline_at_lim_f4(
    monkeypatch: pytest.MonkeyPatch, mock_clock: trio.testing.MockClock
) -> None:
    """On MockClock, with two permits (the default): the second large page waits for the
    budget, not for a permit, and answers at the fetch deadline as a permit's wait does."""
    mock_clock.autojump_threshold = 0.2
    counts, gate = load.gated_extract(monkeypatch)
    deadline_s, lim_f5_s = 10.0, 11.0  # the defaults: LIM-F4 and LIM-F5
    reserve_s = 0.5  # of LIM-F5's margin, left for ending the call and its answer
    page = article(MAX_BYTES * 3 // 4)
    routes = {"/robots.txt": load.OPEN, "/page": load.counted_page(counts, page)}
    timed: list[tuple[Any, float]] = []
    try:
        async with (
            serve_site(routes, address=load.ADDRESSES[0]) as a,
            serve_site(routes, address=load.ADDRESSES[1]) as b,
        ):
            rypsok, _, _ = fetching_rypsok(config(), {"a.org": a, "b.org": b})

            async def call(url: str, after: float) -> None:
                await trio.sleep(after)
                start = trio.current_time()
                answer = await load.fetch(rypsok, url)
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
    assert parse_took == lim_f5_s - reserve_s
    assert wait_took == deadline_s
    assert counts.most_parsing == 1


async def test_req_page_008_an_abandoned_parse_stops_before_the_main_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The call ends while its page is being parsed: once the tree is built the thread
    stops, and neither the main block nor the writer runs for no one."""
    parsed = threading.Event()
    resume = threading.Event()
    ended = threading.Event()
    stages: list[str] = []
    real_parse = extract_mod.parse_html
    real_main = extract_mod.select_main_block

    def parse_html(*args: Any, **kwargs: Any) -> Any:
        result = real_parse(*args, **kwargs)
        stages.append("parse")
        parsed.set()
        # Held here until the call has been abandoned (a parse that outlives its call).
        resume.wait(10)
        return result

    def select_main_block(*args: Any, **kwargs: Any) -> Any:
        stages.append("main block")
        return real_main(*args, **kwargs)

    monkeypatch.setattr(extract_mod, "parse_html", parse_html)
    monkeypatch.setattr(extract_mod, "select_main_block", select_main_block)
    html = "<html><body><article>" + "<p>words of a page</p>" * 100 + "</article></body></html>"
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(
                extract_document(
                    DocumentText(html),
                    DocumentKind.HTML,
                    "https://a.org/",
                    max_nodes=100_000,
                    max_depth=256,
                )
            )
        except BaseException as exc:
            outcome.append(type(exc))
            raise
        finally:
            ended.set()

    limiter = trio.CapacityLimiter(1)
    with trio.CancelScope() as call:
        async with trio.open_nursery() as nursery:

            async def abandon_once_parsed() -> None:
                await trio.to_thread.run_sync(parsed.wait, 10)
                call.cancel()

            nursery.start_soon(abandon_once_parsed)
            await trio.to_thread.run_sync(run, limiter=limiter, abandon_on_cancel=True)
    assert call.cancelled_caught
    resume.set()
    assert await trio.to_thread.run_sync(ended.wait, 10)
    await trio.sleep(0.05)  # the release is delivered to the loop once the thread has ended
    assert stages == ["parse"]
    assert outcome == [trio.Cancelled]
    assert limiter.borrowed_tokens == 0


def test_req_perf_003_the_parse_takes_the_decoded_text_from_its_holder() -> None:
    """The text handed over is kept by no one once parsed: the holder is
    empty, and the page is read as from the text itself."""
    html = "<html><head><title>T</title></head><body><p>" + "word " * 50 + "</p></body></html>"
    holder = DocumentText(html)
    held = extract_document(
        holder, DocumentKind.HTML, "https://a.org/", max_nodes=100_000, max_depth=256
    )
    plain = extract_document(
        html, DocumentKind.HTML, "https://a.org/", max_nodes=100_000, max_depth=256
    )
    assert holder.take() == ""
    assert held == plain
    assert held.content.startswith("word word")


_TOKENS = (
    "<p>",
    "</p>",
    "x",
    "</html>",
    "</body>",
    "<table>",
    "<tr>",
    "<td>",
    "</td>",
    "<li>",
    "<dd>",
    "<dt>",
    "</head>",
    "<head>",
    "<title>",
    "<select>",
    "<option>",
    "</br>",
    "<br>",
    "<frameset>",
    "<form>",
    "</form>",
    "<a href=x>",
    "</a>",
    "<b>",
    "</b>",
    "<i>",
    "<script>",
    "</script>",
    "<!--",
    "-->",
    "<![CDATA[",
    "]]>",
    "<svg>",
    "<math>",
    "&lt;",
    "<ruby>",
    "<rt>",
    "<colgroup>",
    "<col>",
    "<caption>",
    "<noscript>",
    "<template>",
    "<image>",
    "<isindex>",
)


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(st.lists(st.sampled_from(_TOKENS), max_size=80))
def test_req_perf_003_a_page_makes_at_most_one_element_a_less_than_sign(tokens: list[str]) -> None:
    """The share counts a page's elements as its `<` bytes: the parse makes no more than
    one element a `<`, beside the document's own html, head and body (what the parse
    budget's bound rests on)."""
    document = "".join(tokens)
    parsed = parse.parse_html(document, max_nodes=10**6, max_depth=256)
    assert parsed.nodes <= document.count("<") + 3


# -- the engines' answers in the same budget -------------------------------------------------


def _engine_client(budget: ParseBudget) -> Any:
    from rypsok.core.engines.client import EngineClient

    http = EngineClient()
    http.parse_limiter = trio.CapacityLimiter(2)
    http.parse_budget = budget
    return http


def test_req_perf_003_an_answers_share_is_its_part_of_what_the_budget_stands_for() -> None:
    budget = ParseBudget(1000, 100 * 1024 * KIB)  # the whole stands for a 100 MiB parse
    assert budget.share_of_cost(10 * 1024 * KIB) == 100
    assert budget.share_of_cost(1) == 1  # rounded up: a decode never takes nothing
    assert budget.share_of_cost(0) == 0
    assert budget.share_of_cost(500 * 1024 * KIB) == 1000  # at most the whole


async def test_req_perf_003_an_engines_large_answer_waits_for_its_share_of_the_parse_budget() -> (
    None
):
    from rypsok.config.memory import ANSWER_TIMES_BYTES, parse_bytes

    budget = ParseBudget(100, parse_bytes(5 * 1024 * KIB))
    http = _engine_client(budget)
    page = await budget.take(100)  # a page at the bounds parses
    answer = b"[" + b"{}," * (400 * KIB) + b"{}]"  # 1.2 MB of JSON
    assert ANSWER_TIMES_BYTES * len(answer) > 4 * 1024 * KIB  # past what rides on a permit
    decoded: list[int] = []

    def decode(body: bytes) -> int:
        decoded.append(len(body))
        return len(body)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(http.off_loop, decode, answer)
        await trio.testing.wait_all_tasks_blocked()
        assert decoded == []  # it waits while the page holds the whole budget
        assert budget.waiting == 1
        budget.give_back(page)
    assert decoded == [len(answer)]
    assert budget.free == 100  # its share given back with its thread


async def test_req_perf_003_an_engines_common_answer_never_queues_behind_a_page() -> None:
    from rypsok.config.memory import parse_bytes

    budget = ParseBudget(100, parse_bytes(5 * 1024 * KIB))
    http = _engine_client(budget)
    page = await budget.take(100)
    async with trio.open_nursery() as nursery:
        # A large page waits behind the first: the queue is not empty.
        nursery.start_soon(budget.take, 100)
        await trio.testing.wait_all_tasks_blocked()
        answer = b'{"query": {"search": [' + b'{"title": "t", "snippet": "s"},' * 2500 + b"{}]}}"
        assert 64 * KIB < len(answer) < 150 * KIB  # decoded in a thread, riding on a permit
        with trio.fail_after(5):
            assert await http.off_loop(len, answer) == len(answer)
        nursery.cancel_scope.cancel()
    budget.give_back(page)


async def test_req_perf_003_an_answer_cancelled_while_waiting_gives_its_place_back() -> None:
    from rypsok.config.memory import parse_bytes

    budget = ParseBudget(100, parse_bytes(5 * 1024 * KIB))
    http = _engine_client(budget)
    page = await budget.take(100)
    answer = b"[" + b"{}," * (400 * KIB) + b"{}]"
    with trio.move_on_after(0.05):
        await http.off_loop(len, answer)
    assert budget.waiting == 0
    assert http.parse_limiter.statistics().borrowed_tokens == 0
    budget.give_back(page)
    assert budget.free == 100
