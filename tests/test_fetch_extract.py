"""Parsing under bounds and main-content extraction for web_fetch.

REQ-FETCH-002, REQ-FETCH-004, REQ-FETCH-008, REQ-PAGE-002, REQ-PAGE-006, REQ-CTX-005,
LIM-F10, LIM-F11. The pipeline around these functions (egress, streaming, media types,
charsets, the worker thread) is tested with the fetch pipeline.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from rypsok.core.fetch.extract import (
    DocumentKind,
    Extraction,
    ExtractionOutcome,
    extract_document,
)
from rypsok.core.fetch.mainblock import select_main_block
from rypsok.core.fetch.markdown import render_markdown
from rypsok.core.fetch.parse import FEED_SLICE, parse_html
from rypsok.core.fetch.parse.target import SKIPPED_ELEMENTS, TRANSPARENT_VOID

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "testkit" / "fixtures" / "rust-ownership.html"
CALLS = ROOT / "conformance" / "calls"
MAX_NODES = 100_000  # LIM-F10
MAX_DEPTH = 256  # LIM-F11
BASE = "https://example.org/notes/page"

ARTICLE = (
    "<p>The main text of this page is a paragraph long enough to be chosen, with commas, "
    "clauses, and more words than any menu would ever carry in a single block.</p>"
    "<p>A second paragraph follows, so that the article is clearly the richest block of the "
    "page, and the extraction has no reason to prefer anything else.</p>"
)


def extract(
    html: str | bytes,
    *,
    kind: DocumentKind = DocumentKind.HTML,
    max_nodes: int = MAX_NODES,
    max_depth: int = MAX_DEPTH,
    encoding: str | None = None,
) -> Extraction:
    return extract_document(
        html, kind, BASE, max_nodes=max_nodes, max_depth=max_depth, encoding=encoding
    )


def page(body: str, head: str = "<title>A page</title>") -> str:
    return f"<!DOCTYPE html><html><head>{head}</head><body>{body}</body></html>"


def example_content(name: str) -> dict[str, object]:
    """The structured content of one of the book's example calls (conformance/calls/)."""
    data = json.loads((CALLS / name).read_text(encoding="utf-8"))
    result: dict[str, object] = data["response"]["result"]["structuredContent"]
    return result


# --- REQ-PAGE-002 / REQ-FETCH-002: the article, not the chrome -------------------------------


def test_req_page_002_article_first_chrome_absent() -> None:
    html = page(
        '<header><a href="/">Site name</a><nav><a href="/a">Section A</a>'
        '<a href="/b">Section B</a></nav></header>'
        '<div class="sidebar"><h3>Popular</h3><ul><li><a href="/p1">Popular story one</a></li>'
        '<li><a href="/p2">Popular story two</a></li></ul></div>'
        f"<article><h2>Heading of the story</h2>{ARTICLE}</article>"
        "<footer><p>Copyright notice of the site footer.</p></footer>"
    )
    result = extract(html)
    assert result.outcome is ExtractionOutcome.OK
    assert result.content.startswith("## Heading of the story\n\nThe main text of this page")
    for chrome in ("Site name", "Section A", "Popular story", "Copyright notice"):
        assert chrome not in result.content
    assert not result.partial


def test_req_page_002_rust_ownership_fixture_is_the_books_example() -> None:
    full = example_content("web-fetch.json")
    first = example_content("web-fetch-continuation-1.json")
    second = example_content("web-fetch-continuation-2.json")
    result = extract_document(
        FIXTURE.read_text(encoding="utf-8"),
        DocumentKind.HTML,
        "https://example.org/rust-ownership",
        max_nodes=MAX_NODES,
        max_depth=MAX_DEPTH,
    )
    assert result.outcome is ExtractionOutcome.OK
    assert not result.partial
    assert result.title == full["title"] == first["title"] == second["title"]
    assert result.content == full["content"]
    # The continuation examples cut the same content at max_chars 500 (LIM-U1 characters).
    assert first["next_start_char"] == 500
    assert result.content[:500] == first["content"]
    assert result.content[500:1000] == second["content"]


def test_req_page_002_scored_block_without_semantic_markup() -> None:
    links = "".join(f'<li><a href="/s{i}">Section number {i}</a></li>' for i in range(12))
    html = page(
        f'<div id="top"><ul>{links}</ul></div>'
        f'<div id="x1"><div id="x2">{ARTICLE}{ARTICLE}</div></div>'
        '<div id="bottom"><a href="/t">Terms</a> <a href="/c">Cookies</a></div>'
    )
    result = extract(html)
    assert "The main text of this page" in result.content
    assert "Section number" not in result.content
    assert "Terms" not in result.content


