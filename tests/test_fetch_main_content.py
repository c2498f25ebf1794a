"""What web_fetch's extraction keeps of a page: classes of fault it must not make, and a
fidelity set of constructs an agent needs intact.

REQ-PAGE-002 (main-content preference), REQ-PAGE-006 (malformed content), REQ-FETCH-002
(main content extraction), REQ-FETCH-004 (rendering), LIM-F10. Every page here is written
for its test; each runs through `extract_document`, the function web_fetch's worker thread
runs.
"""

from __future__ import annotations

import html as html_lib
import time
from typing import TYPE_CHECKING

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rypsok.core.fetch.extract import DocumentKind, ExtractionOutcome, extract_document
from rypsok.core.fetch.markdown import render_markdown
from rypsok.core.fetch.markdown.links import link_target
from rypsok.core.fetch.parse import parse_html

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_NODES = 100_000  # LIM-F10
MAX_DEPTH = 256  # LIM-F11
BASE = "https://example.org/docs/page"

# Sentences long enough to score as paragraphs, each with words found nowhere else.
STORY = [
    "The harbour authority opened the northern quay on Monday, after three years of work, "
    "and the first ferry docked there before noon with two hundred passengers aboard.",
    "Engineers had rebuilt the sea wall with basalt blocks, which weigh more than granite, "
    "so that winter storms no longer throw shingle across the coastal road.",
    "Fishermen, who had moored at the southern jetty during the works, said the new berths "
    "were deeper, wider, and far easier to reach at low tide than the old ones.",
    "The council expects the quay to pay for itself within a decade, through mooring fees, "
    "a small levy on cruise visitors, and the rent of the restored warehouses.",
]


def extract(html: str) -> str:
    result = extract_document(
        html, DocumentKind.HTML, BASE, max_nodes=MAX_NODES, max_depth=MAX_DEPTH
    )
    assert result.outcome is ExtractionOutcome.OK
    return result.content


def missing(content: str, texts: list[str]) -> list[str]:
    """The texts that did not come through whole."""
    return [text for text in texts if text not in content]


def paragraphs(texts: list[str]) -> str:
    return "".join(f"<p>{text}</p>" for text in texts)


CHROME = (
    '<header><a href="/">Harbour News</a></header>'
    '<nav><a href="/a">Home</a> <a href="/b">Ports</a> <a href="/c">Ferries</a></nav>'
)
FOOTER = "<footer><p>Copyright Harbour News, all rights reserved, since 1999.</p></footer>"


# --- 1. Markup after </html> ------------------------------------------------------------------


@pytest.mark.parametrize(
    "trailer",
    [
        "<script>window.tracker = 1;</script>",
        '<div id="overlay"><p>Trailing element text.</p></div>',
        "<!-- served by cache 7 --><script>x()</script><img src=/pixel.gif>",
    ],
)
def test_req_page_006_markup_after_html_end_keeps_the_article(trailer: str) -> None:
    html = (
        "<!DOCTYPE html><html><head><title>Quay</title></head><body>"
        f"{CHROME}<article><h1>The northern quay opens</h1>{paragraphs(STORY)}</article>"
        f"{FOOTER}</body></html>{trailer}"
    )
    content = extract(html)
    assert missing(content, STORY) == []
    assert "window.tracker" not in content


# --- 2. Chrome words on the container holding the article ------------------------------------

ARCHIVE = (
    '<div id="sidebar-wrapper" class="sidebar"><h2>Blog archive</h2><ul>'
    + "".join(
        f'<li><a href="/2019/{month:02d}/">Posts of month {month} of 2019, archived</a></li>'
        for month in range(1, 49)
    )
    + "</ul><h2>About me</h2><p>A retired lighthouse keeper who writes about the coast, its "
    "boats, its birds, and whatever the tide brings in on a quiet Sunday.</p></div>"
)
SPONSORED = (
    '<div class="partner-box"><p>Partner content: book your coastal holiday today, with '
    "free cancellation, breakfast included, and a discount for newsletter readers.</p></div>"
)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # Blogger wraps every post in a date-outer.
        (
            '<div class="date-outer"><h2 class="date-header"><span>Monday, 3 June</span></h2>'
            '<div class="date-posts"><div class="post-outer">',
            "</div></div></div>",
        ),
        ('<div class="share_wrapper">', "</div>"),
        ('<div class="caption-image"><img src="/quay.jpg" alt="The quay">', "</div>"),
        ('<div class="meta-information">', "</div>"),
        ('<div id="date-time">', "</div>"),
    ],
)
def test_req_page_002_chrome_word_on_the_article_container_keeps_the_article(
    before: str, after: str
) -> None:
    html = (
        f"<html><body>{CHROME}<div id=main-wrapper>{before}<h1>The northern quay opens</h1>"
        f"{paragraphs(STORY)}{after}</div>{SPONSORED}{ARCHIVE}{FOOTER}</body></html>"
    )
    content = extract(html)
    assert missing(content, STORY) == []
    assert "Partner content" not in content


