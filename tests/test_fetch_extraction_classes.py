"""The shapes in which web_fetch lost a page's content, read through web_fetch itself.

Each test serves pages written here in one shape (a blog or news template's, invented, never
copied) from a loopback site and reads them through `Rypsok.fetch`: the bounded parse, the
main block, the Markdown writer, as an agent reads a page. Each shape is the skeleton of a
class of pages a held-out page set lost; a test asserts that the
article comes back and the template around it does not.
"""

from __future__ import annotations

from typing import Any

from fetch_helpers import fetch_config, fetching_rypsok
from fetch_sites import Page, serve_site

from rypsok.core.model import FetchRequest, ToolError

ROBOTS_OPEN = Page.text("User-agent: *\nAllow: /\n")
HTML = (("Content-Type", "text/html"),)

# The article's paragraphs, each a sentence that appears nowhere else on the pages.
QUAY = (
    "The harbour authority opened the northern quay on Monday, after three years of work "
    "that moved the old fish market and rebuilt the sea wall against the winter storms."
)
FERRY = (
    "Ferries to the islands will berth there from June, which frees the southern basin for "
    "the sailing club, the lifeboat station and the fishing boats that still land daily."
)
COST = (
    "The works cost eleven million euros, a third of it from the regional fund, and the "
    "council expects the new berths to pay back their share within fifteen years."
)
ARTICLE = (QUAY, FERRY, COST)


def paragraphs(*texts: str) -> str:
    return "".join(f"<p>{text}</p>" for text in texts)


async def read(pages: dict[str, str]) -> dict[str, str]:
    """Each page's Markdown as web_fetch answers it (all of it)."""
    served = {path: Page(headers=HTML, body=body.encode()) for path, body in pages.items()}
    async with serve_site({**served, "/robots.txt": ROBOTS_OPEN}) as site:
        rypsok, _, _ = fetching_rypsok(
            fetch_config("[egress]\nallow_http = true\n"), {"pages.test": site}
        )
        answers: dict[str, str] = {}
        async with rypsok:
            for path in pages:
                try:
                    answer: Any = await rypsok.fetch(
                        FetchRequest(url=f"http://pages.test{path}", max_chars=20000)
                    )
                except ToolError as error:
                    # (Nothing extracted: an answer without the article.)
                    answers[path] = f"error: {error.kind}"
                    continue
                assert answer.next_start_char is None, path
                answers[path] = answer.content
    return answers


def assert_article(text: str, path: str, *absent: str) -> None:
    for sentence in ARTICLE:
        assert sentence in text, (path, text[:400])
    for words in absent:
        assert words not in text, (path, words)


# --- Class 3: a chrome element left open by misnested markup wraps the article -------------


async def test_req_page_002_a_header_left_open_around_the_article_is_not_removed_with_it() -> None:
    # A table left open inside the site's navigation: the parser cannot close the header and
    # the nav at their end tags (the table is in the way), so they wrap the rest of the page.
    # Removing them by their element took the article along.
    menu = (
        "<ul><li><a href='/'>Home</a><li><a href='/news'>News</a>"
        "<li><a href='/sport'>Sport</a></ul>"
    )
    open_table = "<table><tr><td>Advertisement: visit the boat show</td></tr>"
    article = f"<main><article><h1>The quay opens</h1>{paragraphs(*ARTICLE)}</article></main>"
    pages = {
        "/header": (
            f"<html><head><title>Quay</title></head><body><header><nav>{menu}{open_table}"
            f"</nav></header>{article}<footer>Harbour Gazette, all rights</footer></body></html>"
        ),
        "/banner": (
            f"<html><head><title>Quay</title></head><body><div role='banner'>{menu}"
            f"{open_table}</div>{article}</body></html>"
        ),
        "/aside": (
            f"<html><head><title>Quay</title></head><body><aside>{menu}{open_table}</aside>"
            f"<div class='story'><h1>The quay opens</h1>{paragraphs(*ARTICLE)}</div>"
            "</body></html>"
        ),
    }
    answers = await read(pages)
    for path, text in answers.items():
        # The article, not the navigation and the advertisement the element also wraps.
        assert_article(text, path, "Sport", "boat show")


# --- Class 8: text lost in the parse ----------------------------------------------------------