LINKS_19 = "[Page number 19](https://example.org/p19)"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "<div>"
            + " ".join(f'<a href="/p{i}">Page number {i}</a>' for i in range(20))
            + "</div>",
            LINKS_19,
        ),
        (
            "<ul>" + "".join(f'<li><a href="/p{i}">Page number {i}</a></li>' for i in range(20)),
            LINKS_19,
        ),
        ("<p>Short.</p>", "Short."),
        ("Text straight in the body", "Text straight in the body"),
    ],
)
def test_req_fetch_002_page_without_paragraphs_is_its_content(body: str, expected: str) -> None:
    result = extract(page(body))
    assert result.outcome is ExtractionOutcome.OK
    assert expected in result.content


def test_req_fetch_002_disclosure_label_kept() -> None:
    method = (
        '<details><summary><section class="method"><a href="/src">Source</a>'
        '<h4>pub fn <a href="#push">push</a>(&amp;mut self)</h4></section></summary>'
        "<div><p>Appends an element to the back of a collection, growing it, "
        "when there is no room left, by a factor.</p></div></details>"
    )
    result = extract(page(f"<main>{ARTICLE}{method * 3}</main>"))
    assert "#### pub fn push(&mut self)" in result.content
    assert "Appends an element to the back" in result.content


def test_req_fetch_002_link_dense_text_only_is_still_extracted() -> None:
    # Every block is mostly link text: scored, yet none counts as paragraph text.
    para = '<p><a href="/x">A long link text that fills most of the block</a> and a tail.</p>'
    result = extract(page(f"<div><div>{para * 3}</div></div>"))
    assert result.outcome is ExtractionOutcome.OK
    assert not result.partial
    assert "[A long link text that fills most of the block](https://example.org/x)" in (
        result.content
    )


# --- REQ-CTX-005: what a reader never sees is never returned ----------------------------------

HIDDEN_CONTENT = "SECRETWORD"


VOID_SKIPPED = frozenset({"input", "link", "base", "frame"}) | TRANSPARENT_VOID


@pytest.mark.parametrize("tag", sorted(SKIPPED_ELEMENTS - VOID_SKIPPED - {"head"}))
def test_req_ctx_005_element_removed(tag: str) -> None:
    html = page(f"{ARTICLE}<{tag}>{HIDDEN_CONTENT} inside {tag}</{tag}><p>After it.</p>")
    result = extract(html)
    assert HIDDEN_CONTENT not in result.content
    assert "The main text of this page" in result.content


@pytest.mark.parametrize("tag", sorted(VOID_SKIPPED))
def test_req_ctx_005_void_element_attributes_never_text(tag: str) -> None:
    html = page(
        f'{ARTICLE}<p>Before <{tag} value="{HIDDEN_CONTENT}" src="/{HIDDEN_CONTENT}" '
        f'title="{HIDDEN_CONTENT}" href="/{HIDDEN_CONTENT}">after.</p>'
    )
    content = extract(html).content
    assert HIDDEN_CONTENT not in content
    assert "Before after." in content


def test_req_ctx_005_head_content_removed() -> None:
    html = page(ARTICLE, head=f"<title>T</title><style>{HIDDEN_CONTENT}</style>")
    result = extract(html)
    assert HIDDEN_CONTENT not in result.content
    assert result.title == "T"


def test_req_ctx_005_comment_removed() -> None:
    result = extract(page(f"{ARTICLE}<!-- {HIDDEN_CONTENT} --><p>Visible text here.</p>"))
    assert HIDDEN_CONTENT not in result.content
    assert "Visible text here." in result.content


@pytest.mark.parametrize(
    "attributes",
    [
        "hidden",
        'hidden=""',
        'hidden="until-found"',
        'aria-hidden="true"',
        'aria-hidden=" TRUE "',
        'style="display:none"',
        'style="display: none !important"',
        'style="color: red; DISPLAY : NONE"',
        'style="visibility:hidden"',
        'style="visibility: collapse"',
    ],
)
def test_req_ctx_005_hidden_element_removed(attributes: str) -> None:
    html = page(f"{ARTICLE}<div {attributes}><p>{HIDDEN_CONTENT} hidden text</p></div>")
    result = extract(html)
    assert HIDDEN_CONTENT not in result.content
    assert "The main text of this page" in result.content


