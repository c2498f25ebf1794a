"""Which block of a page web_fetch keeps (the choice of the main block): classes of
fault found by comparing the development sets page by page with readability-lxml's choice.

REQ-PAGE-002 (main-content preference), REQ-FETCH-002 (main content extraction). Every page
here is written for its test; each runs through `extract_document`, the function web_fetch's
worker thread runs.
"""

from __future__ import annotations

from rypsok.core.fetch.extract import DocumentKind, ExtractionOutcome, extract_document

MAX_NODES = 100_000  # LIM-F10
MAX_DEPTH = 256  # LIM-F11
BASE = "https://example.org/news/quay"

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
CHROME = (
    '<header><a href="/">Harbour News</a></header>'
    '<nav><a href="/a">Home</a> <a href="/b">Ports</a> <a href="/c">Ferries</a></nav>'
)
FOOTER = "<footer><p>Copyright Harbour News, all rights reserved, since 1999.</p></footer>"


def extract(html: str) -> str:
    result = extract_document(
        html, DocumentKind.HTML, BASE, max_nodes=MAX_NODES, max_depth=MAX_DEPTH
    )
    assert result.outcome is ExtractionOutcome.OK
    return result.content


def paragraphs(texts: list[str]) -> str:
    return "".join(f"<p>{text}</p>" for text in texts)


def missing(content: str, texts: list[str]) -> list[str]:
    return [text for text in texts if text not in content]


# --- Teasers beside the story -----------------------------------------------------------------

# Summaries of other pages, each longer than a paragraph of the story, with its commas.
SUMMARIES = [
    f"Summary {n}: the county's {topic}, say officials, residents, traders and visitors alike, "
    f"after a long season of meetings, surveys, petitions, letters and public hearings, which "
    f"drew crowds to the town hall on {day} evenings through the autumn."
    for n, (topic, day) in enumerate(
        [
            ("bus timetable will change in spring", "Tuesday"),
            ("library will open on Sundays", "Wednesday"),
            ("new cycle lanes are too narrow", "Thursday"),
            ("market square will be repaved", "Monday"),
            ("school meals will cost more", "Friday"),
            ("swimming pool will reopen in May", "Tuesday"),
            ("allotments will double in number", "Thursday"),
            ("parking charges will rise again", "Monday"),
        ]
    )
]


def test_req_page_002_teaser_list_beside_the_story_does_not_widen_the_block() -> None:
    # A news page's main column holds the story and, below it, a stream of other stories:
    # items headed by a link to another page, each with its summary. The summaries are more
    # text than the story, but they are pointers elsewhere, not this page's text: the column
    # is not the content because of them.
    stream = "".join(
        f'<li class="stream-item"><div class="card"><h3><a href="/news/{n}">Story {n} of the '
        f"county</a></h3><p>{summary}</p></div></li>"
        for n, summary in enumerate(SUMMARIES)
    )
    html = (
        f'<html><body>{CHROME}<div id="main">'
        '<section class="story"><div class="story-body"><h1>The northern quay opens</h1>'
        f"{paragraphs(STORY)}</div></section>"
        f'<div class="stream"><ul>{stream}</ul></div></div>{FOOTER}</body></html>'
    )
    content = extract(html)
    assert missing(content, STORY) == []
    assert "Summary" not in content


def test_req_page_002_list_of_sections_with_plain_headings_still_widens_the_block() -> None:
    # The same page shape whose items are headed by plain titles (a reference page's
    # sections, a guide's steps) is one text: the block widens to hold it.
    steps = "".join(
        f'<li class="step"><div class="card"><h3>Step {n}</h3><p>{summary}</p></div></li>'
        for n, summary in enumerate(SUMMARIES)
    )
    html = (
        f'<html><body>{CHROME}<div id="main">'
        '<section class="intro"><div class="intro-body"><h1>The northern quay opens</h1>'
        f"{paragraphs(STORY)}</div></section>"
        f'<div class="steps"><ol>{steps}</ol></div></div>{FOOTER}</body></html>'
    )
    content = extract(html)
    assert missing(content, STORY) == []
    assert missing(content, SUMMARIES) == []


# --- A widget inside the declared article -------------------------------------------------------

LATER = [
    "Ferry crews welcomed the longer berth, which lets the larger winter boat turn without "
    "tugs, and the harbour master said crossings would no longer wait for slack water.",
    "Traders on the quay, whose cafes and chandleries had lost passing trade during the "
    "works, reported their busiest weekend since the harbour closed for the rebuild.",
    "Next spring the authority will light the quay's length, fit new ladders and mooring "
    "rings, and open a shelter for passengers waiting for the first boat of the day.",
]
CAPTIONS = [
    f"Picture {n}: the {place} during the works, where crews, divers and crane drivers "
    f"worked through the winter, in wind, rain and fog, to set the last of the basalt "
    f"blocks before the spring tides, watched by a small crowd from the harbour wall."
    for n, place in enumerate(
        [
            "old jetty",
            "sea wall",
            "crane barge",
            "warehouse roof",
            "slipway",
            "fish market",
            "ferry ramp",
            "lighthouse",
            "breakwater",
            "dry dock",
            "ticket office",
            "harbour steps",
        ]
    )
]