@pytest.mark.parametrize("name", ["meta-information", "caption-text", "share-panel"])
def test_req_page_002_chrome_word_does_not_outweigh_the_articles_text(name: str) -> None:
    # The article's paragraphs sit straight in a container whose name reads as chrome; a
    # short promotion beside it, rich in commas, must not win the page by that name alone.
    blurb = (
        '<div class="partner-box"><p>Partner content: book your coastal holiday today, with '
        "free cancellation, breakfast, parking, late checkout, a welcome drink, and a "
        "discount, for newsletter readers, families, couples, walkers, and anglers.</p></div>"
    )
    html = (
        f'<html><body>{CHROME}<div class="{name}"><h1>The northern quay opens</h1>'
        f"{paragraphs(STORY)}</div>{blurb}{FOOTER}</body></html>"
    )
    content = extract(html)
    assert missing(content, STORY) == []


# Promotions named for what they promote: a content word beside "related" or "share" in one
# name ("related-posts") says what is promoted, not that it is the content.
TEASERS = [
    "Ferry timetables change for the winter, with a night boat on Fridays.",
    "The lighthouse museum reopens, with a lift to the lantern room.",
]


@pytest.mark.parametrize(
    "inside",
    [
        '<div class="jp-relatedposts-post jp-relatedposts-post-thumbs">',
        '<div class="share-post-links">',
        '<div class="article-sharing">',
        '<div class="related-content">',
    ],
)
def test_req_page_002_promotion_named_with_a_content_word_is_chrome(inside: str) -> None:
    promotion = "".join(
        f'<div><h3><a href="/story/{n}">Story {n}</a></h3><p>{text}</p></div>'
        for n, text in enumerate(TEASERS)
    )
    html = (
        f"<html><body>{CHROME}<main><article><h1>The northern quay opens</h1>"
        f"<div class=entry-content>{paragraphs(STORY)}{inside}{promotion}</div></div>"
        "</article></main>"
        f"{FOOTER}</body></html>"
    )
    content = extract(html)
    assert missing(content, STORY) == []
    assert "Ferry timetables" not in content
    assert "lighthouse museum" not in content


# --- 3. Articles made of lists -----------------------------------------------------------------

TIPS = [
    "Check the tide tables before you set out, because the causeway floods quickly, and the "
    "water comes in faster than most walkers expect on a spring tide.",
    "Carry a waterproof layer even in summer, since squalls blow in from the west with little "
    "warning, and the exposed headland offers no shelter at all.",
    "Keep dogs on a lead near the cliffs, where ground-nesting birds raise their chicks between "
    "April and July, and the edge crumbles after heavy rain.",
    "Leave the rock pools as you found them, turning stones back over gently, so that the crabs, "
    "anemones and blennies underneath are not left to dry out.",
    "Take the coastal bus back if your legs give out; it stops at every village, runs hourly "
    "until dusk, and the drivers will wait for walkers at the lighthouse.",
]


@pytest.mark.parametrize("list_tag", ["ul", "ol"])
def test_req_page_002_article_made_of_a_list_comes_whole(list_tag: str) -> None:
    items = "".join(f"<li>{tip}</li>" for tip in TIPS)
    html = (
        f"<html><body>{CHROME}<div class=entry-content><h1>Five tips for the coast path</h1>"
        "<p>We asked the wardens of the coast path what every walker should know before "
        f"setting out, and here is what they said.</p><{list_tag}>{items}</{list_tag}></div>"
        f"{ARCHIVE}{FOOTER}</body></html>"
    )
    content = extract(html)
    assert missing(content, TIPS) == []


