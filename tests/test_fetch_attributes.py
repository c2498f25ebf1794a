"""LIM-F16 and LIM-F17: attributes are bounded while parsing, before they cost memory
(REQ-PAGE-006).

A tag's attributes reach the parser's target all at once, as one dict libxml2 and lxml have
already built: the bound must keep such a tag from the parser. The seam is the target's
`start`, wrapped to record the largest attribute dict it was ever handed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fetch_helpers import fetch_config, fetching_rypsok
from fetch_sites import Page, serve_site
from hypothesis import given, settings
from hypothesis import strategies as st

from rypsok.core.fetch.parse import parse_html
from rypsok.core.fetch.parse.attributes import MAX_ELEMENT_ATTRIBUTES, MAX_KEPT_ATTRIBUTES
from rypsok.core.fetch.parse.target import BoundedTarget
from rypsok.core.model import FetchRequest, NoticeCode, ToolError

if TYPE_CHECKING:
    import pytest

NODES, DEPTH = 100_000, 256
BEFORE = "<p>Text before the heavy element, long enough to be read as the main block.</p>"


def many(count: int, quote: str = "") -> str:
    return " ".join(f"a{i}={quote}v{i}{quote}" for i in range(count))


class Largest:
    """The largest attribute dict the target was handed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.most = 0
        real = BoundedTarget.start

        def start(target: Any, tag: object, attrib: dict[str, str]) -> None:
            self.most = max(self.most, len(attrib))
            real(target, tag, attrib)

        monkeypatch.setattr(BoundedTarget, "start", start)


def test_lim_f16_a_tag_with_400000_attributes_never_reaches_the_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    largest = Largest(monkeypatch)
    html = f"<html><body>{BEFORE}<p {many(400_000)}>after</p></body></html>"
    parsed = parse_html(html, max_nodes=NODES, max_depth=DEPTH)
    assert largest.most == 0  # no element before it carries any
    assert parsed.bound_hit
    assert parsed.root is not None
    text = "".join(parsed.root.itertext())
    assert "Text before the heavy element" in text
    assert "after" not in text


def test_lim_f16_at_the_bound_is_whole_and_one_more_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    largest = Largest(monkeypatch)
    for quote in ("", '"', "'"):
        whole = parse_html(
            f"<html><body><p {many(MAX_ELEMENT_ATTRIBUTES, quote)}>x</p></body></html>",
            max_nodes=NODES,
            max_depth=DEPTH,
        )
        assert not whole.bound_hit
        assert largest.most == MAX_ELEMENT_ATTRIBUTES
        over = parse_html(
            f"<html><body>{BEFORE}<p {many(MAX_ELEMENT_ATTRIBUTES + 1, quote)}>x</p>",
            max_nodes=NODES,
            max_depth=DEPTH,
        )
        assert over.bound_hit
        assert largest.most == MAX_ELEMENT_ATTRIBUTES


def test_lim_f16_quoted_markup_cannot_hide_a_tag_from_the_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    largest = Largest(monkeypatch)
    heavy = many(MAX_ELEMENT_ATTRIBUTES * 4)
    for number, trick in enumerate(
        (
            f'<p title="<script>" {heavy}>x</p></script>',  # a raw text name inside a value
            f'<p title=">" {heavy}>x</p>',  # a > inside a quoted value
            f"<p title='<!--' {heavy}>x</p>-->",  # a comment opener inside a value
            f'<p title=a"b {heavy}>x</p>"',  # a quote inside an unquoted value
            f'</p title="<script>" {heavy}>',  # an end tag's attributes
            "<p/" + "/".join(f"a{i}" for i in range(1024)) + ">x</p>",  # slashes between
        )
    ):
        parsed = parse_html(
            f"<html><body>{BEFORE}{trick}</body></html>", max_nodes=NODES, max_depth=DEPTH
        )
        assert parsed.bound_hit, number
        assert largest.most <= MAX_ELEMENT_ATTRIBUTES, number