async def test_req_page_006_a_title_never_closed_does_not_swallow_the_page() -> None:
    # A title element's text ends only at its end tag: one never closed, or closed by an
    # end tag that is not one (`</titlevalue=…>`), took the whole page as the title's text.
    story = f"<div class='story'><h1>The quay opens</h1>{paragraphs(*ARTICLE)}</div>"
    pages = {
        "/unclosed": (
            "<html><head><title>Harbour Gazette - The quay opens\n"
            '<meta name="description" content="Quay">\n<link rel="stylesheet" href="/s.css">\n'
            f"</head><body>{story}</body></html>"
        ),
        "/broken-end": (
            "<html><head><title>The quay opens</titlevalue='Quay'>"
            f"<meta charset='utf-8'></head><body>{story}</body></html>"
        ),
    }
    answers = await read(pages)
    for path, text in answers.items():
        assert_article(text, path, "stylesheet", "<meta", "titlevalue")


async def test_req_page_006_flow_content_in_a_head_never_closed_starts_the_body() -> None:
    # No </head>, no <body>: what cannot be in a head (a word processor's <o:p>, a custom
    # element, a legacy sound element holding the text) starts the body, as the HTML
    # standard's "in head: anything else" says; the parser kept it in the head, which is
    # never read.
    story = f"<h1>The quay opens</h1>{paragraphs(*ARTICLE)}"
    pages = {
        "/office": (
            f"<html><head><title>Quay</title><o:p>{QUAY}</o:p>{paragraphs(FERRY, COST)}</html>"
        ),
        "/custom": f"<html><head><title>Quay</title><page-wrap>{story}</page-wrap>",
        "/sound": f"<html><head><title>Quay</title><bgsound src='/tune.mid'>{story}</html>",
    }
    answers = await read(pages)
    for path, text in answers.items():
        assert_article(text, path)


# --- Class 2: a short post loses to a longer sidebar ----------------------------------------

ABOUT = (
    "I am a retired harbour pilot who writes about boats, tides, lighthouses and the people "
    "who keep them; I have lived in this town, by the water, for most of my life. "
)


async def test_req_page_002_a_short_post_is_chosen_over_a_longer_profile_sidebar() -> None:
    # The post is two paragraphs; the sidebar's profile and text widgets hold several times
    # more prose. A region is kept because it holds the post, not because it is large.
    blogger = (
        "<html><head><title>Harbour notes</title></head><body><div id='outer-wrapper'>"
        "<div id='header-wrapper'><h1 class='title'>Harbour notes</h1></div>"
        "<div id='main-wrapper'><div class='main section' id='main'><div class='date-outer'>"
        "<h2 class='date-header'><span>Monday, 6 May</span></h2><div class='post hentry'>"
        "<h3 class='post-title entry-title'><a href='/quay.html'>The quay opens</a></h3>"
        f"<div class='post-body entry-content'>{QUAY} {FERRY}<br><br>{COST}</div>"
        "<div class='post-footer'>Posted by Pilot at 08:00</div></div></div></div></div>"
        "<div id='sidebar-wrapper'><div class='sidebar section' id='sidebar'>"
        f"<div class='widget Profile'><h2>About Me</h2><dl><dd>{ABOUT * 6}</dd></dl></div>"
        f"<div class='widget Text'><h2>Disclaimer</h2><div>{ABOUT * 4}</div></div>"
        "</div></div></div></body></html>"
    )
    wordpress = (
        "<html><head><title>Harbour notes</title></head><body><div id='page'>"
        "<div id='primary' class='content-area'><div class='post type-post'>"
        "<h1 class='entry-title'>The quay opens</h1>"
        f"<div class='entry-content'>{paragraphs(*ARTICLE)}</div></div></div>"
        "<div id='secondary' class='widget-area'>"
        f"<div class='widget widget_text'><div class='textwidget'>{paragraphs(*[ABOUT * 3] * 4)}"
        "</div></div></div></div></body></html>"
    )
    answers = await read({"/blogger": blogger, "/wordpress": wordpress})
    for path, text in answers.items():
        assert_article(text, path, "retired harbour pilot")


# --- Class 1: the block too wide ---------------------------------------------------------------