# --- 4. Comment threads are not the article -----------------------------------------------------

COMMENTS = [
    f"Comment number {n}: I walked the new quay last weekend with my grandchildren, and I have "
    f"to say, after all the complaints about the cost, it looks wonderful, though the parking "
    f"is still a problem and the cafe closes far too early for visitors like us {n}."
    for n in range(1, 13)
]


@pytest.mark.parametrize(
    ("thread_open", "thread_close", "item"),
    [
        (
            '<div id="comments" class="comments-area"><h2>12 responses</h2>'
            '<ol class="comment-list">',
            "</ol></div>",
            '<li class="comment"><div class="comment-body"><p class=author>Reader</p>'
            '<div class="comment-content"><p>{}</p></div></div></li>',
        ),
        (
            '<section id="disqus_thread"><h3>Discussion</h3>',
            "</section>",
            '<div class="post-message"><p>{}</p></div>',
        ),
    ],
)
def test_req_page_002_long_comment_thread_not_joined_to_the_article(
    thread_open: str, thread_close: str, item: str
) -> None:
    thread = thread_open + "".join(item.format(c) for c in COMMENTS) + thread_close
    html = (
        f"<html><body>{CHROME}<div class=post><h1>The northern quay opens</h1>"
        f"{paragraphs(STORY)}{thread}</div>{FOOTER}</body></html>"
    )
    content = extract(html)
    assert missing(content, STORY) == []
    assert "Comment number" not in content


def test_req_page_002_wrapper_named_for_comments_keeps_the_article() -> None:
    # A theme marks the post's wrapper "comments-open"; the article it holds is no thread,
    # though the thread inside it is.
    thread = '<div id="comments">' + paragraphs(COMMENTS[:3]) + "</div>"
    html = (
        f'<html><body>{CHROME}<div class="single comments-open">'
        f"<h1>The northern quay opens</h1>{paragraphs(STORY)}{thread}</div>"
        f"{ARCHIVE}{FOOTER}</body></html>"
    )
    content = extract(html)
    assert missing(content, STORY) == []
    assert "Comment number" not in content


# --- 5. Short pages: documentation and reference ---------------------------------------------


def test_req_fetch_002_short_reference_page_comes_whole() -> None:
    html = (
        f"<html><body>{CHROME}<main><h1>parse_duration</h1>"
        "<p>Parses a duration such as 1h30m into seconds. Hours, minutes and seconds may be "
        "combined, each at most once; an empty text, an unknown unit or a negative number "
        "raises ValueError, and so does a value too large for the platform's float.</p>"
        "<table><tr><th>Unit</th><th>Meaning</th></tr><tr><td>h</td><td>hours</td></tr>"
        "<tr><td>m</td><td>minutes</td></tr></table>"
        '<pre><code class="language-python">s = parse_duration("1h")</code></pre>'
        "<ul><li>Units may appear in any order.</li><li>Whitespace is ignored.</li></ul>"
        f"</main>{FOOTER}</body></html>"
    )
    content = extract(html)
    assert "# parse_duration" in content
    assert "Parses a duration such as 1h30m" in content
    assert "| h | hours |" in content
    assert '```python\ns = parse_duration("1h")\n```' in content
    assert "- Units may appear in any order." in content
    assert "- Whitespace is ignored." in content


# --- Figures' file names are not their description ---------------------------------------------


@pytest.mark.parametrize("alt", ["12-IMG_3886.jpg", "performance.PNG", "quay_2019-06-03.webp"])
def test_req_fetch_004_alt_text_that_is_a_file_name_is_left_out(alt: str) -> None:
    # The image shown is a resized or lazy-loaded copy with another name than the one the
    # author uploaded, which the publishing tool wrote as the alternative text.
    html = (
        f"<html><body>{CHROME}<article><h1>The northern quay opens</h1>"
        f'<p><a href="/album/1"><img src="/cdn/1387894842-1217674167.jpg" alt="{alt}"></a></p>'
        f'{paragraphs(STORY)}<p><img src="/cdn/98.jpg" alt="The quay at dawn.jpg"></p>'
        f"</article>{FOOTER}</body></html>"
    )
    content = extract(html)
    assert missing(content, STORY) == []
    assert alt not in content
    assert alt.rsplit(".", 1)[0] not in content
    # A description that only ends like a file name is still a description.
    assert "The quay at dawn.jpg" in content