def test_lim_f16_text_that_only_looks_like_attributes_is_read() -> None:
    words = " ".join(f"w{i}" for i in range(MAX_ELEMENT_ATTRIBUTES * 4))
    for container in (
        f"<script>if (a <b) {{ {words} }}</script>",
        f"<style>a <b {words}</style>",
        f"<textarea><x {words}</textarea>",
        f"<!-- <x {words} -->",
        f"<p>1 < 2 {words}</p>",
    ):
        html = f"<html><body>{BEFORE}{container}<p>the end</p></body></html>"
        parsed = parse_html(html, max_nodes=NODES, max_depth=DEPTH)
        assert not parsed.bound_hit, container[:20]
        assert parsed.root is not None
        assert "the end" in "".join(parsed.root.itertext()), container[:20]


def test_lim_f17_attributes_kept_in_the_tree_are_bounded_in_total() -> None:
    element = '<a href="/x" id="i">x</a>'  # two kept attributes each
    count = MAX_KEPT_ATTRIBUTES // 2
    at_bound = parse_html(
        "<html><body>" + element * count + "</body></html>", max_nodes=10**7, max_depth=DEPTH
    )
    assert not at_bound.bound_hit
    over = parse_html(
        "<html><body>" + element * (count + 1) + "</body></html>",
        max_nodes=10**7,
        max_depth=DEPTH,
    )
    assert over.bound_hit
    assert over.root is not None
    kept = sum(len(element.attrib) for element in over.root.iter())
    assert kept <= MAX_KEPT_ATTRIBUTES


_FRAGMENTS = st.sampled_from(
    (
        "text ",
        "<p>",
        "</p>",
        '<a href="/x" title=">">',
        "<!-- c -->",
        "<!--",
        "-->",
        "<script>",
        "</script>",
        "<style>",
        "</style>",
        "<textarea>",
        "</textarea>",
        "<title>",
        "</title>",
        '"',
        "'",
        "=",
        "<x ",
        "</x ",
        "<!x ",
        ">",
        "<",
        "/",
        "<plaintext>",
        f"<p {many(MAX_ELEMENT_ATTRIBUTES + 1)}>",
        f"<i {many(MAX_ELEMENT_ATTRIBUTES + 1, quote=chr(34))}>",
        f"<b {many(MAX_ELEMENT_ATTRIBUTES)}>",
    )
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_FRAGMENTS, max_size=12))
def test_lim_f16_whatever_the_markup_no_element_beyond_the_bound_is_built(
    fragments: list[str],
) -> None:
    seen: list[int] = []
    real = BoundedTarget.start

    def start(target: Any, tag: object, attrib: dict[str, str]) -> None:
        seen.append(len(attrib))
        real(target, tag, attrib)

    BoundedTarget.start = start  # type: ignore[method-assign]
    try:
        parse_html("".join(fragments), max_nodes=NODES, max_depth=DEPTH)
    finally:
        BoundedTarget.start = real  # type: ignore[method-assign]
    assert max(seen, default=0) <= MAX_ELEMENT_ATTRIBUTES


OPEN = Page.text("User-agent: *\nAllow: /\n")


async def test_req_page_006_lim_f16_a_page_whose_one_paragraph_carries_400000_attributes() -> None:
    """Through the pipeline: read in part, with the text before the heavy element."""
    body = f"<html><body><article>{BEFORE}<p {many(400_000)}>after</p></article></body></html>"
    page = Page(headers=(("Content-Type", "text/html"),), body=body.encode())
    async with serve_site({"/robots.txt": OPEN, "/heavy": page}) as site:
        cfg = fetch_config("[egress]\nallow_http = true\n[fetch]\nmax_bytes = 10485760\n")
        rypsok, _, _ = fetching_rypsok(cfg, {"heavy.org": site})
        async with rypsok:
            answer = await rypsok.fetch(FetchRequest(url="http://heavy.org/heavy"))
    assert not isinstance(answer, ToolError), answer
    assert "Text before the heavy element" in answer.content
    assert "after" not in answer.content
    assert NoticeCode.EXTRACTION_PARTIAL in {n.code for n in answer.notices}