@pytest.mark.parametrize(
    "attributes",
    ['aria-hidden="false"', 'style="display:block"', 'style="visibility:visible"', 'class="x"'],
)
def test_req_ctx_005_visible_element_kept(attributes: str) -> None:
    html = page(
        f"{ARTICLE}<div {attributes}><p>Kept text that a reader sees on the page, "
        "with a comma.</p></div>"
    )
    assert "Kept text that a reader sees" in extract(html).content


def test_req_ctx_005_closed_dialog_removed_open_dialog_kept() -> None:
    closed = extract(page(f"{ARTICLE}<dialog><p>{HIDDEN_CONTENT} closed</p></dialog>"))
    assert HIDDEN_CONTENT not in closed.content


@pytest.mark.parametrize("tag", ["nav", "header", "footer", "aside", "form", "menu"])
def test_req_ctx_005_chrome_element_removed(tag: str) -> None:
    html = page(
        f"<{tag}><p>{HIDDEN_CONTENT} chrome text, a short line.</p></{tag}>"
        f"<article>{ARTICLE}</article>"
    )
    result = extract(html)
    assert HIDDEN_CONTENT not in result.content
    assert "The main text of this page" in result.content


@pytest.mark.parametrize(
    "role",
    [
        "navigation",
        "banner",
        "contentinfo",
        "complementary",
        "search",
        "menu",
        "menubar",
        "toolbar",
        "dialog",
        "alertdialog",
        "tablist",
        "tab",
        "form",
    ],
)
def test_req_ctx_005_chrome_role_removed(role: str) -> None:
    html = page(
        f'<div role="{role}"><p>{HIDDEN_CONTENT} chrome text.</p></div><article>{ARTICLE}</article>'
    )
    assert HIDDEN_CONTENT not in extract(html).content


def test_req_ctx_005_form_holding_the_page_kept() -> None:
    # Some sites wrap the whole page in a form; the article inside stays.
    html = page(f'<form action="/post"><div class="text">{ARTICLE}</div><button>Go</button></form>')
    result = extract(html)
    assert "The main text of this page" in result.content
    assert "Go" not in result.content.split()


# --- REQ-FETCH-004: Markdown from the structure ------------------------------------------------


def test_req_fetch_004_links_absolute_other_schemes_dropped() -> None:
    html = page(
        "<article><p>Read "
        '<a href="../other">the relative one</a>, '
        '<a href="https://example.com/abs">the absolute one</a>, '
        '<a href="//cdn.example.net/x">the scheme-relative one</a>, '
        '<a href="javascript:alert(1)">the script one</a>, '
        '<a href="mailto:someone@example.org">the mail one</a>, '
        '<a href="data:text/html,hi">the data one</a>, '
        '<a href="ftp://example.org/f">the ftp one</a> and '
        '<a href="#frag">the fragment one</a>, all in one paragraph of an article.</p>'
        f"{ARTICLE}</article>"
    )
    content = extract(html).content
    assert "[the relative one](https://example.org/other)" in content
    assert "[the absolute one](https://example.com/abs)" in content
    assert "[the scheme-relative one](https://cdn.example.net/x)" in content
    # A link within the page is only its text.
    assert " the fragment one, " in content
    for text in ("the script one", "the mail one", "the data one", "the ftp one"):
        assert f" {text}," in content or f" {text} " in content
        assert f"[{text}]" not in content
    for scheme in ("javascript:", "mailto:", "data:", "ftp:"):
        assert scheme not in content


@pytest.mark.parametrize(
    "href",
    [
        "JaVaScRiPt:alert(1)",
        " javascript:alert(1)",
        "java\tscript:alert(1)",
        "java\nscript:alert(1)",
        "vbscript:msgbox(1)",
        "file:///etc/passwd",
        "about:blank",
        "blob:https://example.org/uuid",
        "tel:+100",
        "http://",
        "https://[::1",
        "",
    ],
)
def test_req_fetch_004_link_without_http_target_is_text(href: str) -> None:
    html = page(f'<article>{ARTICLE}<p>A link <a href="{href}">called here</a> ends.</p></article>')
    content = extract(html).content
    assert "A link called here ends." in content
    assert "](" not in content