def _gallery(name: str) -> str:
    items = "".join(
        f'<li><h2><span class="counter">{n + 1}/{len(CAPTIONS)}</span> The quay</h2>'
        f"<p>{caption}</p></li>"
        for n, caption in enumerate(CAPTIONS)
    )
    return f'<div class="{name}"><h2>The quay in pictures</h2><ul>{items}</ul></div>'


def test_req_page_002_gallery_widget_inside_the_declared_article_is_chrome() -> None:
    # The page declares its article (`<article>`, articleBody); in the middle of its text sits
    # a gallery widget whose fifty captions hold more text than the article itself. The name
    # guard keeps a wrapper of the article, not a part that leaves the article beside it.
    html = (
        f"<html><body>{CHROME}<article><h1>The northern quay opens</h1>"
        f'<div class="story-text" itemprop="articleBody">{paragraphs(STORY)}'
        f"{_gallery('dnd-widget-wrapper type-gallery')}{paragraphs(LATER)}</div>"
        f"</article>{FOOTER}</body></html>"
    )
    content = extract(html)
    assert missing(content, STORY + LATER) == []
    assert "Picture" not in content


def test_req_page_002_chrome_named_wrapper_of_the_declared_article_is_kept() -> None:
    # Inside a declared article body, a wrapper named for sharing that holds the article's
    # text (what is left outside it is a title and a byline) is the article: it stays.
    html = (
        f'<html><body>{CHROME}<div itemprop="articleBody"><h1>The northern quay opens</h1>'
        '<p class="byline">By the harbour desk, on Monday.</p>'
        f'<div class="share_wrapper">{paragraphs(STORY + LATER)}</div>'
        f"</div>{FOOTER}</body></html>"
    )
    content = extract(html)
    assert missing(content, STORY + LATER) == []


def test_req_page_002_article_element_around_a_whole_column_does_not_unguard_names() -> None:
    # Themes wrap a whole column in `<article>`, the article's own wrapper (named for sharing)
    # and a box of other text beside it: `<article>` does not declare the body, so the
    # wrapper holding the article stays guarded by its size.
    about = (
        "The harbour desk reports on the ports, ferries, fishing fleets and coastal towns of "
        "the county, from the quays at dawn to the council chamber at night, and takes tips, "
        "corrections and letters from readers by post, by telephone and at the office. "
    ) * 5
    html = (
        f"<html><body>{CHROME}<article><h1>The northern quay opens</h1>"
        f'<div class="share_wrapper">{paragraphs(STORY + LATER)}</div>'
        f'<div class="desk"><p>{about}</p></div></article>{FOOTER}</body></html>'
    )
    content = extract(html)
    assert missing(content, STORY + LATER) == []


def test_req_page_002_article_of_linked_titles_does_not_widen_the_block() -> None:
    # An article that is itself a list of linked titles with their summaries (eight harbours
    # to visit, each title linking to the harbour's site) is its own text: only teasers
    # beside the block are left out of the widening test, not those that make the block, so
    # the box beside the article stays out.
    items = "".join(
        f'<li><h2><a href="https://harbours.example/{n}">Harbour {n}</a></h2><p>{summary}</p></li>'
        for n, summary in enumerate(SUMMARIES)
    )
    html = (
        f'<html><body>{CHROME}<div id="main"><div class="post">'
        f"<h1>Eight harbours to visit</h1><p>{STORY[0]}</p><ol>{items}</ol></div>"
        f'<div class="box"><p>{BIO}</p><p>{LATER[0]}</p></div></div>{FOOTER}</body></html>'
    )
    content = extract(html)
    assert missing(content, [STORY[0], *SUMMARIES]) == []
    assert "Morwenna" not in content


def test_req_page_002_gallery_outside_a_declared_article_still_guarded() -> None:
    # Without a declared article the page gives no second signal, and a name alone does not
    # remove the block holding most of the page's text: the gallery page keeps its captions.
    html = (
        f"<html><body>{CHROME}<div class=main>{_gallery('gallery-widget')}</div>"
        f"{FOOTER}</body></html>"
    )
    content = extract(html)
    assert missing(content, CAPTIONS) == []


# --- Custom elements around the article ------------------------------------------------------

BIO = (
    "Morwenna Pascoe writes about ports, ferries and the sea, and before that she sailed, for "
    "twelve years, as a deck officer on cargo ships between Falmouth, Lisbon and the Azores."
)


def test_req_page_002_custom_elements_do_not_count_the_article_twice() -> None:
    # A page built with web components wraps everything in elements of its own (`app-root`,
    # `story-layout`); a reader sees them as boxes, and their text once. Counted as inline
    # runs, the article's paragraphs inside them were counted twice, the wrapper seemed to
    # hold twice the text of the article, and the block widened to the author's box beside.
    html = (
        f'<html><body>{CHROME}<app-root><div class="page"><story-layout>'
        f'<div class="story"><h1>The northern quay opens</h1>{paragraphs(STORY + LATER)}</div>'
        f'<div class="writer-box"><p>{BIO}</p></div>'
        f"</story-layout></div></app-root>{FOOTER}</body></html>"
    )
    content = extract(html)
    assert missing(content, STORY + LATER) == []
    assert "Morwenna" not in content


