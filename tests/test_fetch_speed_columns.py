"""The main block measured by columns, and the writer's and the parse's quick paths (speed
at the node bound).

REQ-FETCH-002, REQ-FETCH-004, REQ-CTX-005, REQ-PAGE-006. The first pass of the main block
measures every element by running totals over rows in document order instead of a walk; the
scoring, the narrowing and the cleaning read those rows; chrome candidates are found by
columns (attributes, and links by their role alone); the parse's target writes the tree's
markup itself; the writer takes a paragraph's links and white-space tails without the general
dispatch. Each must mean what it meant: the measures are checked against their definition
(written here as the walk from the leaves up that the columns replaced) on generated trees,
and each new path through a page whose answer is known. No test here times anything.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from rypsok.core.fetch.elements import BLOCK_ELEMENTS
from rypsok.core.fetch.extract import DocumentKind, Extraction, extract_document
from rypsok.core.fetch.mainblock import select_main_block
from rypsok.core.fetch.mainblock.chrome import remove_chrome
from rypsok.core.fetch.mainblock.clean import CLEANED
from rypsok.core.fetch.mainblock.measure import Stats
from rypsok.core.fetch.markdown import render_markdown
from rypsok.core.fetch.markdown.links import link_target
from rypsok.core.fetch.parse import parse_html

BASE = "https://example.org/"
SENTENCE = "The harbour authority opened the northern quay on Monday, after three years of work."

_NOT_PROSE = {"h1", "h2", "h3", "h4", "h5", "h6", "th", "caption", "figcaption", "body", "html"}
_TEXT_HOLDERS = {"p", "pre", "blockquote", "table"}


def extract(body: str) -> Extraction:
    return extract_document(
        f"<html><body>{body}</body></html>",
        DocumentKind.HTML,
        BASE,
        max_nodes=100_000,
        max_depth=256,
    )


def _definition(root: etree._Element) -> dict[etree._Element, dict[str, Any]]:
    """The measures as `Stats` defines them, element by element from the leaves up (the
    children's sums handed to their parent; comments and their tails are not text)."""
    found: dict[etree._Element, dict[str, Any]] = {}

    def visit(element: etree._Element) -> dict[str, Any]:
        length = links = inline = inline_links = commas = prose = all_commas = 0
        holds = False
        for child in element.iterchildren(etree.Element):
            measured = visit(child)
            length += measured["text"]
            links += measured["links"]
            prose += measured["prose"]
            all_commas += measured["all_commas"]
            holds = holds or measured["holds"] or child.tag in _TEXT_HOLDERS
            if child.tag not in BLOCK_ELEMENTS:
                inline += measured["inline"]
                inline_links += measured["inline_links"]
                commas += measured["commas"]
            tail = child.tail or ""
            length += len(tail.strip())
            inline += len(tail.strip())
            commas += tail.count(",")
            all_commas += tail.count(",")
        own = element.text or ""
        length += len(own.strip())
        inline += len(own.strip())
        commas += own.count(",")
        all_commas += own.count(",")
        tag = element.tag
        if tag == "a":
            links = length
            inline_links = inline
        if (
            inline >= 25
            and tag in BLOCK_ELEMENTS
            and tag not in _NOT_PROSE
            and inline_links < (0.25 if tag == "li" else 0.5) * inline
        ):
            prose += inline
        elif tag == "li" and links >= 0.25 * length:
            prose = 0
        measured = {
            "text": length,
            "links": links,
            "inline": inline,
            "inline_links": inline_links,
            "commas": commas,
            "prose": prose,
            "all_commas": all_commas,
            "holds": holds,
        }
        found[element] = measured
        return measured

    visit(root)
    return found


_TAGS = ["div", "p", "a", "span", "li", "ul", "b", "td", "pre", "figure", "section", "h2", "em"]
_TEXTS = [
    "",
    " ",
    "x",
    "a, b",
    " a sentence long enough to be a run, with commas, in it ",
    "word " * 8,
    "\n ,\t",
]


@st.composite
def _trees(draw: st.DrawFn, depth: int = 0) -> etree._Element:
    element = etree.Element(draw(st.sampled_from(_TAGS)))
    element.text = draw(st.sampled_from(_TEXTS)) or None
    if depth < 5:
        for _ in range(draw(st.integers(0, 4 if depth < 2 else 2))):
            if draw(st.integers(0, 9)) == 0:
                comment = etree.Comment("a, b")
                comment.tail = draw(st.sampled_from(_TEXTS)) or None
                element.append(comment)
            child = draw(_trees(depth + 1))
            child.tail = draw(st.sampled_from(_TEXTS)) or None
            element.append(child)
    return element


@settings(max_examples=300, deadline=None)
@given(_trees())
def test_req_fetch_002_first_pass_measures_are_their_definition(root: etree._Element) -> None:
    # Nested links, comments, items that are a quarter links (whose running text does not
    # count), inline elements holding blocks: the columns' sums are the walk's.
    expected = _definition(root)
    stats = Stats(root)
    assert set(stats.elements) == set(expected)
    for element, measured in expected.items():
        row = stats.index[element]
        assert stats.text[element] == measured["text"]
        assert stats.links[element] == measured["links"]
        assert stats.prose[element] == measured["prose"]
        assert stats.holds_text(element) == measured["holds"]
        tag = element.tag
        if tag in BLOCK_ELEMENTS:
            # The runs are read for blocks (the scoring, the running text).
            assert stats.inline[row] == measured["inline"]
            if measured["inline"] >= 25:
                assert stats.commas[row] == measured["commas"]
        if tag == "p" or tag in CLEANED:
            assert stats.all_commas[row] == measured["all_commas"]
    # The rows are the document order, and each subtree the rows up to its end.
    order = list(root.iter(etree.Element))
    assert stats.elements == order
    for element in order:
        row = stats.index[element]
        assert stats.elements[row : stats.end[row]] == list(element.iter(etree.Element))


# Names that make an element chrome by a guess, a thread, an entry, content, or nothing; roles
# that make it chrome whatever it holds.
_NAMES = ["share", "sidebar", "comments", "post-body", "content", "c", "date-outer", "widget"]
_CHROME_TAGS = ["nav", "header", "aside", "form", "figure", "br", "article", "main"]


@st.composite
def _pages(draw: st.DrawFn, depth: int = 0) -> etree._Element:
    """Trees with chrome in them (by element, role, a guessed name, a thread's name) beside
    and inside content, entries and paragraphs, with tails and comments, and runs of
    ``<br>`` that the removal of what stands between them joins."""
    element = etree.Element(draw(st.sampled_from(_TAGS + _CHROME_TAGS)))
    kind = draw(st.integers(0, 5))
    if kind == 1:
        element.set("class", draw(st.sampled_from(_NAMES)))
    elif kind == 2:
        element.set("role", "navigation")
    elif kind == 3:
        element.set("id", draw(st.sampled_from(_NAMES)))
        element.set("itemprop", "articleBody")
    element.text = draw(st.sampled_from(_TEXTS)) or None
    if depth < 5:
        for _ in range(draw(st.integers(0, 5 if depth < 2 else 2))):
            if draw(st.integers(0, 9)) == 0:
                comment = etree.Comment("a, b")
                comment.tail = draw(st.sampled_from(_TEXTS)) or None
                element.append(comment)
            child = draw(_pages(depth + 1))
            child.tail = draw(st.sampled_from(_TEXTS)) or None
            element.append(child)
    return element


def _columns(stats: Stats) -> dict[str, Any]:
    return {
        "elements": stats.elements,
        "index": stats.index,
        "parent": stats.parent,
        "end": stats.end,
        "tags": stats.tags,
        "attributed": stats.attributed,
        "text": list(stats.text.values),
        "links": list(stats.links.values),
        "prose": list(stats.prose.values),
        "inline": stats.inline,
        "commas": stats.commas,
        "all_commas": stats.all_commas,
        "breaks": stats.breaks,
        "runs": stats.runs,
        "holds": [stats.holds_text(element) for element in stats.elements],
    }


@settings(max_examples=400, deadline=None)
@given(_pages())
def test_req_fetch_002_measures_after_the_chrome_are_a_new_measure_of_what_is_left(
    root: etree._Element,
) -> None:
    # The chrome removal hands on the measures of what it leaves, taken from the columns of
    # the first measure (the kept rows, the texts and tails the removed tails joined read
    # again): they are those a new measure of the tree reads, column by column.
    root.tail = "after, the measured root"  # (outside it: no text of the measure)
    left = remove_chrome(root, Stats(root))
    assert _columns(left) == _columns(Stats(root))


def test_req_fetch_002_cleaning_removes_nested_link_parts_once_keeping_outer_tails() -> None:
    # Two parts of links, one inside another division that goes with it: what each holds
    # goes (its inner tail too), the tails after them stay where they were.
    result = extract(
        "<div>"
        + f"<p>{SENTENCE} {SENTENCE}</p>" * 5
        + '<div><ul><li><a href="/1">The first related story of the day</a></li>'
        '<li><a href="/2">The second related story of the day</a></li></ul> after list</div>'
        ' after div <div><div><a href="/3">A third related story of the week</a></div>'
        " inner</div> outer</div>"
    )
    assert result.content.split("\n\n") == [f"{SENTENCE} {SENTENCE}"] * 5 + ["after div outer"]


def test_req_ctx_005_a_link_is_chrome_by_its_role_alone() -> None:
    result = extract(
        f'<p>{SENTENCE} {SENTENCE}</p><a role="navigation" href="/menu">Menu</a>'
        f'<p>{SENTENCE}</p><p><a class="share" href="/s">Share this story</a> {SENTENCE}</p>'
    )
    assert "Menu" not in result.content
    # A class word does not make a link chrome: the link stays, with its target.
    assert f"[Share this story](https://example.org/s) {SENTENCE}" in result.content


def test_req_ctx_005_figures_of_one_name_are_judged_each_by_what_it_holds() -> None:
    # Judged by name once per name for most elements; a figure is judged by its content.
    result = extract(
        f'<p>{SENTENCE} {SENTENCE} {SENTENCE}</p><figure class="photo"><img src="a.png" '
        f'alt="A quay at dawn"></figure><p>{SENTENCE}</p><figure class="photo"><p>Ferries '
        f"wait at the quay while the cranes unload the morning cargo.</p></figure>"
        f"<p>{SENTENCE}</p>"
    )
    assert "A quay at dawn" not in result.content
    assert "Ferries wait at the quay while the cranes unload the morning cargo." in (result.content)


def test_req_ctx_005_siblings_of_one_chrome_name_all_go_and_content_names_stay() -> None:
    result = extract(
        f"<div><p>{SENTENCE} {SENTENCE}</p>"
        + '<div class="share">Share on a network</div> kept tail '
        + f'<div class="story">{SENTENCE}</div>' * 3
        + '<div class="share">Share on another</div> last tail</div>'
    )
    assert result.content.split("\n\n") == [
        f"{SENTENCE} {SENTENCE}",
        "kept tail",
        SENTENCE,
        SENTENCE,
        SENTENCE,
        "last tail",
    ]


def test_req_fetch_002_the_block_narrows_past_comments_to_the_child_holding_the_text() -> None:
    result = extract(
        f"<div><div>short</div><!-- c --><div><p>{SENTENCE}</p><p>{SENTENCE}</p>"
        f"<p>{SENTENCE}</p></div></div><div>footer words</div>"
    )
    assert result.content.split("\n\n") == [SENTENCE] * 3


def test_req_fetch_002_of_equal_scores_the_first_scored_is_the_block() -> None:
    result = extract(
        f"<section><p>First {SENTENCE}</p></section><section><p>Other {SENTENCE}</p></section>"
    )
    assert result.content == f"First {SENTENCE}"


def test_req_fetch_002_select_main_block_keeps_elements_outside_the_measure_whole() -> None:
    # A page without a body (a fragment's root is the measure's root): nothing outside it
    # is read by row.
    root = etree.fromstring(f"<div><p>{SENTENCE}</p><p>{SENTENCE}</p></div>")
    main = select_main_block(root)
    assert render_markdown(main.elements, BASE).split("\n\n") == [SENTENCE] * 2


def test_req_fetch_004_links_with_dot_or_double_slash_segments_resolve_as_written() -> None:
    hrefs = ["/a/../b", "//other.example/x", "/a//b", "/a/./b", "https://example.org/c/.d"]
    root = parse_html(
        "<p>" + " ".join(f'<a href="{href}">link</a>' for href in hrefs) + "</p>",
        max_nodes=1000,
        max_depth=64,
    ).root
    assert root is not None
    written = render_markdown([root], BASE)
    assert written == " ".join(f"[link]({link_target(BASE, href)})" for href in hrefs)
    assert written.split(" ")[:2] == [
        "[link](https://example.org/b)",
        "[link](https://other.example/x)",
    ]


def test_req_fetch_004_tails_after_a_block_among_a_paragraphs_links_are_kept() -> None:
    # A block child flushes the pending inline text; the tails after it go into the new one.
    root = parse_html(
        '<span><a href="/1">one</a> <div>block</div> after the block <a href="/2">two</a>'
        " end\t</span>",
        max_nodes=1000,
        max_depth=64,
    ).root
    assert root is not None
    assert render_markdown([root], BASE).split("\n\n") == [
        "[one](https://example.org/1)",
        "block",
        "after the block [two](https://example.org/2) end",
    ]


def test_req_page_006_kept_attribute_values_plain_and_with_markup_characters() -> None:
    # Values written as they are (most) and values with characters XML reads otherwise
    # (quotes, ampersands, angle brackets, line ends, tabs, carriage returns) in one tag.
    values = {
        "class": "plain words",
        "href": '/q?a=1&b="2"<x>',
        "alt": "line\nend\ttab\rreturn",
        "id": "x-1",
    }
    attributes = " ".join(
        f'{key}="{value.replace("&", "&amp;").replace(chr(34), "&quot;")}"'
        for key, value in values.items()
    ).replace("\r", "&#13;")  # (a carriage return as written is a line end to HTML)
    root = parse_html(
        f"<p><img {attributes} data-dropped='y'>text</p>", max_nodes=100, max_depth=16
    ).root
    assert root is not None
    image = next(root.iter("img"))
    assert dict(image.attrib) == values