async def test_req_page_002_a_signed_thread_and_linked_teasers_beside_the_post_are_left_out() -> (
    None
):
    # One container holds the post, a thread of readers' comments without a telling name
    # (each signed with a name and a time) and a "Recent posts" list of linked titles with
    # one-line summaries: their paragraphs made the container the block.
    thread = "".join(
        f"<div class='{'odd' if index % 2 else 'even'}'><p>Lovely to read about the quay, "
        f"we walked along it with the children on Saturday and the view was grand ({index}).</p>"
        f"<span>Posted by: reader{index} on 12/0{index % 9 + 1} at 08:{index:02d}</span></div>"
        for index in range(30)
    )
    teasers = "<h4>Recent Posts</h4>" + "".join(
        f"<h5><a href='/post/{index}'>The lighthouse keepers, part {index}</a></h5>"
        f"<p>A short summary of another story about boats and tides, number {index}.</p>"
        for index in range(8)
    )
    page = (
        "<html><head><title>Harbour notes</title></head><body><div class='blog'>"
        f"<div class='blogbody'><h2>The quay opens</h2>{paragraphs(*ARTICLE)}</div>"
        f"{thread}{teasers}</div></body></html>"
    )
    answers = await read({"/post": page})
    assert_article(answers["/post"], "/post", "Lovely to read", "lighthouse keepers", "Recent")


# --- Class 7: a tiny post in a full template ------------------------------------------------

MENU = "<ul>" + "".join(f"<li><a href='/c/{n}'>Category number {n}</a></li>" for n in range(30))
MENU += "</ul>"


async def test_req_page_002_a_tiny_post_answers_the_post_not_the_whole_template() -> None:
    # One sentence of post in a template of menus, archives and a footer: too short to
    # score, it made the whole page the answer. The entry container (or, without one, the
    # title's container) is the answer however short it is.
    tiny = "Back on Monday with photographs of the new quay and the ferries."
    footer = (
        "<div id='footer'><p>Harbour notes is proudly powered by a blogging engine, with a "
        "theme by a designer; entries and comments are syndicated.</p></div>"
    )
    sidebar = f"<div id='sidebar'><h2>Blogroll</h2>{MENU}<h2>Archives</h2>{MENU}</div>"
    named = (
        f"<html><head><title>Gone fishing</title></head><body><div id='header'>{MENU}</div>"
        "<div id='content'><div class='post'><h1 class='entry-title'>Gone fishing</h1>"
        f"<div class='entry-content'><p>{tiny}</p></div><p class='postmetadata'>Filed under "
        "<a href='/c/1'>News</a></p></div></div>"
        f"{sidebar}{footer}</body></html>"
    )
    titled = (
        f"<html><head><title>Gone fishing</title></head><body><div id='header'>{MENU}</div>"
        f"<div id='content'><div><h1>Gone fishing</h1><p>{tiny}</p></div></div>"
        f"{sidebar}{footer}</body></html>"
    )
    answers = await read({"/named": named, "/titled": titled})
    for path, text in answers.items():
        assert tiny in text, path
        for chrome in ("Category number", "proudly powered", "Blogroll"):
            assert chrome not in text, (path, chrome)


# --- Class 4: the article's own header ------------------------------------------------------


async def test_req_page_002_an_articles_own_header_is_content() -> None:
    # <header> inside <article> holds the headline, the dek and the lead paragraph; the
    # site's header outside it is still chrome.
    lead = (
        "After three years of works, the northern quay opened to ferries and fishing boats, "
        "and the town's old fish market has a new home by the water."
    )
    page = (
        "<html><head><title>Quay</title></head><body><header><a href='/'>Harbour Gazette</a>"
        "<nav><a href='/news'>News</a> <a href='/sport'>Sport</a></nav></header><main>"
        "<article><header><h1>The quay opens</h1><p class='dek'>Ferries move in from June</p>"
        f"<p class='lead'>{lead}</p></header>{paragraphs(*ARTICLE)}</article></main></body></html>"
    )
    answers = await read({"/article": page})
    text = answers["/article"]
    assert_article(text, "/article", "Harbour Gazette", "Sport")
    for part in ("The quay opens", "Ferries move in from June", lead):
        assert part in text, part


# --- Class 5: a chrome-named wrapper inside the post holds its paragraphs --------------------


async def test_req_page_002_a_caption_or_byline_holding_paragraphs_is_not_removed() -> None:
    # A byline span never closed, a caption left open, a share wrapper: the name says chrome,
    # but several paragraphs of prose are not a byline or a caption.
    before = paragraphs(
        *(
            f"Earlier in the story, part {n}: the pilots, the tides and the old harbour wall, "
            "told at length by the people who worked there for many years."
            for n in range(14)
        )
    )
    wrappers = {
        "/byline": f"<span class='byline'>By the harbour reporter{paragraphs(*ARTICLE)}",
        "/caption": (
            "<div class='wp-caption aligncenter'><img src='/quay.jpg' alt='The quay'>"
            f"{paragraphs(*ARTICLE)}</div>"
        ),
        "/share": f"<div class='share-wrapper'>{paragraphs(*ARTICLE)}<a href='/s'>Share</a></div>",
    }
    pages = {
        path: (
            "<html><head><title>Quay</title></head><body><div class='post'>"
            f"<h1>The quay opens</h1>{before}{wrapper}</div></body></html>"
        )
        for path, wrapper in wrappers.items()
    }
    answers = await read(pages)
    for path, text in answers.items():
        assert_article(text, path)