# --- Tables of data whose links sit in one column -------------------------------------------

FERRIES = [
    ("Morwenna", "1998", "212", "14.5 knots"),
    ("Cape Cornwall", "2004", "348", "16 knots"),
    ("Scillonian", "1977", "485", "15.5 knots"),
    ("Kernow Star", "2011", "120", "22 knots"),
    ("Gwennap", "2016", "96", "24 knots"),
]


def _ferry_table(cell: str) -> str:
    head = "<tr><th>Ferry</th><th>Built</th><th>Passengers</th><th>Speed</th></tr>"
    rows = "".join(
        "<tr>"
        + cell.format(f'<a href="/ferries/{name.lower().replace(" ", "-")}">{name}</a>')
        + "".join(cell.format(value) for value in values)
        + "</tr>"
        for name, *values in FERRIES
    )
    return f"<table>{head}{rows}</table>"


def test_req_fetch_004_table_of_data_with_a_column_of_links_is_kept() -> None:
    # A table whose first column names each row with a link to its page, the others holding
    # figures, is data the article gives (its links are a quarter of its text, more than a
    # block of prose has): it stays, written as a table.
    html = (
        f"<html><body>{CHROME}<article><h1>The northern quay opens</h1>"
        f"{paragraphs(STORY)}{_ferry_table('<td>{}</td>')}{paragraphs(LATER)}</article>"
        f"{FOOTER}</body></html>"
    )
    content = extract(html)
    assert missing(content, STORY + LATER) == []
    for name, built, passengers, speed in FERRIES:
        link = f"[{name}](https://example.org/ferries/{name.lower().replace(' ', '-')})"
        assert f"| {link} | {built} | {passengers} | {speed} |" in content


def test_req_page_002_division_in_a_data_tables_cell_is_judged_with_its_table() -> None:
    # Some publishing tools wrap each cell's content in a division: the division is the
    # cell's content, not a fragment of its own to clean out (a figure too short, a name that
    # is all link), so every cell's text comes through.
    table = _ferry_table('<td><div dir="ltr"><span>{}</span></div></td>')
    html = (
        f"<html><body>{CHROME}<article><h1>The northern quay opens</h1>"
        f"{paragraphs(STORY)}{table}{paragraphs(LATER)}</article>{FOOTER}</body></html>"
    )
    content = extract(html)
    assert missing(content, STORY + LATER) == []
    for row in FERRIES:
        assert missing(content, list(row)) == [], row


def test_req_page_002_table_that_is_a_grid_of_links_still_goes() -> None:
    # A table every cell of which is a link is navigation laid out as a grid: cleaned out.
    grid = (
        "<table>"
        + "".join(
            "<tr>"
            + "".join(f'<td><a href="/topic/{r}{c}">Topic {r}{c}</a></td>' for c in range(4))
            + "</tr>"
            for r in range(5)
        )
        + "</table>"
    )
    html = (
        f"<html><body>{CHROME}<article><h1>The northern quay opens</h1>"
        f"{paragraphs(STORY)}{grid}{paragraphs(LATER)}</article>{FOOTER}</body></html>"
    )
    content = extract(html)
    assert missing(content, STORY + LATER) == []
    assert "Topic 12" not in content


# --- A section front whose teasers are links -------------------------------------------------

TEASER_LINKS = [
    f"{title}. {summary}"
    for title, summary in [
        ("Ferries to run all winter", "The island service keeps two sailings a day"),
        ("New berths for the fleet", "Trawlers will moor at the northern quay from May"),
        ("Harbour museum reopens", "The lifeboat gallery returns after a year of repairs"),
        ("Sea wall inquiry ends", "Engineers blame the storm of March for the breach"),
        ("Cruise visitors double", "Traders on the front report their best summer yet"),
        ("Lighthouse for sale", "The keeper's cottage and tower go to auction in June"),
        ("Pilots call for tugs", "Larger ships need help to turn in the inner basin"),
        ("Quay lights switched on", "Forty lamps now line the walk to the ferry ramp"),
    ]
]


def test_req_fetch_002_section_front_of_linked_teasers_is_its_content() -> None:
    # A section front writes each story as a link, title and summary alike: next to no
    # paragraph text, and its best "paragraph" is the date line at the top. A scrap a tenth
    # of the page's length is not its content; the page is, as a page without paragraphs is.
    rows = "".join(
        f'<div class="row"><p><a href="/news/{n}">{text}, says the harbour desk in its '
        f"weekly round-up of news from the quays, the fleet and the front.</a></p></div>"
        for n, text in enumerate(TEASER_LINKS)
    )
    html = (
        f"<html><body>{CHROME}<div id=page><div class=dateline><div><div>"
        "Tuesday, 26th December 2006</div></div></div>"
        f'<div id="stories"><h2>Harbour news</h2>{rows}</div></div>{FOOTER}</body></html>'
    )
    content = extract(html)
    assert missing(content, TEASER_LINKS) == []
