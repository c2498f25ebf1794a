"""The choice of a page's main block (REQ-FETCH-002, REQ-PAGE-002).

Four steps over the tree the bounded parse built (book: "How web_fetch reads a page"):

1. Chrome removal. Navigation, headers, footers, sidebars, menus, dialogs and captions go by
   element (nav, header, footer, aside, menu, dialog, figcaption) and by ARIA role
   (navigation, banner, contentinfo, complementary, search…), whatever they hold. Forms,
   figures and elements whose class or id words name chrome (menu, sidebar, share, related…,
   unless a content word such as article, content or post is there too, in a name without
   a word for other pages or for sharing: "related-posts" is chrome) go as well unless
   they hold 40 % of the page's text, half its running text, or a fifth of it with few
   links: a name is a guess, and a site that puts its article in a ``<form>`` or names its
   wrapper ``date-outer`` or ``share_wrapper`` keeps it; inside a declared article body
   (``itemprop="articleBody"``), a part that leaves an article's worth of running text
   beside it is judged by its name alone (a gallery widget). A comment thread goes whatever
   its length, unless it is nearly the whole page. Running text is the own inline text of
   paragraphs, items, cells and code, 25 characters or more and not mostly links.
2. Scoring. Every block's own run of inline text (a paragraph, or text written straight into
   a container) of at least 25 characters scores by its length and its commas; the score
   goes to its container in full and to the next ancestors in part. A container's score is
   weighed by its element, its class and id words, and the share of its text that is link
   text.
3. The block. The best container is narrowed to the descendant holding 90 % of its
   paragraph text, widened to the common container of a story split into substantial parts,
   to a well-scored ancestor of whose paragraph text it holds less than 60 % (teasers beside
   it, items headed by a link to another page, not counted), and to an enclosing
   ``<article>`` (or ``itemprop="articleBody"``) of whose paragraph text it holds less than
   80 %. Its siblings join it when they score close to it or are plain paragraphs. A block
   under 200 characters on a page ten times longer is a scrap: the page is the block.
4. Cleaning. Inside the block, lists, tables, divisions and sections that are mostly links,
   images or short fragments are removed (never a part holding 30 % of the block's paragraph
   text, nor a disclosure's label, nor a table of data whose links sit in one column, nor
   the divisions in its cells), and so are paragraphs that are 80 % link text; unless that
   would leave under a quarter of the block's text (a page of teasers is its content).

Every step is linear in the size of the tree, whatever its depth: counts are summed from the
leaves up in one pass, never recomputed per element over its subtree, and removed parts go
in one pass at the end, their tails joined once per place they move to.
"""

from __future__ import annotations

from typing import Final

import attrs

from rypsok.core.fetch.mainblock.choose import (
    climb,
    container_of,
    merge_parts,
    narrow,
    with_siblings,
)
from rypsok.core.fetch.mainblock.chrome import entry_rows, remove_chrome
from rypsok.core.fetch.mainblock.clean import clean_block
from rypsok.core.fetch.mainblock.measure import Element, Stats
from rypsok.core.fetch.mainblock.repeats import repeated_parts
from rypsok.core.fetch.mainblock.score import score_candidates
from rypsok.core.fetch.mainblock.tree import block_text, drop_all

__all__ = ["MainBlock", "select_main_block"]


@attrs.frozen
class MainBlock:
    """The elements of the main block, in document order, and the page's first heading."""

    elements: tuple[Element, ...]
    heading: str | None


def _first_heading(body: Element) -> str | None:
    for heading in body.iter("h1"):
        text = " ".join(block_text(heading).split())
        if text:
            return text
    return None


# A block shorter than this (characters) on a page at least `_SCRAP_RATIO` times longer
# (without its chrome) is a scrap, not the page's content.
_SCRAP: Final = 200
_SCRAP_RATIO: Final = 10


def select_main_block(root: Element) -> MainBlock:
    """The main block of the page rooted at `root` (mutates the tree)."""
    body = root.find("body")
    if body is None:
        body = root
    heading = _first_heading(body)
    # The lengths without the chrome: the kept rows' columns, summed again (one more linear
    # pass, without reading the tree again).
    stats = remove_chrome(body, Stats(body))
    scores, good = score_candidates(body, stats)
    if not scores:
        # Nothing long enough to score: the page is short, and all of it is content.
        return MainBlock(elements=(body,), heading=heading)
    top = first = scores.best()
    best = scores[top]
    if best <= 0 or top is root:
        # No paragraph text anywhere (a page of links, an index): the page is its content.
        return MainBlock(elements=(body,), heading=heading)
    top = narrow(top, good, stats)
    top = merge_parts(top, best, scores, good)
    top = climb(top, best, scores, good, stats)
    top = container_of(top, good)
    elements = with_siblings(top, scores, stats) if top is not body else [body]
    chosen = sum(stats.text.get(element, 0) for element in elements)
    if chosen < _SCRAP and stats.text.get(body, 0) >= _SCRAP_RATIO * max(chosen, 1):
        # A scrap of a page ten times its length is not its content: a section front whose
        # teasers are written as links (titles and summaries alike) has next to no paragraph
        # text, and its best "paragraph" is a date line. The page is its content, as when
        # it has no paragraph text at all; the cleaning below still takes its link blocks.
        # But a post may be tiny: a page with an entry container, or a title, answers that
        # and not the template around it.
        post = _tiny_post(body, stats)
        elements = [body if post is None else post]
    clean_block(elements, scores, good, stats)
    if elements != [body]:
        drop_all(repeated_parts(elements, stats, first))
    return MainBlock(elements=tuple(elements), heading=heading)


def _tiny_post(body: Element, stats: Stats) -> Element | None:
    """The container of a post too short to score against its template: the entry container
    holding the most running text (named for a post's body, or the page's one
    ``<article>``), else the container of the page's first ``<h1>`` (the heading and what
    stands with it); None when the page has neither."""
    rows = entry_rows(stats)
    articles = [row for row in rows if stats.tags[row] == "article"]
    if len(articles) > 1:
        # Several articles are teasers of a section front, not one post.
        rows = [row for row in rows if stats.tags[row] != "article"]
    if rows:
        prose = stats.prose.values
        return stats.elements[max(rows, key=prose.__getitem__)]
    heading = next(body.iter("h1"), None)
    if heading is None:
        return None
    own = stats.text.get(heading, 0)
    container = heading.getparent()
    while container is not None and container is not body:
        if stats.text.get(container, 0) > own:
            return container
        container = container.getparent()
    return None
