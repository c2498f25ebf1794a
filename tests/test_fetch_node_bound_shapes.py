"""Pages at the node bound, in the shapes that cost the extraction most.

LIM-F10, LIM-F11, REQ-FETCH-002, REQ-PAGE-006. `tools/bench-extract --shapes` times these
shapes (its figures are in book/maintainers/measurements.md); the tests here check what the
extraction makes of each, since no test asserts a time: the page is read up to the bound and
no further, its content comes back (the article's text, every block up to the bound, each
kept tail), and what the main block removes stays out. The tree the parse builds (written as
XML and built by libxml2) is checked through the same answers, and directly for
the characters XML reads otherwise than written.
"""

from __future__ import annotations

from rypsok.core.fetch.extract import (
    DocumentKind,
    Extraction,
    ExtractionOutcome,
    extract_document,
)
from rypsok.core.fetch.parse import parse_html

MAX_NODES = 100_000  # LIM-F10
MAX_DEPTH = 256  # LIM-F11
BASE = "https://example.org/"
SENTENCE = "The harbour authority opened the northern quay on Monday, after three years of work."


def extract(body: str) -> Extraction:
    return extract_document(
        f"<html><body>{body}</body></html>",
        DocumentKind.HTML,
        BASE,
        max_nodes=MAX_NODES,
        max_depth=MAX_DEPTH,
    )


def blocks(result: Extraction) -> list[str]:
    return result.content.split("\n\n")


def test_lim_f10_removed_chrome_siblings_with_tails_keep_the_article_and_the_tails() -> None:
    result = extract(
        f"<p>{SENTENCE}</p>" * 4
        + "".join(f'<div class="share">s</div> tail text {i}\n' for i in range(100_000))
    )
    assert result.outcome == ExtractionOutcome.OK
    assert result.partial
    assert result.nodes == MAX_NODES
    assert blocks(result)[:4] == [SENTENCE] * 4
    # html, body and four paragraphs: the bound leaves 99,994 divisions, each removed as
    # chrome (its "s" gone) and its tail kept in place.
    tails = blocks(result)[4]
    assert tails.startswith("tail text 0 tail text 1 ")
    assert tails.endswith("tail text 99993")
    assert "tail text 99994" not in tails
    assert " s " not in f" {tails} "


def test_lim_f10_link_blocks_cleaned_out_keep_the_paragraphs_and_the_tails() -> None:
    result = extract(
        "<div>"
        + f"<p>{SENTENCE}</p>" * 40
        + "".join(f'<div><a href="/{i}">x</a></div> tail {i}\n' for i in range(50_000))
        + "</div>"
    )
    assert result.outcome == ExtractionOutcome.OK
    assert result.partial
    assert result.nodes == MAX_NODES
    assert blocks(result)[:40] == [SENTENCE] * 40
    assert "[x]" not in result.content  # every block of a lone link is cleaned out
    assert "tail 0 " in result.content
    assert "tail 49977" in result.content
    assert "tail 49978" not in result.content


def test_lim_f10_hundred_thousand_paragraphs_are_each_a_block() -> None:
    result = extract("".join(f"<p>{SENTENCE} {i}</p>" for i in range(100_000)))
    assert result.outcome == ExtractionOutcome.OK
    assert result.partial
    assert result.nodes == MAX_NODES
    # html and body are two of the nodes: 99,998 paragraphs are read, in order.
    assert blocks(result) == [f"{SENTENCE} {i}" for i in range(99_998)]


def test_lim_f10_hundred_thousand_sibling_divisions_are_each_a_block() -> None:
    result = extract("".join(f"<div>{SENTENCE} {i}</div>" for i in range(100_000)))
    assert result.outcome == ExtractionOutcome.OK
    assert result.partial
    assert result.nodes == MAX_NODES
    assert blocks(result) == [f"{SENTENCE} {i}" for i in range(99_998)]