@pytest.mark.parametrize(
    ("href", "url"),
    [
        ("HTTPS://EXAMPLE.COM/Path", "https://EXAMPLE.COM/Path"),
        ("http://example.com/a b", "http://example.com/a%20b"),
        ("/wiki/Rust_(language)", "https://example.org/wiki/Rust_%28language%29"),
        ("?q=1", "https://example.org/notes/page?q=1"),
    ],
)
def test_req_fetch_004_link_made_absolute(href: str, url: str) -> None:
    html = page(f'<article>{ARTICLE}<p>A link <a href="{href}">called here</a> ends.</p></article>')
    assert f"[called here]({url})" in extract(html).content


def test_req_fetch_004_links_resolve_against_the_documents_base() -> None:
    head = '<title>T</title><base href="https://cdn.example.net/docs/">'
    html = page(f'<article>{ARTICLE}<p>See <a href="guide">the guide</a>.</p></article>', head)
    assert "[the guide](https://cdn.example.net/docs/guide)" in extract(html).content
    odd = page(
        f'<article>{ARTICLE}<p>See <a href="guide">the guide</a>.</p></article>',
        '<base href="javascript:alert(1)//">',
    )
    assert "[the guide](https://example.org/notes/guide)" in extract(odd).content


def test_req_fetch_004_images_become_alt_text() -> None:
    html = page(
        '<article><p>A picture: <img src="/cat.png" alt="a sleeping cat"> and an unnamed '
        f'one <img src="/x.png"> here.</p>{ARTICLE}</article>'
    )
    content = extract(html).content
    assert "a sleeping cat" in content
    assert "cat.png" not in content
    assert "x.png" not in content


def test_req_fetch_004_image_alt_written_once_and_file_names_skipped() -> None:
    html = page(
        "<article>"
        '<p>First <img src="/a.png" alt="a red bicycle"> and again '
        '<img src="/b.png" alt="a red  bicycle"> here.</p>'
        '<p>A camera default: <img src="/up/2014/IMG_2953-1.jpg" alt="IMG_2953"> there.</p>'
        f"{ARTICLE}</article>"
    )
    content = extract(html).content
    assert content.count("a red bicycle") == 1
    assert "IMG_2953" not in content
    assert "A camera default: there." in content


def test_req_fetch_004_heading_inside_link_is_its_text() -> None:
    html = page(
        f'<article>{ARTICLE}<p>See <a href="/next"><h3>The next story</h3></a> too, '
        "for more about the subject of this page.</p></article>"
    )
    content = extract(html).content
    assert "[The next story](https://example.org/next)" in content
    assert "[###" not in content


def test_req_page_002_link_only_paragraph_removed() -> None:
    html = page(
        f"<article>{ARTICLE}"
        '<p><a href="/promo">READ MORE ABOUT SOMETHING ELSE ENTIRELY HERE</a></p>'
        '<p>Related: <a href="/other">Another story about another subject entirely</a></p>'
        '<p>A sentence citing <a href="/src">its source</a> stays where it is.</p>'
        "<p>The story goes on after the promotion, with more words, and ends.</p></article>"
    )
    content = extract(html).content
    assert "READ MORE" not in content
    assert "Another story" not in content
    assert "A sentence citing [its source](https://example.org/src) stays" in content
    assert "The story goes on after the promotion" in content


def test_req_fetch_004_structure_written_as_markdown() -> None:
    html = page(
        "<article><h2>Section</h2><h3>Sub</h3>"
        f"{ARTICLE}"
        "<ol><li>first</li><li>second</li></ol>"
        "<ul><li>outer<ul><li>inner</li></ul></li></ul>"
        "<pre>fn main() {\n    println!();\n}\n\n\n\nfn other() {}</pre>"
        "<p>one<br><br><br><br>two</p>"
        '<pre class="language-rust"><code>let x = 1;<br>let y = 2;</code></pre>'
        '<pre><code class="hljs lang-python">print(1)</code></pre>'
        "<p>Call <code>drop(x)</code> to end it early.</p>"
        "<blockquote><p>Quoted words.</p></blockquote>"
        "<table><tr><th>Name</th><th>Value</th></tr><tr><td>a</td><td>1</td></tr></table>"
        "</article>"
    )
    content = extract(html).content
    assert "## Section\n\n### Sub" in content
    assert "1. first\n2. second" in content
    assert "- outer\n  - inner" in content
    assert "```\nfn main() {\n    println!();\n}\n\n\n\nfn other() {}\n```" in content
    assert "one\n\ntwo" in content
    assert "```rust\nlet x = 1;\nlet y = 2;\n```" in content
    assert "```python\nprint(1)\n```" in content
    assert "Call `drop(x)` to end it early." in content
    assert "> Quoted words." in content
    assert "| Name | Value |\n| --- | --- |\n| a | 1 |" in content


