"""REQ-PERF-003 / LIM-M5: `check` prints the worst-case memory of the settings and warns above
the documented unit's MemoryMax, naming the build the figure is for."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

from fetch_helpers import Authority, fetch_config, fetching_rypsok
from fetch_sites import Page, serve_site

from rypsok.config import memory
from rypsok.config.check import run_check
from rypsok.config.load import load_config_text
from rypsok.core.fetch import pipeline
from rypsok.core.fetch.parse import parse_html
from rypsok.core.model import FetchRequest
from rypsok.core.parsing import MAX_DEPTH, MAX_NODES

if TYPE_CHECKING:
    import pytest

MIB = 1024 * 1024


def config(text: str) -> Any:
    return load_config_text("config_version = 1\n" + text, {})


def expected(
    max_bytes: int,
    *,
    fetches: int = 4,
    parses: int = 2,
    sessions: int = 256,
    connections: int = 64,
    scraped: bool = False,
) -> int:
    # The costlier of a page of text and a page dense in elements, once: the pages
    # and the engines' large answers parsing at once share the parse budget;
    # each other permit holds what rides on it: the fixed part of a parse, or DuckDuckGo's
    # page (parsed outside the budget) when that engine is enabled.
    text = memory.PARSE_TENTHS_PER_BYTE * max_bytes // 10
    dense = memory.NODE_BOUND_BYTES + memory.DOCUMENT_TENTHS_PER_BYTE * max_bytes // 10
    per_parse = max(text, dense) + memory.PARSE_FIXED_BYTES
    # A PDF read shares the same budget (REQ-PDF-106): its worker at the default 96 MiB and
    # the server's part for an answer of 250,000 characters at most.
    pdf = 96 * MIB + memory.PDF_PARENT_TIMES_ANSWER * (
        memory.PDF_ANSWER_BYTES_PER_CHAR * 250000 + memory.PDF_ANSWER_FIXED_BYTES
    )
    per_parse = max(per_parse, pdf)
    page = memory.ANSWER_TIMES_BYTES * 256 * 1024 if scraped else 0
    per_answer = max(page, memory.PARSE_FIXED_BYTES)
    return (
        memory.AT_REST_BYTES
        + fetches * max_bytes
        + per_parse
        + (parses - 1) * per_answer
        + sessions * memory.SESSION_BYTES
        + connections * memory.CONNECTION_BYTES
    )


def test_req_perf_003_the_estimate_follows_the_settings() -> None:
    assert memory.estimate(config("")).total_bytes == expected(5 * MIB)
    tuned = config(
        "[fetch]\nmax_bytes = 1048576\n[limits]\nfetches_in_flight = 8\nparsing_in_flight = 3\n"
        "[service.http]\nlegacy_revisions = false\n"
    )
    assert memory.estimate(tuned).total_bytes == expected(MIB, fetches=8, parses=3, sessions=0)
    cached = config("[cache]\nenabled = true\nmax_entries = 100\nmax_entry_bytes = 4096\n")
    assert memory.estimate(cached).total_bytes == expected(5 * MIB) + 100 * 4096
    # Crossref's answers of 2 MiB take their share of the budget: no more than the default.
    crossref = config('[engines.crossref]\ntype = "crossref"\ncategories = ["science"]\n')
    assert memory.estimate(crossref).total_bytes == expected(5 * MIB)
    scraping = config(
        '[scraping]\nenabled = true\n[engines.d]\ntype = "duckduckgo"\ncategories = ["general"]\n'
    )
    assert memory.estimate(scraping).total_bytes == expected(5 * MIB, scraped=True)
    assert memory.estimate(scraping).total_bytes > expected(5 * MIB)
    disabled = config(
        '[scraping]\nenabled = true\n[engines.d]\ntype = "duckduckgo"\ncategories = ["general"]\n'
        "enabled = false\n"
    )
    assert memory.estimate(disabled).total_bytes == expected(5 * MIB)


def test_req_perf_003_the_estimates_answer_bounds_are_the_drivers_own() -> None:
    """The configuration layer cannot read the engines' admission records: its table of the
    largest answer each driver reads must be theirs."""
    import importlib

    from rypsok.shared.drivers import DRIVER_TYPES

    assert set(memory.ANSWER_MAX_BYTES) == set(DRIVER_TYPES)
    for kind, bound in memory.ANSWER_MAX_BYTES.items():
        module = importlib.import_module(f"rypsok.core.engines.{kind}")
        assert getattr(module, f"{kind.upper()}_RECORD").response_max_bytes == bound, kind


def test_req_perf_003_the_estimate_covers_what_tokenless_connections_hold() -> None:
    """Each connection a peer may open without a token counts: at the ceiling
    of max_connections the estimate passes the documented unit's MemoryMax."""
    crowded = config("[service.http]\nmax_connections = 4096\n")
    assert memory.estimate(crowded).total_bytes == expected(5 * MIB, connections=4096)
    assert memory.estimate(crowded).total_bytes > memory.MEMORY_MAX_BYTES