# --- LIM-F10: the work grows with the page, never with its square ----------------------------


def _cpu_seconds(html: str) -> float:
    # The fastest of three: a collection or a cache miss in one run is noise, while a
    # quadratic step is slow in every run.
    times = []
    for _ in range(3):
        start = time.process_time()
        extract(html)
        times.append(time.process_time() - start)
    return min(times)


@pytest.mark.parametrize(
    "shape",
    [
        # Thousands of removed chrome siblings, each followed by text that must stay in place.
        lambda n: (
            paragraphs(STORY)
            + "".join(f'<div class="share">s</div> tail text {i}\n' for i in range(n))
        ),
        # Thousands of link blocks cleaned out of the main block, each with a tail.
        lambda n: (
            "<div>"
            + paragraphs(STORY * 40)
            + "".join(f'<div><a href="/{i}">x</a></div> tail {i}\n' for i in range(n))
            + "</div>"
        ),
    ],
)
def test_lim_f10_removing_many_parts_is_linear(shape: Callable[[int], str]) -> None:
    small = f"<html><body>{shape(4_000)}</body></html>"
    large = f"<html><body>{shape(16_000)}</body></html>"
    _cpu_seconds(small)  # warm the caches of the class-name regexes
    ratio = _cpu_seconds(large) / max(_cpu_seconds(small), 1e-3)
    # Four times the parts: about four times the work when linear, sixteen when quadratic.
    assert ratio < 9


# --- Fidelity: every construct an agent needs comes through intact -----------------------------

GUIDE = """<!DOCTYPE html><html><head><title>Reading tide tables</title></head><body>
<header><a href="/">Harbour Guides</a></header><nav><a href="/a">All guides</a></nav>
<main>
<h1>Reading tide tables</h1>
<p>A tide table lists, for each day, the times and heights of high and low water at a port,
and this guide explains how to read one before a trip along the coast.</p>
<h2>The columns</h2>
<table><thead><tr><th>Time</th><th>Height (m)</th><th>Kind</th></tr></thead>
<tbody><tr><td>04:12</td><td>5.1</td><td>High</td></tr>
<tr><td>10:30</td><td>0.8</td><td>Low</td></tr></tbody></table>
<h2>Computing the height</h2>
<p>The rule of twelfths gives the height after t hours as h = low + (high − low) × F(t),
where F(1) = 1/12, F(2) = 3/12 and F(3) = 6/12; in code, <code>h = lo + (hi - lo) * f</code>.</p>
<pre><code class="language-python">def height(low, high, fraction):
    return low + (high - low) * fraction
</code></pre>
<h3>Steps</h3>
<ol><li>Find the port.<ul><li>Check the datum.</li><li>Check the time zone.</li></ul></li>
<li>Read the day's row.</li></ol>
<dl><dt>Datum</dt><dd>The level heights are measured from.</dd>
<dt>Range</dt><dd>The difference between high and low water.</dd></dl>
<blockquote><p>Time and tide wait for no man.</p></blockquote>
<p><img src="/chart.png" alt="Chart of a semi-diurnal tide"></p>
<p>See the <a href="/tides/spring">guide to spring tides</a> for more.</p>
</main>
<footer><p>Harbour Guides, published by the harbour authority, all rights reserved.</p></footer>
</body></html>"""