# --- REQ-FETCH-008: plain text and Markdown pass through ---------------------------------------


def test_req_fetch_008_plain_text_passthrough_normalised() -> None:
    text = "line one  \r\nline two\r\n\r\n\r\n\r\nafter <b>not markup</b>\x00\n"
    result = extract(text, kind=DocumentKind.PLAIN)
    assert result.outcome is ExtractionOutcome.OK
    assert result.content == "line one\nline two\n\nafter <b>not markup</b>"
    assert result.title is None
    assert not result.partial


def test_req_fetch_008_markdown_passthrough_title_from_heading() -> None:
    text = "# The title\n\nSome *markdown* [link](https://example.org).\n"
    result = extract(text, kind=DocumentKind.MARKDOWN)
    assert result.content == "# The title\n\nSome *markdown* [link](https://example.org)."
    assert result.title == "The title"


@pytest.mark.parametrize("kind", [DocumentKind.PLAIN, DocumentKind.MARKDOWN])
def test_req_page_006_empty_text_nothing_extractable(kind: DocumentKind) -> None:
    result = extract(" \r\n\t\n", kind=kind)
    assert result.outcome is ExtractionOutcome.NOTHING
    assert result.content == ""


def test_req_fetch_008_bytes_with_encoding() -> None:
    html = page("<article><p>Grüße aus Köln, schön.</p></article>").encode("iso-8859-1")
    result = extract(html, encoding="iso-8859-1")
    assert "Grüße aus Köln, schön." in result.content


def test_req_fetch_008_xhtml_read() -> None:
    xhtml = (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>X</title></head>'
        f"<body><article>{ARTICLE}</article></body></html>"
    )
    result = extract(xhtml, kind=DocumentKind.XHTML)
    assert result.title == "X"
    assert "The main text of this page" in result.content


# --- LIM-F10 / LIM-F11: bounds enforced while parsing (REQ-PAGE-006) ---------------------------


def test_lim_f11_million_levels_stop_at_the_bound() -> None:
    depth = 1_000_000
    html = "<html><body>" + "<div>" * depth + "deep" + "</div>" * depth + "</body></html>"
    parsed = parse_html(html, max_nodes=MAX_NODES, max_depth=MAX_DEPTH)
    assert parsed.bound_hit
    assert parsed.depth == MAX_DEPTH
    assert parsed.nodes == MAX_DEPTH
    result = extract(html)
    assert result.partial
    assert result.depth == MAX_DEPTH


def test_lim_f11_content_before_the_bound_kept() -> None:
    html = page(f"<article>{ARTICLE}</article>" + "<div>" * 400 + "too deep")
    result = extract(html)
    assert result.partial
    assert "The main text of this page" in result.content
    assert "too deep" not in result.content


def test_lim_f11_at_the_bound_is_whole() -> None:
    # html and body are two levels; 254 divs reach the bound exactly.
    html = "<html><body>" + "<div>" * 254 + "deep" + "</div>" * 254 + "</body></html>"
    parsed = parse_html(html, max_nodes=MAX_NODES, max_depth=MAX_DEPTH)
    assert parsed.depth == MAX_DEPTH
    assert not parsed.bound_hit
    assert not parsed.malformed


def test_lim_f10_two_hundred_thousand_nodes_stop_at_the_bound() -> None:
    html = "<html><body>" + "<p>x</p>" * 200_000 + "</body></html>"
    parsed = parse_html(html, max_nodes=MAX_NODES, max_depth=MAX_DEPTH)
    assert parsed.bound_hit
    assert parsed.nodes == MAX_NODES
    result = extract(html)
    assert result.partial
    assert result.nodes == MAX_NODES
    assert result.outcome is ExtractionOutcome.OK


def test_lim_f10_at_the_bound_is_whole() -> None:
    count = 50
    html = "<html><body>" + "<p>x</p>" * count + "</body></html>"
    parsed = parse_html(html, max_nodes=count + 2, max_depth=MAX_DEPTH)
    assert parsed.nodes == count + 2
    assert not parsed.bound_hit
    stopped = parse_html(html, max_nodes=count + 1, max_depth=MAX_DEPTH)
    assert stopped.bound_hit
    assert stopped.nodes == count + 1


def test_lim_f10_comments_count_as_nodes() -> None:
    html = "<html><body><p>x</p>" + "<!-- c -->" * 1000 + "</body></html>"
    assert parse_html(html, max_nodes=100, max_depth=MAX_DEPTH).bound_hit