# --- Class 9: paragraphs between <br><br> in a <font> or a cell ------------------------------


async def test_req_page_002_paragraphs_between_double_breaks_score_as_paragraphs() -> None:
    # An old table layout: the story is text in a <font> in a cell, its paragraphs separated
    # by <br><br>; the cell beside it holds a few notes in paragraphs. Read as one run, the
    # story scored as one paragraph, no more than the notes, and the answer was their row.
    story = [
        f"Part {n} of the story tells of the pilots and the tides and the boats that were "
        "lost and saved in the long nights on the old harbour wall of the town."
        for n in range(8)
    ]
    notes = "".join(
        f"<p><a href='/n{n}'>Note {n}</a> A short note about the weather and the fish prices "
        "and the tides of this week in the bay.</p>"
        for n in range(3)
    )
    text = "<br><br>\n".join(story)
    page = (
        "<html><head><title>Quay</title></head><body><table><tr>"
        f"<td width='180' valign='top'>{notes}</td><td valign='top'><font face='arial'>"
        f"<b>The quay opens</b><br><br>{text}</font></td></tr></table></body></html>"
    )
    answers = await read({"/cells": page})
    for paragraph in story:
        assert paragraph in answers["/cells"], paragraph
    assert "fish prices" not in answers["/cells"]


# --- Class 10: a data table with a header row and a header column ---------------------------


async def test_req_page_002_a_table_with_header_row_and_column_is_kept() -> None:
    # A status grid: steps across the top, screens down the side, each cell a mark (a
    # picture) or nothing. Mostly empty of words, it was cleaned out as a block of images.
    steps = ("Draft", "Review", "Mockup", "Build", "Test")
    screens = ("Map loading", "Save game", "Options", "Blueprints", "Trains")
    done = "<img src='/done.png' width='20'>"
    head = "<tr><td></td>" + "".join(f"<td class='header_cell'>{step}</td>" for step in steps)
    rows = "".join(
        f"<tr><td>{screen}</td>"
        + "".join(f"<td class='finished'>{done}</td>" if n <= i else "<td></td>" for n in range(5))
        + "</tr>"
        for i, screen in enumerate(screens)
    )
    page = (
        "<html><head><title>Progress</title></head><body><div class='post'><h1>Progress</h1>"
        f"{paragraphs(*ARTICLE)}<table class='status'><tbody>{head}</tr>{rows}</tbody></table>"
        f"{paragraphs(QUAY.replace('harbour', 'river'))}</div></body></html>"
    )
    answers = await read({"/grid": page})
    text = answers["/grid"]
    assert_article(text, "/grid")
    for label in (*steps, *screens):
        assert label in text, label
    assert "| Map loading |" in text


# --- Class 6: the post is a list of links -------------------------------------------------


async def test_req_page_002_a_post_that_is_a_list_of_links_is_kept() -> None:
    # A link roundup: a short introduction, then the list that is the post. Link-density
    # cleaning took the list as a block of links.
    links = [f"The harbour and its boats in story number {n}" for n in range(12)]
    items = "".join(
        f"<li><a href='https://news.test/{n}'>{text}</a></li>" for n, text in enumerate(links)
    )
    intro = paragraphs(
        "Here are the best harbour stories I read this week with a word on why.",
        "It was a busy week on the water with the new quay opening and the ferries moving in.",
        "Some are long reads for a quiet evening and some are short notes from the pilots.",
    )
    most = (
        "<html><head><title>Links</title></head><body><div class='post'>"
        "<h2 class='entry-title'>Links for the week</h2>"
        f"<div class='entry-content'>{intro}<ul>{items}</ul><p>See you next week.</p></div>"
        "</div></body></html>"
    )
    under_title = (
        "<html><head><title>Links</title></head><body><div class='post'>"
        f"<h1>Links for the week</h1><ul>{items}</ul>{intro}{intro.replace('week', 'month')}"
        "</div></body></html>"
    )
    answers = await read({"/most": most, "/under-title": under_title})
    for path, text in answers.items():
        for link in links:
            assert link in text, (path, link)