def test_req_perf_003_lim_m5_the_defaults_fit_under_the_parse_budget_and_larger_pages_warn(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On glibc the worst page shape costs about 123 MiB a parse; the parse budget keeps two
    # such parses apart, so the defaults (LIM-C5 = 2) fit the unit; pages of
    # twice the default bound do not.
    monkeypatch.setattr(memory, "measured_build", lambda: ("CPython 3.11 on Linux (glibc)", True))
    small = tmp_path / "small.toml"
    small.write_text("config_version = 1\n")
    big = tmp_path / "big.toml"
    big.write_text("config_version = 1\n[fetch]\nmax_bytes = 10485760\n")
    small_lines = run_check(str(small), {}).lines
    big_lines = run_check(str(big), {}).lines
    figure = memory.estimate(config("")).total_bytes
    assert figure <= memory.MEMORY_MAX_BYTES
    assert (
        memory.estimate(config("[fetch]\nmax_bytes = 10485760\n")).total_bytes
        > memory.MEMORY_MAX_BYTES
    )
    assert f"rypsok: memory: worst case about {figure / MIB:.0f} MiB for CPython" in "\n".join(
        small_lines
    )
    assert not any("warning: memory" in line for line in small_lines)
    (warning,) = [line for line in big_lines if "warning: memory" in line]
    assert "256 MiB" in warning
    assert "CPython 3.11 on Linux (glibc)" in warning


def test_req_perf_003_another_build_gets_the_figure_without_a_warning(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory, "measured_build", lambda: ("PyPy on darwin", False))
    big = tmp_path / "big.toml"
    big.write_text("config_version = 1\n[fetch]\nmax_bytes = 10485760\n")
    lines = run_check(str(big), {}).lines
    (line,) = [line for line in lines if line.startswith("rypsok: memory")]
    assert "not measured for PyPy on darwin" in line
    assert not any("warning: memory" in line for line in lines)


async def test_req_perf_003_a_large_pages_parse_hands_its_freed_memory_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A parse of a body of TRIM_AFTER_BYTES or more ends with one malloc_trim, in its own
    thread once its tree is freed; a small page's parse (most of them) costs none."""
    trims: list[int] = []
    monkeypatch.setattr(pipeline, "_TRIM", lambda: trims.append(1))
    paragraph = "<p>" + "words of a long page " * 40 + "</p>\n"
    large = "<html><body><main>" + paragraph * (pipeline.TRIM_AFTER_BYTES // len(paragraph) + 1)
    small = "<html><body><main>" + paragraph * 4
    authority = Authority()
    routes = {
        "/large": Page.html(large + "</main></body></html>"),
        "/small": Page.html(small + "</main></body></html>"),
        "/robots.txt": Page.text("User-agent: *\nAllow: /\n"),
    }
    async with serve_site(routes, tls=authority.server_context("example.org")) as site:
        rypsok, _, _ = fetching_rypsok(fetch_config(), {"example.org": site}, authority=authority)
        async with rypsok:
            await rypsok.fetch(FetchRequest(url="https://example.org/small"))
            assert trims == []
            await rypsok.fetch(FetchRequest(url="https://example.org/large"))
            assert trims == [1]


def _trees_left_to_the_collector() -> list[str]:
    """The lxml trees that only the cycle collector would free, found by collecting now."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = [
            type(o).__name__
            for o in gc.garbage
            if type(o).__module__ == "lxml.etree" and type(o).__name__ in ("_Element", "_Document")
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return found


def test_req_perf_003_a_parsed_tree_is_freed_with_its_result_not_left_to_the_collector() -> None:
    """lxml's feed parser and its context refer to each other once a Python target is fed;
    the tree must not hang from that cycle, or each call's page stays in memory until a full
    collection, which Python's object counts rarely trigger (under concurrent calls, about one
    page held per completed call)."""
    text = "<html><body><p>" + "words of the page " * 2000 + "</p></body></html>"
    dense = "<html><body>" + "<div>x</div>" * (MAX_NODES + 10) + "</body></html>"
    gc.collect()
    gc.disable()
    try:
        for page in (text, dense):
            parsed = parse_html(page, max_nodes=MAX_NODES, max_depth=MAX_DEPTH)
            assert parsed.root is not None
            del parsed
            assert _trees_left_to_the_collector() == []
    finally:
        gc.enable()


async def test_req_perf_003_a_fetched_pages_tree_is_freed_when_the_call_ends() -> None:
    """The same through web_fetch's real pipeline: the answer is written, and nothing of the
    page's tree waits for the cycle collector."""
    page = "<html><body><main>" + "<p>words of a long page</p>\n" * 500 + "</main></body></html>"
    authority = Authority()
    routes = {
        "/page": Page.html(page),
        "/robots.txt": Page.text("User-agent: *\nAllow: /\n"),
    }
    async with serve_site(routes, tls=authority.server_context("example.org")) as site:
        rypsok, _, _ = fetching_rypsok(fetch_config(), {"example.org": site}, authority=authority)
        async with rypsok:
            gc.collect()
            gc.disable()
            try:
                answer = await rypsok.fetch(FetchRequest(url="https://example.org/page"))
                assert "words of a long page" in answer.content
                del answer
                assert _trees_left_to_the_collector() == []
            finally:
                gc.enable()