@pytest.mark.parametrize(
    "fragment",
    [
        pytest.param("# Reading tide tables\n", id="heading-1"),
        pytest.param("\n## The columns\n", id="heading-2"),
        pytest.param("\n### Steps\n", id="heading-3"),
        pytest.param(
            "| Time | Height (m) | Kind |\n| --- | --- | --- |\n"
            "| 04:12 | 5.1 | High |\n| 10:30 | 0.8 | Low |",
            id="table",
        ),
        pytest.param(
            "```python\ndef height(low, high, fraction):\n"
            "    return low + (high - low) * fraction\n```",
            id="code-with-language",
        ),
        pytest.param(
            "h = low + (high − low) × F(t), where F(1) = 1/12, F(2) = 3/12 and F(3) = 6/12",
            id="formula-as-text",
        ),
        pytest.param("`h = lo + (hi - lo) * f`", id="inline-code"),
        pytest.param(
            "1. Find the port.\n   - Check the datum.\n   - Check the time zone.\n"
            "2. Read the day's row.",
            id="nested-lists",
        ),
        pytest.param("Datum\n\nThe level heights are measured from.", id="definition-list-1"),
        pytest.param("Range\n\nThe difference between high and low water.", id="definition-list-2"),
        pytest.param("> Time and tide wait for no man.", id="quote"),
        pytest.param("Chart of a semi-diurnal tide", id="image-alt"),
        pytest.param(
            "[guide to spring tides](https://example.org/tides/spring)", id="absolute-link"
        ),
    ],
)
def test_req_fetch_004_fidelity_construct_survives_extraction(fragment: str) -> None:
    content = extract(GUIDE)
    assert fragment in content


def test_req_page_002_fidelity_page_without_its_chrome() -> None:
    content = extract(GUIDE)
    assert content.startswith("# Reading tide tables")
    assert "All guides" not in content
    assert "all rights reserved" not in content


# --- Links: resolved once per site, written as each alone would be ------------------------------

BASES = [
    "https://example.org/docs/page",
    "http://example.org",
    "https://EXAMPLE.org:8443/a/b/?q=1#top",
    "https://bücher.example/katalog/",
    "http://example.org:99999/",
    "https://user:secret@example.org/",
    "https://example.org/" + "x" * 2030,
]
HREF_PARTS = st.sampled_from(
    [
        "/",
        "//",
        ".",
        "..",
        "a",
        "Z9",
        "-_~",
        "%41",
        "%zz",
        "&",
        "&amp;",
        "&lt;",
        ";",
        "?",
        "#",
        ":",
        "@",
        "$!'*+,=",
        "é",
        " ",
        "(",
        ")",
        "`",
        "\\",
        "x" * 40,
        "http://",
        "https://",
        "HTTPS://",
        "example.org",
        "other.example",
        "bücher.example",
        ":443",
        ":99999",
        "user@",
        "utm_source=x",
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    base=st.sampled_from(BASES),
    hrefs=st.lists(st.lists(HREF_PARTS, min_size=1, max_size=8).map("".join), max_size=12),
)
@example(base=BASES[0], hrefs=["/a/b", "/a/../b", "/a//b", "https://example.org/c", "/a?x=1"])
# The longest target LIM-F9 allows ("https://example.org" is 19 characters), and one more.
@example(base=BASES[0], hrefs=["/" + "y" * 2028, "/" + "y" * 2029])
def test_req_fetch_004_each_link_written_as_if_alone(base: str, hrefs: list[str]) -> None:
    # The writer resolves the plain links of a site once; each target must still be what
    # resolving that link alone gives (or its text alone, when it has no target).
    links = "".join(
        f'<p><a href="{html_lib.escape(h)}">link {i}</a> end {i}.</p>' for i, h in enumerate(hrefs)
    )
    root = parse_html(
        f"<html><body>{links}</body></html>", max_nodes=MAX_NODES, max_depth=MAX_DEPTH
    ).root
    assert root is not None
    written = render_markdown(list(root.iterchildren("body")), base)
    for index, element in enumerate(root.iter("a")):
        href = element.get("href", "")
        target = None if href.strip().startswith("#") else link_target(base, href)
        expected = f"[link {index}]({target})" if target else f"link {index}"
        assert f"{expected} end {index}." in written


def test_req_fetch_004_picture_in_a_layout_table_keeps_its_alternative_text() -> None:
    # A table laid out with a paragraph in a later cell is written as blocks; the picture in
    # its first cell is still written (its text was once taken as written already).
    html = (
        f"<html><body><article><h1>The northern quay opens</h1>{paragraphs(STORY)}"
        "<table><tr><td><img src=/b.png alt='Harbour map'></td><td>Quay, north side</td></tr>"
        "<tr><td>Notes</td><td><p>Open daily from dawn to dusk.</p></td></tr></table>"
        "</article></body></html>"
    )
    content = extract(html)
    assert "Harbour map" in content
    assert missing(content, STORY) == []