def test_lim_f10_stop_reads_at_most_one_slice_past_the_bound() -> None:
    # The stop is taken inside the slice that crosses the bound: nothing after is parsed.
    html = "<html><body>" + "<i>a</i>" * 10 + "<b>" + "z" * (FEED_SLICE * 4) + "</b>"
    parsed = parse_html(html, max_nodes=5, max_depth=MAX_DEPTH)
    assert parsed.bound_hit
    assert parsed.nodes == 5


# --- REQ-PAGE-006: malformed content ----------------------------------------------------------


@pytest.mark.parametrize(
    "html",
    [
        f"<html><body><article>{ARTICLE}<div><p>cut off in the middle",
        f"<html><body><article>{ARTICLE}<table><tr><td>unfinished cell",
        f"<html><body><div><section>{ARTICLE}",
    ],
)
def test_req_page_006_malformed_html_partial(html: str) -> None:
    result = extract(html)
    assert result.partial
    assert result.outcome is ExtractionOutcome.OK
    assert "The main text of this page" in result.content


@pytest.mark.parametrize("tag", ["o:p", "w:sdt", "foo:bar", "x-custom-element", "a.b", "font"])
def test_req_page_006_element_names_lxml_refuses_keep_the_page(tag: str) -> None:
    html = page(
        f"<article><p>Words before <{tag}>inside the odd element</{tag}> and after it, "
        f"in one paragraph.</p>{ARTICLE}</article>"
    )
    result = extract(html)
    assert not result.partial
    assert "Words before inside the odd element and after it, in one paragraph." in result.content
    assert "The main text of this page" in result.content


def test_req_page_006_well_formed_html_not_partial() -> None:
    assert not extract(page(f"<article>{ARTICLE}</article>")).partial


@pytest.mark.parametrize(
    "html",
    [
        "",
        "   ",
        page(""),
        page("<script>only a script</script>"),
        page('<div hidden="">only hidden text</div>'),
        "<html><head><title>Title only</title></head></html>",
    ],
)
def test_req_page_006_nothing_extractable(html: str) -> None:
    result = extract(html)
    assert result.outcome is ExtractionOutcome.NOTHING
    assert result.content == ""


def test_req_page_006_garbage_bytes_never_raise() -> None:
    garbage = bytes(range(256)) * 64
    for encoding in (None, "utf-8", "latin-1", "shift_jis", "utf-16", "no-such-charset"):
        result = extract(garbage, encoding=encoding)
        assert isinstance(result, Extraction)
        assert "\x00" not in result.content


@settings(max_examples=200, deadline=None)
@given(text=st.text(), kind=st.sampled_from(list(DocumentKind)))
def test_req_page_006_any_text_gives_a_result(text: str, kind: DocumentKind) -> None:
    result = extract(text, kind=kind, max_nodes=200, max_depth=16)
    assert isinstance(result, Extraction)
    assert (result.outcome is ExtractionOutcome.NOTHING) == (result.content == "")
    assert "\x00" not in result.content


TAGS = st.sampled_from(
    ["div", "p", "a", "table", "tr", "td", "ul", "li", "pre", "h1", "span", "b", "img", "br"]
)


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(
        st.one_of(
            TAGS.map(lambda t: f"<{t}>"),
            TAGS.map(lambda t: f"</{t}>"),
            st.text(max_size=20),
            st.sampled_from(['<a href="javascript:x">', '<img alt="]">', "<!--", "&amp;", "<"]),
        ),
        max_size=60,
    )
)
def test_req_page_006_any_markup_gives_a_result(parts: list[str]) -> None:
    result = extract("".join(parts), max_nodes=64, max_depth=8)
    assert isinstance(result, Extraction)
    assert result.nodes <= 64
    assert result.depth <= 8


# --- Shapes that cost the most per node: still bounded, still extracted ------------------------


def test_lim_f10_deep_chains_with_text_at_the_node_bound() -> None:
    chain = "".join("<div>" + "y" * 30 for _ in range(200)) + "</div>" * 200
    html = "<html><body>" + chain * 600 + "</body></html>"
    result = extract(html)
    assert result.nodes == MAX_NODES
    assert result.partial
    assert result.outcome is ExtractionOutcome.OK