def test_lim_f10_divisions_each_holding_a_paragraph_are_each_a_block() -> None:
    result = extract("".join(f"<div><p>{SENTENCE} {i}</p></div>" for i in range(50_000)))
    assert result.outcome == ExtractionOutcome.OK
    assert result.partial
    assert result.nodes == MAX_NODES
    # Two nodes a block: the last division read is cut before its paragraph.
    assert blocks(result) == [f"{SENTENCE} {i}" for i in range(49_999)]


def test_lim_f10_table_of_33000_rows_is_one_pipe_table() -> None:
    result = extract(
        "<table>"
        + "".join(f"<tr><td>{i}</td><td>{SENTENCE}</td></tr>" for i in range(33_000))
        + "</table>"
    )
    assert result.outcome == ExtractionOutcome.OK
    # 99,003 nodes (html, body, table, the tbody libxml2 adds, three a row): under the bound.
    assert not result.partial
    assert result.nodes == 99_003
    lines = result.content.split("\n")
    assert lines[1] == "| --- | --- |"
    assert [line for index, line in enumerate(lines) if index != 1] == [
        f"| {i} | {SENTENCE} |" for i in range(33_000)
    ]


def test_lim_f10_hundred_thousand_links_in_one_paragraph_are_one_block_of_links() -> None:
    result = extract(
        "<p>" + "".join(f'<a href="/{i}">link {i}</a> ' for i in range(100_000)) + "</p>"
    )
    assert result.outcome == ExtractionOutcome.OK
    assert result.partial
    assert result.nodes == MAX_NODES
    # html, body and the paragraph: 99,997 links, each made absolute, in one block.
    assert result.content == " ".join(f"[link {i}](https://example.org/{i})" for i in range(99_997))


def test_lim_f11_chains_a_hundred_deep_at_the_node_bound_keep_their_text() -> None:
    result = extract(
        "".join("<div>" * 100 + f"<p>{SENTENCE}</p>" + "</div>" * 100 for _ in range(990))
    )
    assert result.outcome == ExtractionOutcome.OK
    assert not result.partial
    assert result.nodes == 2 + 990 * 101
    assert result.depth == 103
    assert SENTENCE in result.content
    assert set(blocks(result)) == {SENTENCE}


def test_req_page_006_tree_keeps_what_xml_would_read_otherwise() -> None:
    # The tree is written as XML for libxml2 to build: markup characters, carriage returns
    # (a reference's: the HTML parser makes a raw one a line feed) and the white space of
    # attribute values come back as the HTML parser read them, and characters XML cannot
    # hold (brought by references) are dropped, a form feed made a space.
    parsed = parse_html(
        '<html><body><p id="a\tb\nc&#13;d &amp; &quot;e&quot; &lt;f&gt;">'
        "x &lt;y&gt; &amp; z ]]&gt; one\r\ntwo&#13;three &#1;four&#12;five</p>"
        '<div class="&#1;k&#12;l">tail</div>after</body></html>',
        max_nodes=MAX_NODES,
        max_depth=MAX_DEPTH,
    )
    assert parsed.root is not None
    paragraph = parsed.root.find("body/p")
    assert paragraph is not None
    assert paragraph.get("id") == 'a\tb\nc\rd & "e" <f>'
    assert paragraph.text == "x <y> & z ]]> one\ntwo\rthree four five"
    division = parsed.root.find("body/div")
    assert division is not None
    assert division.get("class") == "k l"
    assert division.text == "tail"
    assert division.tail == "after"


def test_lim_f11_a_bound_deeper_than_the_tree_parser_builds_stops_at_its_depth() -> None:
    # libxml2's XML parser builds at most 2048 levels: a caller's bound beyond it is held
    # there, as a bound reached (the product's LIM-F11 is 256).
    parsed = parse_html("<div>" * 3000 + "deep", max_nodes=MAX_NODES, max_depth=5000)
    assert parsed.root is not None
    assert parsed.bound_hit
    assert parsed.depth == 2048
    levels = 1
    element = parsed.root
    while len(element):
        element = element[0]
        levels += 1
    assert levels == 2048