def test_lim_f11_nested_tables_and_lists_at_the_depth_bound() -> None:
    tables = "<table><tr><td>cell text" * 90 + "</td></tr></table>" * 90
    lists = "<ul><li>item text" * 130 + "</li></ul>" * 130
    for html in (tables, lists):
        result = extract(page(html))
        assert result.depth <= MAX_DEPTH
        assert result.outcome is ExtractionOutcome.OK
        assert "text" in result.content


def test_req_page_006_writer_beyond_the_interpreters_recursion_gives_text() -> None:
    # A caller may set LIM-F11 above what the interpreter's recursion allows; the text
    # still comes back, marked partial, instead of an exception.
    html = page(
        "<article>"
        + "<blockquote>" * 150
        + "deep words"
        + "</blockquote>" * 150
        + ARTICLE
        + "</article>"
    )
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(250)
    try:
        result = extract(html)
    finally:
        sys.setrecursionlimit(limit)
    assert result.outcome is ExtractionOutcome.OK
    assert result.partial
    assert "deep words" in result.content
    assert "The main text of this page" in result.content


# --- Hostile characters: every string the wire can carry ---------------------------------------


@pytest.mark.parametrize(
    "char",
    [
        *(chr(c) for c in range(0x00, 0x09)),
        "\x0b",
        "\x0c",
        *(chr(c) for c in range(0x0E, 0x20)),
        "\ufffe",
        "\uffff",
        # Lone surrogates, each end of both halves.
        *(chr(c) for c in (0xD800, 0xDBFF, 0xDC00, 0xDFFF)),
    ],
)
def test_req_page_006_unparseable_character_never_loses_the_page(char: str) -> None:
    html = page(f'<article><p class="a{char}b">Text {char}kept, ' + ARTICLE[3:] + "</article>")
    result = extract(html)
    assert result.outcome is ExtractionOutcome.OK
    assert "kept, " in result.content
    assert "main text of this page" in result.content
    assert char not in result.content


def test_req_page_006_character_references_to_unparseable_characters() -> None:
    refs = "&#0;&#1;&#8;&#11;&#31;&#xD800;&#xFFFE;&#xFFFF;&#x110000;"
    html = page(
        f'<article><p title="{refs}">Before{refs}after, and &#12;more.</p>{ARTICLE}</article>'
    )
    result = extract(html)
    assert result.outcome is ExtractionOutcome.OK
    assert "after, and more." in result.content
    assert "The main text of this page" in result.content


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(st.characters(exclude_categories=())),
    kind=st.sampled_from(list(DocumentKind)),
)
def test_req_page_006_any_code_point_gives_a_result(text: str, kind: DocumentKind) -> None:
    result = extract(f"<p>{text}</p>" if kind is DocumentKind.HTML else text, kind=kind)
    assert isinstance(result, Extraction)
    assert not any("\ud800" <= c <= "\udfff" for c in result.content)


HIDING_PARTS = st.sampled_from(
    [
        f"<script>{HIDDEN_CONTENT}</script>",
        f"<style>{HIDDEN_CONTENT}</style>",
        f"<noscript>{HIDDEN_CONTENT}</noscript>",
        f"<template><p>{HIDDEN_CONTENT}</p></template>",
        f"<!-- {HIDDEN_CONTENT} -->",
        f'<span hidden="">{HIDDEN_CONTENT}</span>',
        f'<span aria-hidden="true">{HIDDEN_CONTENT}</span>',
        f'<span style="display:none">{HIDDEN_CONTENT}</span>',
        f"<nav><p>{HIDDEN_CONTENT}</p></nav>",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(
        st.one_of(
            HIDING_PARTS,
            TAGS.map(lambda t: f"<{t}>"),
            TAGS.map(lambda t: f"</{t}>"),
            st.sampled_from(["Some words, of text. ", "More words here, and more. ", "&amp;"]),
        ),
        max_size=40,
    )
)
def test_req_ctx_005_hidden_content_never_returned_whatever_surrounds_it(parts: list[str]) -> None:
    result = extract(page("".join(parts)))
    assert HIDDEN_CONTENT not in result.content


FUZZ_TAGS = st.sampled_from(
    [
        "div",
        "p",
        "a",
        "table",
        "tr",
        "td",
        "th",
        "ul",
        "ol",
        "li",
        "pre",
        "code",
        "h1",
        "h2",
        "span",
        "b",
        "img",
        "br",
        "form",
        "nav",
        "header",
        "figure",
        "figcaption",
        "details",
        "summary",
        "dialog",
        "article",
        "main",
        "section",
        "o:p",
        "x-y",
    ]
)
FUZZ_ATTRIBUTES = st.sampled_from(
    [
        'href="/a b"',
        'href="javascript:x"',
        'href="#f"',
        'alt="a picture"',
        'src="/pic.png"',
        'class="nav menu"',
        'class="article-body"',
        'role="navigation"',
        "hidden",
        "open",
        'start="99999999999999999999"',
        'class="language-rust"',
        'title="&#1;"',
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(
        st.one_of(
            st.tuples(FUZZ_TAGS, st.lists(FUZZ_ATTRIBUTES, max_size=2)).map(
                lambda t: f"<{t[0]} {' '.join(t[1])}>"
            ),
            FUZZ_TAGS.map(lambda t: f"</{t}>"),
            st.sampled_from(
                ["Words, and more words of text here. ", "short ", "&#0;", "<!-- c -->", "\n"]
            ),
        ),
        max_size=50,
    )
)
def test_req_page_006_main_block_and_writer_never_raise(parts: list[str]) -> None:
    # extract_document turns any exception into "nothing"; the stages themselves must not
    # need that net on any tree the bounded parse can build.
    parsed = parse_html("".join(parts), max_nodes=400, max_depth=24)
    if parsed.root is None:
        return
    main = select_main_block(parsed.root)
    markdown = render_markdown(main.elements, BASE)
    # What comes out is text: no tag of the input, no comment, no control character left.
    assert "<!--" not in markdown
    assert not any(f"<{tag}" in markdown.lower() for tag in ("script", "style", "div", "p "))
    assert not any(ord(c) < 0x20 and c not in "\n\t" for c in markdown)


async def test_req_page_008_worker_threads_extract_independently() -> None:
    # The pipeline runs extraction in worker threads under the parsing limiter (LIM-C5);
    # one parser per call means concurrent calls give exactly what calls one by one give.
    documents = [
        FIXTURE.read_text(encoding="utf-8"),
        page(f"<article>{ARTICLE}</article>"),
        "<html><body>" + "<div>" * 1000 + "deep" + "</div>" * 1000 + "</body></html>",
        "<html><body>" + "<p>x</p>" * 2000 + "</body></html>",
    ] * 4
    expected = [extract(doc, max_nodes=1500) for doc in documents]
    got: list[Extraction | None] = [None] * len(documents)
    limiter = trio.CapacityLimiter(4)

    async def one(index: int) -> None:
        got[index] = await trio.to_thread.run_sync(
            lambda: extract(documents[index], max_nodes=1500), limiter=limiter
        )

    async with trio.open_nursery() as nursery:
        for index in range(len(documents)):
            nursery.start_soon(one, index)
    assert got == expected
    assert any(result.partial for result in expected)


def test_req_fetch_004_lim_f10_a_table_of_sixty_thousand_cells_is_a_table() -> None:
    # 30,000 rows of two cells are 90,000 elements, within the node bound; the writer's
    # bound on cells (MAX_TABLE_CELLS, 100,000) counts each placed cell once, so the table
    # is written as a pipe table, every row under its columns, not as 60,000 loose blocks.
    rows = "".join(f"<tr><td>{i}</td><td>harbour {i}</td></tr>" for i in range(30_000))
    result = extract(page(f"{ARTICLE}<table>{rows}</table>"))
    assert not result.partial
    lines = result.content.split("\n")
    assert "| 0 | harbour 0 |" in lines
    assert "| --- | --- |" in lines
    assert "| 29999 | harbour 29999 |" in lines


@pytest.mark.parametrize(
    ("inline", "expected"),
    [
        (
            '<a href="/story">assaulted the embassy </a>in Tunis',
            "(https://example.org/story) in Tunis",
        ),
        ('the<a href="/story"> embassy</a> in Tunis', "the [embassy](https://example.org/story)"),
        ('<a href="#note">assaulted the embassy </a>in Tunis', "assaulted the embassy in Tunis"),
        ('<a href="/story"><em>assaulted the embassy </em></a>in Tunis', ") in Tunis"),
        ("call <code>render </code>once", "`render` once"),
        ("call<code> render</code> once", "call `render` once"),
    ],
)
def test_req_fetch_004_white_space_at_a_links_ends_still_parts_the_words(
    inline: str, expected: str
) -> None:
    # A browser shows the space inside the link's end as the space between two words; the
    # writer strips the link's text, so the space goes outside the link, never lost.
    result = extract(
        page(f"{ARTICLE}<p>Hundreds of protesters {inline}, a story told at length.</p>")
    )
    assert expected in result.content
