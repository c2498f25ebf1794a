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

import functools
import heapq
import re
from array import array
from itertools import accumulate, chain, compress, repeat
from operator import add, attrgetter, le, mul, not_, or_, sub
from typing import TYPE_CHECKING, Final, TypeAlias, overload

import attrs
from lxml import etree

from rypsok.core.fetch.markdown import BLOCK_ELEMENTS

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["MainBlock", "select_main_block"]

Element: TypeAlias = etree._Element

# Removed whatever they hold (REQ-CTX-005 names navigation); a form may wrap a whole page,
# so it is judged like a class word instead.
CHROME_ELEMENTS: Final = frozenset(
    {"nav", "header", "footer", "aside", "menu", "dialog", "figcaption"}
)
CHROME_ROLES: Final = frozenset(
    {
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
    }
)

_CHROME_WORDS: Final = re.compile(
    r"comment|sidebar|side-bar|footer|masthead|menu|(?:^|[-_ ])nav|breadcrumb|share|sharing"
    r"|social|related|recommend|promo|advert|(?:^|[-_ ])ads?(?:$|[-_ ])|sponsor|banner|newsletter"
    r"|subscri|signup|sign-up|cookie|consent|popup|modal|widget|toolbar|pagination|pager"
    r"|(?:^|[-_ ])tags?(?:$|[-_ ])|byline|author|login|skip|outbrain|taboola|disqus|rating"
    r"|print|follow|most-?popular|trending|teaser|caption|credit|gallery|slideshow|carousel"
    r"|(?:^|[-_ ])(?:date|time|timestamp|dateline)(?:$|[-_ ])",
    re.IGNORECASE,
)
# Chrome words naming other pages or an action on this one, whatever they promote.
_PROMOTION_WORDS: Final = re.compile(
    r"share|sharing|social|related|recommend|promo|advert|sponsor|newsletter|subscri"
    r"|most-?popular|trending|outbrain|taboola",
    re.IGNORECASE,
)
# A thread of readers' comments: not the article, however long it grows.
_THREAD_WORDS: Final = re.compile(
    r"comment|disqus|(?:^|[-_ ])(?:respond|replies|discussion|reactions)(?:$|[-_ ])",
    re.IGNORECASE,
)
# Names of a whole thread, which a content word beside them does not redeem.
_THREAD_NAMES: Final = re.compile(
    r"comments?[-_]?(?:area|list|section|thread|wrap|container|block|holder)|disqus",
    re.IGNORECASE,
)
_CONTENT_WORDS: Final = re.compile(
    r"article|body|content|entry|main|post|story|text|blog|column|shadow", re.IGNORECASE
)
_POSITIVE: Final = re.compile(
    r"article|body|content|entry|hentry|h-entry|main|page|pagination|post|text|blog|story",
    re.IGNORECASE,
)
_NEGATIVE: Final = re.compile(
    r"-ad-|hidden|^hid$| hid$| hid |^hid |banner|combx|comment|com-|contact|foot|footer"
    r"|footnote|gdpr|masthead|media|meta|outbrain|promo|related|scroll|share|shoutbox|sidebar"
    r"|skyscraper|sponsor|shopping|tags|tool|widget|byline|author|caption|social|newsletter"
    r"|subscribe|recommend",
    re.IGNORECASE,
)

# Blocks whose own text does not make their parent the main block.
_UNSCORED: Final = frozenset(
    {"li", "h1", "h2", "h3", "h4", "h5", "h6", "th", "dt", "caption", "figcaption", "body", "html"}
)
# The blocks whose own run can score: the scoring asks lxml for these alone (an inline
# element, most of a page's, never scores), in document order.
_SCORED_SET: Final = BLOCK_ELEMENTS - _UNSCORED
# Blocks whose text straight inside counts as a paragraph of their own: every block of the
# writer (markdown.BLOCK_ELEMENTS) but the document's frame, the table's inner parts, and the
# legacy and summary blocks whose text is a label rather than prose.
_BLOCK_TAGS: Final = BLOCK_ELEMENTS - {
    "body",
    "html",
    "caption",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "tr",
    "center",
    "dir",
    "legend",
    "listing",
    "menu",
    "plaintext",
    "search",
    "summary",
    "xmp",
}
_TAG_WEIGHT: Final = {
    "div": 5,
    "article": 10,
    "main": 5,
    "section": 3,
    "pre": 3,
    "td": 3,
    "blockquote": 3,
    "address": -3,
    "ol": -3,
    "ul": -3,
    "dl": -3,
    "dd": -3,
    "dt": -3,
    "li": -3,
    "form": -3,
    "h1": -5,
    "h2": -5,
    "h3": -5,
    "h4": -5,
    "h5": -5,
    "h6": -5,
    "th": -5,
}
_MIN_BLOCK: Final = 25
# The share of links that makes a list item a teaser of another page.
_TEASER_LINKS: Final = 0.25
# Blocks whose own text is a label, not running text.
_NOT_PROSE: Final = frozenset(
    {"h1", "h2", "h3", "h4", "h5", "h6", "th", "caption", "figcaption", "body", "html"}
)
_TEXT_HOLDERS: Final = frozenset({"p", "pre", "blockquote", "table"})
# The elements whose inline run is measured: every block, and links (a link's run is its
# text as a link, which then joins the run around it).
_RUN_OWNERS: Final = BLOCK_ELEMENTS | {"a"}
_TAG: Final = attrgetter("tag")
_TEXT: Final = attrgetter("text")
_TAIL: Final = attrgetter("tail")
_PARENT: Final = etree._Element.getparent
# The blocks whose run is running text when long enough and not mostly links.
_PROSE_TAGS: Final = BLOCK_ELEMENTS - _NOT_PROSE
# An element holding this share of the body's text, or this share of its running text, is
# never removed as chrome by a guess: a name alone does not remove the article.
_GUARD_SHARE: Final = 0.4
_GUARD_PROSE: Final = 0.5
_GUARD_PLAIN: Final = 0.2
_GUARD_DENSITY: Final = 0.25
# A comment thread goes unless it is (nearly) the whole page, a forum's thread.
_THREAD_GUARD: Final = 0.9


@attrs.frozen
class MainBlock:
    """The elements of the main block, in document order, and the page's first heading."""

    elements: tuple[Element, ...]
    heading: str | None


class _Column:
    """One measure of every element, read like a dict keyed by element (a missing element
    reads as the default). The dense measures of a page share one index and sit in arrays
    of machine integers: at the node bound (LIM-F10) a dict of 100,000 entries costs about
    5 MiB of a parse, an array under the shared index under 1 MiB (issue 23.2)."""

    __slots__ = ("index", "values")

    def __init__(self, index: dict[Element, int], values: array[int]) -> None:
        self.index = index
        self.values = values

    def __getitem__(self, element: Element) -> int:
        return self.values[self.index[element]]

    def get(self, element: Element, default: int = 0) -> int:
        row = self.index.get(element)
        return default if row is None else self.values[row]


class _Stats:
    """Lengths of every element of the tree under `root` (the root included).

    `text` is the length of all the text under an element and `links` the part of it inside
    links; `inline` and `commas` count only the element's own run of inline content (its
    text, its inline children, the tails of its children), which is what a reader sees as
    the element's paragraph. `prose` is the running text under an element (the runs of its
    blocks that are long enough and not mostly links). `all_commas` counts the commas of all
    the text under the parts the cleaning judges (paragraphs, divisions, lists…): measured
    here, the text is not read again from the tree; like `inline`, it is a small dict, kept
    only where there are commas.

    Measured by columns, not by a walk: each element's row is its place in document order,
    so the rows under an element are the ones from its own to `end[row]`, and a sum over a
    subtree is the difference of two running totals. Each per-element quantity is one list
    comprehension or a short loop over plain lists (the text and tail of each element read
    once), instead of a walk doing all of it per element in Python (issue 17: at the node
    bound, about 60 ms against 200). Every sum is of integers, so the order in which it is
    taken does not change it: the measures are those of the leaves-up walk this replaced.

    The measures every element has (`text`, `links`, `prose`) are columns of machine
    integers under one index, not a dict each (issue 23.2). `inline` and `commas` are
    stored only where the run is long enough to score, so they stay small dicts (read with
    a default of 0).
    """

    def __init__(self, root: Element) -> None:
        # Elements only, as the walks read them (comments and processing instructions, and
        # their tails, are no text of the page here). Each column below is made by `map` over
        # the one before where it can be (the loop in C, not in Python).
        elements: list[Element] = list(root.iter(etree.Element))
        self.elements = elements
        count = len(elements)
        # (Filled backwards: a dict lets go of its keys in the order they came, and lxml
        # frees a removed subtree's nodes as their last proxies go. Let go of from the leaves
        # up, each finds a proxy above it at once; from the top down, each searched the
        # subtree past those gone before it, which cost the square of a removed part's
        # size.)
        self.index: dict[Element, int] = dict(
            zip(reversed(elements), range(count - 1, -1, -1), strict=True)
        )
        index = self.index
        tags: list[str] = list(map(_TAG, elements))
        self.tags = tags
        # Whether each element has attributes (most have none: no name, role or address to
        # judge it by, which the steps below need not ask it for).
        self.attributed: list[int] = list(map(len, map(_ATTRIB, elements)))
        # Each row's parent row (the root's: -1, its parent being outside the measure).
        parent: list[int] = [-1]
        parent += map(index.__getitem__, map(_PARENT, elements[1:]))
        # The end of each subtree: one past its last row (its last child's end, reached
        # first going backwards).
        end = list(range(1, count + 1))
        for row in range(count - 1, 0, -1):
            up = parent[row]
            if end[up] < end[row]:
                end[up] = end[row]
        self.end = end
        self.parent = parent

        texts = [text or "" for text in map(_TEXT, elements)]
        own = list(map(len, map(str.strip, texts)))
        own_commas = list(map(str.count, texts, repeat(",")))
        del texts
        tails = [text or "" for text in map(_TAIL, elements)]
        tails[0] = ""  # the root's tail is outside it
        tail = list(map(len, map(str.strip, tails)))
        tail_commas = list(map(str.count, tails, repeat(",")))
        del tails

        # All the text under each element: its rows' texts and tails, less its own tail.
        running = [0, *accumulate(map(add, own, tail))]
        text_of = list(map(sub, map(sub, map(running.__getitem__, end), running), tail))
        running = [0, *accumulate(map(add, own_commas, tail_commas))]
        all_commas = list(map(sub, map(sub, map(running.__getitem__, end), running), tail_commas))

        # Link text: a link's whole text, and under any other element its links' (the
        # outermost ones: a link inside a link is its text already).
        is_link = list(map("a".__eq__, tags))
        link_rows = list(compress(range(count), is_link))
        # Whether a link holds another: the links under each link, summed, are the links
        # themselves when none does.
        running = list(accumulate(is_link, initial=0))
        nested = sum(map(running.__getitem__, map(end.__getitem__, link_rows))) - sum(
            map(running.__getitem__, link_rows)
        ) > len(link_rows)
        if not nested:
            running = list(accumulate(map(mul, text_of, is_link), initial=0))
            links_of = list(map(sub, map(running.__getitem__, end), running))
        else:
            links_of = [0] * count
            below = [0] * count
            for row in range(count - 1, -1, -1):
                value = text_of[row] if tags[row] == "a" else below[row]
                links_of[row] = value
                if row:
                    below[parent[row]] += value

        # The runs. Each text belongs to the run of its nearest block or link (itself, or
        # the nearest above it: an inline element's run is its container's), a tail to its
        # parent's; a link's run then joins the run around it. (The root has a run of its
        # own, whatever it is.) Most elements of a page at the node bound own their run: only
        # the others, and the tails, are walked.
        owns = list(map(_RUN_OWNERS.__contains__, tags))
        owns[0] = True
        owner = list(range(count))
        inner = list(compress(range(count), map(not_, owns)))
        for row in inner:
            owner[row] = owner[parent[row]]
        inline = list(map(mul, own, owns))
        commas = list(map(mul, own_commas, owns))
        for row in inner:
            if own[row]:
                inline[owner[row]] += own[row]
                commas[owner[row]] += own_commas[row]
        # (A tail with a comma is not empty once stripped.)
        for row in compress(range(count), tail):
            into = owner[parent[row]]
            inline[into] += tail[row]
            commas[into] += tail_commas[row]
        inline_links = [0] * count
        for row in reversed(link_rows):
            if row:
                # Backwards: a link inside a link has joined its run before it joins its own.
                into = owner[parent[row]]
                inline[into] += inline[row]
                commas[into] += commas[row]
                inline_links[into] += inline[row]

        # The running text: the runs of the blocks that are long enough and not mostly
        # links, summed over each subtree; an item that is a quarter links (a teaser of
        # another page, a title and its summary) counts none of the runs under it.
        runs = list(compress(range(count), map(le, repeat(_MIN_BLOCK), inline)))
        counted = [0] * count
        for row in runs:
            tag = tags[row]
            length = inline[row]
            if (
                tag in _PROSE_TAGS
                and inline_links[row] < (_TEASER_LINKS if tag == "li" else 0.5) * length
            ):
                counted[row] = length
        resets = [
            row
            for row in compress(range(count), map("li".__eq__, tags))
            if not counted[row] and links_of[row] >= _TEASER_LINKS * text_of[row]
        ]
        running = list(accumulate(counted, initial=0))
        prose_of = list(map(sub, map(running.__getitem__, end), running))
        if resets:
            # What a reset item holds, less what the reset items inside it hold (taken
            # off already by them): summed over a subtree, this takes off exactly what its
            # outermost reset items hold.
            taken = [0] * count
            outermost: list[int] = []  # the reset rows seen, none inside another
            for row in reversed(resets):
                stop = end[row]
                held = running[stop] - running[row]
                inside = 0
                while outermost and outermost[-1] < stop:
                    inner_row = outermost.pop()
                    inside += running[end[inner_row]] - running[inner_row]
                taken[row] = held - inside
                outermost.append(row)
            running = list(accumulate(taken, initial=0))
            prose_of = list(map(sub, prose_of, map(sub, map(running.__getitem__, end), running)))

        # The runs by row, and the rows whose run is long enough to score, in document order.
        self.inline = inline
        self.commas = commas
        self.runs = runs
        self.all_commas = all_commas
        # The rows holding a paragraph, code, a quote or a table, as running totals (a
        # figure that holds one is content, not an illustration).
        self._holders = list(accumulate(map(_TEXT_HOLDERS.__contains__, tags), initial=0))
        self.text = _Column(index, array("i", text_of))
        self.links = _Column(index, array("i", links_of))
        self.prose = _Column(index, array("i", prose_of))

    def holds_text(self, element: Element) -> bool:
        """Whether a paragraph, code, a quote or a table is under `element`."""
        row = self.index[element]
        return self._holders[self.end[row]] > self._holders[row + 1]

    def density(self, element: Element) -> float:
        length = self.text.get(element, 0)
        return self.links.get(element, 0) / length if length else 0.0


def _class_weight(element: Element) -> int:
    if not element.attrib:
        # Most elements have no attribute at all: asking whether there are any is one call,
        # asking for the class and the id two.
        return 0
    names = element.get("class")
    ident = element.get("id")
    if names is None and ident is None:
        return 0  # most elements: no call of the cached weighing
    return _words_weight(names) + _words_weight(ident)


@functools.lru_cache(maxsize=4096)
def _words_weight(value: str | None) -> int:
    weight = 0
    if value:
        if _NEGATIVE.search(value):
            weight -= 25
        if _POSITIVE.search(value):
            weight += 25
    return weight


def _chrome_kind(element: Element, stats: _Stats) -> int:
    """0: content; 1: chrome by a guess (a form, a figure, class or id words), removed
    unless it holds much of the page; 2: chrome by its element or role, always removed;
    3: a comment thread by its name, removed unless it is nearly the whole page."""
    tag = element.tag
    if tag in CHROME_ELEMENTS:
        return 2
    if tag == "form":
        return 1
    if tag == "figure":
        # A figure is an illustration and its caption, unless it holds text of its own.
        return 0 if stats.holds_text(element) else 1
    if tag != "a" and not element.attrib:
        # Most elements: no role, class or id to judge by (one call, not three). A link has
        # its address: asking whether it has attributes would be one call more.
        return 0
    role = element.get("role")
    if role is not None and role.strip().lower() in CHROME_ROLES:
        return 2
    if tag in ("body", "html", "article", "main", "a"):
        return 0
    names = element.get("class")
    ident = element.get("id")
    if names is None and ident is None:
        return 0  # no name to judge by (an articleBody without one is content anyway)
    if element.get("itemprop", "").lower() == "articlebody":
        return 0
    words = f"{names or ''} {ident or ''}".strip()
    return _chrome_words(words) if words else 0


@functools.lru_cache(maxsize=4096)
def _chrome_words(words: str) -> int:
    # Pages repeat their class names; the cache spares the regexes most of their work.
    # A content word counts only in a name without a word for other pages or for acting on
    # this one: beside such a word it says what is promoted or shared ("related-posts",
    # "post-share", "article-most-popular"), not that the element is the content. (A
    # post's own parts keep it: "entry-date", "post-author" may wrap the post.)
    content = any(
        _CONTENT_WORDS.search(name) and not _PROMOTION_WORDS.search(name) for name in words.split()
    )
    if _THREAD_WORDS.search(words) and (not content or _THREAD_NAMES.search(words)):
        return 3
    return 1 if _CHROME_WORDS.search(words) and not content else 0


def _drop_all(doomed: list[Element]) -> None:
    """Remove the `doomed` elements (in document order, none inside another) but keep their
    tail text in place.

    A tail goes to the nearest kept sibling before it, or to the parent's text: removed in
    document order, the earlier of a run of removed siblings are gone when a later one is,
    so its previous sibling is the one kept. The tails bound for one place are joined once
    at the end: appending each to a growing string would copy it again for every removed
    sibling, quadratic in a run of thousands of them.
    """
    pieces: dict[tuple[Element, bool], list[str]] = {}
    for element in doomed:
        parent = element.getparent()
        if parent is None:
            continue
        tail = element.tail
        if tail:
            previous = element.getprevious()
            target = (parent, True) if previous is None else (previous, False)
            pieces.setdefault(target, []).append(tail)
        # (lxml's remove takes the tail along, out of the tree: it is not set to None.)
        parent.remove(element)
    for (element, as_text), texts in pieces.items():
        if as_text:
            element.text = (element.text or "") + "".join(texts)
        else:
            element.tail = (element.tail or "") + "".join(texts)


def _outermost(root: Element, marked: set[Element]) -> list[Element]:
    """The marked elements under `root` that are inside no other marked one, in document
    order (one pass)."""
    found: list[Element] = []
    inside: set[Element] = set()
    for element in root.iterdescendants():
        parent = element.getparent()
        if parent in inside:
            inside.add(element)
        elif element in marked:
            found.append(element)
            inside.add(element)
    return found


def _much_prose(element: Element, stats: _Stats, prose: int) -> bool:
    """Whether `element` holds too much of the page's running text to go by a name: half
    of it, or a fifth of it in text that is not links (a section named "sharing…")."""
    share = stats.prose[element]
    return share >= prose * _GUARD_PROSE or (
        share >= prose * _GUARD_PLAIN and stats.density(element) < _GUARD_DENSITY
    )


# The running text a declared article keeps outside a part for the part to be one of its
# parts (about five paragraphs: an article's worth), not the wrapper of its text.
_DECLARED_REST: Final = 1000


def _part_of_declared_body(element: Element, stats: _Stats) -> bool:
    """Whether `element` is a part inside the page's declared article body (the nearest
    enclosing ``itemprop="articleBody"``) that leaves an article's worth of running text
    outside it. (Not ``<article>``: themes wrap a whole column, sidebar included, in one.)

    The guard against removing by a name protects the block that holds the article: a
    wrapper named ``share_wrapper`` or ``date-outer``. Inside an article the page itself
    declares, a part that leaves a whole article beside it is not that wrapper, and its name
    is judged as the names of the article's other parts are: a gallery widget of fifty
    captioned pictures goes, however much text its captions hold. Called only for the few
    elements the guard keeps, so walking up their ancestors stays cheap.
    """
    ancestor = element.getparent()
    while ancestor is not None:
        if "articlebody" in ancestor.get("itemprop", "").lower().split():
            rest = stats.prose.get(ancestor, 0) - stats.prose.get(element, 0)
            return rest >= _DECLARED_REST
        ancestor = ancestor.getparent()
    return False


# The elements `_chrome_kind` can find chrome by their name alone (the others need an
# attribute to be).
_CHROME_TAGS: Final = CHROME_ELEMENTS | {"form", "figure"}
_ATTRIB: Final = attrgetter("attrib")


def _remove_chrome(body: Element, stats: _Stats) -> bool:
    """Remove the chrome under `body` (measured by `stats`); whether anything went."""
    guard = stats.text.get(body, 0) * _GUARD_SHARE
    prose = stats.prose.get(body, 0)
    thread_guard = prose * _THREAD_GUARD
    # The containers of the page's first h1: a comment thread never holds the article's
    # title, so one of them named for comments ("comments-open") is judged as a guess.
    titled: set[Element] = set()
    heading = next(body.iter("h1"), None)
    while heading is not None and heading is not body:
        titled.add(heading)
        heading = heading.getparent()
    # The elements that can be chrome (`_chrome_kind` finds every other one content): those
    # of a chrome element's name, a form or a figure, and those with attributes (most
    # elements of a page have none), found by `map` over the measured rows.
    elements = stats.elements
    tags = stats.tags
    end = stats.end
    text_of = stats.text.values
    links_of = stats.links.values
    prose_of = stats.prose.values
    # (A link is judged by its role alone: most links have attributes, an address, and
    # nothing else to be judged by.)
    attributed = stats.attributed
    named = attributed[1:]
    roled: list[int] = []
    if "a" in tags:
        named = list(map(mul, named, map("a".__ne__, tags[1:])))
        roled = [
            row
            for row in compress(range(1, len(tags)), map("a".__eq__, tags[1:]))
            if attributed[row] and elements[row].get("role") is not None
        ]
    candidates = sorted(
        chain(
            compress(
                range(1, len(tags)), map(or_, map(_CHROME_TAGS.__contains__, tags[1:]), named)
            ),
            roled,
        )
    )
    # In document order, a removed element's subtree skipped: what it holds goes with it,
    # and the list is of the outermost ones only.
    doomed: list[Element] = []
    after = 0
    # The kind of an element that is not a link, a chrome element, a form or a figure
    # depends on its name and attributes alone: pages repeat them (100,000 siblings named
    # "share" are judged once), most often a single class.
    kinds: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    for row in candidates:
        if row < after:
            continue  # inside an element removed already
        element = elements[row]
        tag = tags[row]
        if tag == "a" or tag in _CHROME_TAGS or attributed[row] != 1:
            # (Links, chrome names, and elements with several attributes, whose sets rarely
            # repeat: an address, a source, an id.)
            kind = _chrome_kind(element, stats)
        else:
            key = (tag, tuple(element.items()))
            kind = kinds.get(key, -1)
            if kind < 0:
                kind = kinds[key] = _chrome_kind(element, stats)
        if not kind:
            continue  # most elements: content
        if kind == 3 and element in titled:
            kind = 1
        if kind == 1:
            length = text_of[row]
            share = prose_of[row]
            density = links_of[row] / length if length else 0.0
            much_prose = share >= prose * _GUARD_PROSE or (
                share >= prose * _GUARD_PLAIN and density < _GUARD_DENSITY
            )
            gone = (length <= guard and not much_prose) or _part_of_declared_body(element, stats)
        else:
            gone = kind == 2 or (kind == 3 and (not prose or prose_of[row] < thread_guard))
        if gone:
            doomed.append(element)
            after = end[row]
    _drop_all(doomed)
    return bool(doomed)


def _block_text(element: Element) -> str:
    return str(element.xpath("string()"))


# What a run's score is divided by for its parent, grandparent and the three above them.
_DIVIDERS: Final = (1, 2, 6, 9, 12)


class _Scores:
    """The containers' scores, read like a dict keyed by element (`get`, `[]`), held by row
    of the measure (`_Stats`): at the node bound a dict of 100,000 elements cost more to
    build than the scoring itself. The rows are in the order they were first scored, which
    breaks ties between equal scores as a dict's order did."""

    __slots__ = ("by_row", "elements", "index")

    def __init__(self, by_row: dict[int, float], stats: _Stats) -> None:
        self.by_row = by_row
        self.index = stats.index
        self.elements = stats.elements

    def __len__(self) -> int:
        return len(self.by_row)

    def __getitem__(self, element: Element) -> float:
        return self.by_row[self.index[element]]

    @overload
    def get(self, element: Element) -> float | None: ...

    @overload
    def get(self, element: Element, default: float) -> float: ...

    def get(self, element: Element, default: float | None = None) -> float | None:
        row = self.index.get(element)
        if row is None:
            return default
        return self.by_row.get(row, default)

    def best(self) -> Element:
        """The best-scored element (the first scored of equals)."""
        by_row = self.by_row
        return self.elements[max(by_row, key=by_row.__getitem__)]

    def largest(self, count: int) -> list[Element]:
        """The `count` best-scored elements, best first (equals in the order scored)."""
        by_row = self.by_row
        return [self.elements[row] for row in heapq.nlargest(count, by_row, key=by_row.__getitem__)]


def _score_candidates(body: Element, stats: _Stats) -> tuple[_Scores, _Column]:
    """Each container's score, and the length of the paragraph text under each element.

    Scored by rows of the measure (`body` is its root): the same additions, in the same
    order (document order of the scoring blocks, each to its ancestors nearest first), so
    the same floating-point sums, without an element proxy or a dict keyed by element per
    step."""
    scores: dict[int, float] = {}
    elements = stats.elements
    tags = stats.tags
    parent = stats.parent
    prose_of = stats.prose.values

    most = prose_of[0] * _GUARD_PROSE

    attributed = stats.attributed

    def initial(row: int) -> float:
        if not attributed[row]:
            return _TAG_WEIGHT.get(tags[row], 0)  # most elements: no name to weigh
        element = elements[row]
        names = element.get("class")
        ident = element.get("id")
        if names is None and ident is None:
            return _TAG_WEIGHT.get(tags[row], 0)  # most elements: no name to weigh
        weight = _words_weight(names) + _words_weight(ident)
        if weight < 0 and most and prose_of[row] >= most:
            # A name does not count against the block holding most of the running text.
            weight = 0
        return _TAG_WEIGHT.get(str(tags[row]), 0) + weight

    inline_of = stats.inline
    commas_of = stats.commas
    # In document order (the order breaks ties between equal scores), the blocks that can
    # score: those whose run is long enough.
    for row in stats.runs:
        tag = tags[row]
        if tag not in _SCORED_SET:
            continue
        length = inline_of[row]
        score = 1.0 + commas_of[row] + min(length // 100, 3)
        if tag in _BLOCK_TAGS and tag != "p":
            # Text straight inside a container is a paragraph of that container.
            if row in scores:
                scores[row] += score
            elif attributed[row]:
                scores[row] = initial(row) + score
            else:
                scores[row] = _TAG_WEIGHT.get(tag, 0) + score
        # The measured tree's parents: the root's own is outside it (-1).
        ancestor = parent[row]
        for divider in _DIVIDERS:
            if ancestor < 0:
                break
            if ancestor not in scores:
                scores[ancestor] = initial(ancestor)
            scores[ancestor] += score / divider
            ancestor = parent[ancestor]
    text_of = stats.text.values
    links_of = stats.links.values
    rows = list(scores)
    weighed = dict(
        zip(
            rows,
            [
                score * (1 - links / length) if length else score
                for score, links, length in zip(
                    scores.values(),
                    map(links_of.__getitem__, rows),
                    map(text_of.__getitem__, rows),
                    strict=True,
                )
            ],
            strict=True,
        )
    )
    return _Scores(weighed, stats), stats.prose


def _narrow(top: Element, good: _Column, stats: _Stats) -> Element:
    """The descendant of `top` that holds nearly all its paragraph text."""
    # By rows of the measure (`good` is its column): `top` may have 100,000 children
    # (LIM-F10), and a child's row is the one after its parent's, the next child's the one
    # after its subtree's (`end`), with no element proxy made for them.
    row = good.index.get(top)
    if row is None:
        return top
    good_of = good.values
    end = stats.end
    while True:
        total = good_of[row]
        if not total:
            break
        child = row + 1
        stop = end[row]
        while child < stop:
            if good_of[child] >= 0.9 * total:
                row = child
                break
            child = end[child]
        else:
            break
    return stats.elements[row]


def _ancestors(element: Element) -> list[Element]:
    chain = []
    parent = element.getparent()
    while parent is not None:
        chain.append(parent)
        parent = parent.getparent()
    return chain


def _merge_parts(top: Element, best: float, scores: _Scores, good: _Column) -> Element:
    """A container of `top` and the other parts of a story split across containers.

    A page may cut its story into chunks (around advertisements, a lead and a body, the
    sections of a reference page) in separate containers. The nearest common container of
    `top` and another well-scored, substantial part replaces `top` when the parts cover most
    of its paragraph text (it holds little else besides them).
    """
    # (`nlargest` is `sorted(…, reverse=True)[:12]`, ties in the same order, without
    # sorting every scored element of a page.)
    ranked = scores.largest(12)
    # Only a substantial part joins: a teaser or a boilerplate paragraph does not.
    least = max(0.4 * good.get(top, 0), 400)
    parts = [e for e in ranked if scores[e] >= 0.5 * best and good.get(e, 0) >= least]
    chains = {id(e): _ancestors(e) for e in [top, *parts]}
    for other in parts:
        top_chain = chains.setdefault(id(top), _ancestors(top))
        other_chain = chains[id(other)]
        if other is top or other in top_chain or top in other_chain:
            continue
        other_ids = {id(e) for e in other_chain}
        common = next((e for e in top_chain if id(e) in other_ids), None)
        if common is None or common.tag in ("html", "body"):
            continue
        inside = [e for e in [top, *parts] if common in chains.get(id(e), ())]
        outermost = [
            e for e in inside if not any(o is not e and o in chains[id(e)] for o in inside)
        ]
        if good.get(common, 0) <= 1.25 * sum(good.get(e, 0) for e in outermost):
            top = common
    return top


def _climb(top: Element, best: float, scores: _Scores, good: _Column, stats: _Stats) -> Element:
    """An ancestor of `top` that scores well in its own right and of whose paragraph text
    `top` holds less than 60 %: the page's content is larger than its best part (a
    reference page's description, its sections and its lists of items). Teasers beside
    `top` (list items headed by a link to another page) do not count as the ancestor's
    text: a list of other pages' summaries beside the story does not make the story a part
    of the page."""
    chain: list[Element] = []
    ancestor = top.getparent()
    while ancestor is not None and ancestor.tag not in ("body", "html"):
        score = scores.get(ancestor)
        if score is not None and score >= 0.4 * best:
            chain.append(ancestor)
        ancestor = ancestor.getparent()
    if not chain:
        return top
    teasers = _teaser_text(chain[-1], good, stats)
    for ancestor in chain:
        # The teasers beside `top`, not those inside it: a list of linked titles that is
        # itself the best block (an article of links with their summaries) is its text.
        beside = teasers.get(ancestor, 0) - teasers.get(top, 0)
        if good.get(top, 0) < 0.6 * (good.get(ancestor, 0) - beside):
            top = ancestor
    return top


_HEADINGS: Final = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})


def _teaser_text(root: Element, good: _Column, stats: _Stats) -> dict[Element, int]:
    """The paragraph text under each element of `root` that is in teasers: list items whose
    first heading is a link (a title leading to another page, above its summary). One walk;
    only elements holding teaser text are in the answer."""
    found: dict[Element, int] = {}
    # [teaser text, first heading: 0 none yet, 1 a link, 2 not a link] of each open element.
    stack: list[list[int]] = []
    for event, element in etree.iterwalk(root, events=("start", "end")):
        if event == "start":
            stack.append([0, 0])
            continue
        frame = stack.pop()
        tag = element.tag
        if tag in _HEADINGS:
            length = stats.text.get(element, 0)
            frame[1] = 1 if length and stats.links.get(element, 0) >= 0.8 * length else 2
        elif tag == "li" and frame[1] == 1:
            frame[0] = good.get(element, 0)
        if frame[0]:
            found[element] = frame[0]
        if not stack:
            break
        into = stack[-1]
        into[0] += frame[0]
        if not into[1]:
            into[1] = frame[1]
    return found


def _container_of(top: Element, good: _Column) -> Element:
    """An article (or articleBody) around `top` when `top` holds less than 80 % of its
    paragraph text."""
    ancestor = top.getparent()
    while ancestor is not None:
        if ancestor.tag == "article" or ancestor.get("itemprop", "").lower() == "articlebody":
            if good.get(top, 0) >= 0.8 * good.get(ancestor, 1):
                return top
            return ancestor
        ancestor = ancestor.getparent()
    return top


def _with_siblings(top: Element, scores: _Scores, stats: _Stats) -> list[Element]:
    parent = top.getparent()
    if parent is None:
        return [top]
    threshold = max(10.0, scores.get(top, 0.0) * 0.2)
    top_class = top.get("class")
    chosen: list[Element] = []
    for sibling in parent:
        if sibling is top:
            chosen.append(sibling)
            continue
        if not isinstance(sibling.tag, str):
            continue
        bonus = scores.get(top, 0.0) * 0.2 if top_class and sibling.get("class") == top_class else 0
        if scores.get(sibling, -1e9) + bonus >= threshold:
            chosen.append(sibling)
        elif sibling.tag == "p":
            length = stats.text.get(sibling, 0)
            density = stats.density(sibling)
            text = _block_text(sibling).strip()
            if (length > 80 and density < 0.25) or (
                0 < length <= 80 and density == 0 and re.search(r"\.( |$)", text)
            ):
                chosen.append(sibling)
    return chosen


# Cleaning that would leave less than this share of a block's text is not done.
_GUTTED: Final = 0.25
_CLEANED: Final = frozenset({"div", "section", "ul", "ol", "table", "dl", "figure", "aside"})
_CELLS: Final = frozenset({"td", "th"})
# What the cleaning walks through: the parts it judges, and the links (inside which all
# removed text is removed link text).
_JUDGED: Final = _CLEANED | {"p", "a"}


# The counts removed under a part that had nothing removed under it.
_NOTHING_REMOVED: Final = (0, 0, 0, 0, 0, 0)


def _clean(
    elements: Iterable[Element],
    scores: _Scores,
    good: _Column,
    stats: _Stats,
) -> None:
    """Remove the chrome-like parts left inside the main block (readability's conditional
    cleaning, in spirit).

    One pass over the block's rows backwards in document order (a part's descendants before
    it), visiting only the parts judged and the links: each part's counts are those of what
    it keeps, so a part removed below is already out of its container's counts, and the work
    stays linear in the size of the block however deep it is. The lengths and commas are not
    read from the tree again: a part's are its measured ones (`stats`; its paragraphs, images
    and items from running totals over the rows) less what was removed under it, which the
    pass keeps for the outermost parts seen so far (a stack, since the rows under a part are
    the ones up to its `end`). The parts are removed at the end, and not at all when that
    would leave under a quarter of the block's text.
    """
    row_of = stats.index
    text_of = stats.text.values
    links_of = stats.links.values
    commas_of = stats.all_commas
    tags = stats.tags
    end = stats.end
    measured = stats.elements
    attributed = stats.attributed
    good_of = good.values
    for root in elements:
        if not good.get(root):
            # Without paragraph text there is nothing to tell the content from the rest by.
            continue
        # A part holding this much of the block's paragraph text is the block, not chrome.
        keep = 0.3 * good[root]
        # The tables of data in the block: a division that is the content of one of their
        # cells (a figure, a name linked to its page) is judged with its table, not alone.
        data_tables = {table for table in root.iter("table") if _data_table(table, stats)}
        first = row_of[root]
        stop = end[first]
        # The paragraphs, images and items in the block's rows, as running totals from its
        # first row (those under a part: the difference at its two ends).
        block_tags = tags[first:stop]
        paragraphs = list(accumulate(map("p".__eq__, block_tags), initial=0))
        images = list(accumulate(map("img".__eq__, block_tags), initial=0))
        items = list(accumulate(map("li".__eq__, block_tags), initial=0))
        # The parts judged (paragraphs and _CLEANED parts) and the links (whose removed text
        # is all link text), children before their containers: backwards in document order.
        judged = [row for row, tag in enumerate(block_tags, first) if tag in _JUDGED]
        del block_tags
        # `starts` and `removed` hold, for what was seen and is inside no other seen part,
        # where it starts and what was removed in it: [text, link text, commas, p, img,
        # li]; a part's own are the measured ones less those of what it holds.
        starts: list[int] = []
        removed: list[list[int]] = []
        gone: list[int] = []
        for row in reversed(judged):
            if row == first:
                break  # the block itself is not judged
            last = end[row]
            inside: list[int] | None = None
            if starts and starts[-1] < last:
                inside = [0, 0, 0, 0, 0, 0]
                while starts and starts[-1] < last:
                    starts.pop()
                    held = removed.pop()
                    for column in range(6):
                        inside[column] += held[column]
            tag = tags[row]
            if tag == "a":
                if inside is not None:
                    # A link's text is all link text: what went from the one went from the
                    # other.
                    inside[1] = inside[0]
                    starts.append(row)
                    removed.append(inside)
                continue
            if tag == "p":
                length = text_of[row]
                links = links_of[row]
                if inside is not None:
                    length -= inside[0]
                    links -= inside[1]
                drop = bool(length) and links >= 0.8 * length
            elif (tag == "div" and data_tables and _in_data_cell(measured[row], data_tables)) or (
                keep and good_of[row] >= keep
            ):
                # A part of a table of data's cell, or one holding much of the block's
                # paragraph text: not judged.
                drop = False
            else:
                at = row - first
                element = measured[row]
                # The part's counts without what was removed under it.
                less = inside if inside is not None else _NOTHING_REMOVED
                drop = _should_drop(
                    element,
                    _class_weight(element) if attributed[row] else 0,
                    scores,
                    data_tables,
                    text_of[row] - less[0],
                    links_of[row] - less[1],
                    commas_of[row] - less[2],
                    paragraphs[last - first] - paragraphs[at] - less[3],
                    images[last - first] - images[at] - less[4],
                    items[last - first] - items[at] - less[5],
                )
            if drop:
                # A paragraph that is (almost) only a link promotes another page: "Read
                # more: …"; the other parts are judged by their counts. All it holds goes
                # from its container's counts (its tail stays).
                at = row - first
                gone.append(row)
                starts.append(row)
                removed.append(
                    [
                        text_of[row],
                        links_of[row],
                        commas_of[row],
                        paragraphs[last - first] - paragraphs[at],
                        images[last - first] - images[at],
                        items[last - first] - items[at],
                    ]
                )
            elif inside is not None:
                starts.append(row)
                removed.append(inside)
        remaining = text_of[first] - sum(held[0] for held in removed)
        if remaining < _GUTTED * stats.text.get(root, 0):
            # Cleaning would leave almost nothing: the block is a page of teasers or links
            # (an index, a directory), and its parts are its content.
            continue
        if gone:
            # The outermost of the parts to go, in document order.
            doomed: list[Element] = []
            after = -1
            for row in reversed(gone):
                if row >= after:
                    doomed.append(measured[row])
                    after = end[row]
            _drop_all(doomed)


def _should_drop(
    element: Element,
    weight: int,
    scores: _Scores,
    data_tables: set[Element],
    length: int,
    links: int,
    commas: int,
    paragraphs: int,
    images: int,
    items: int,
) -> bool:
    """Whether a part of the block looks like chrome by its counts (those of what it keeps:
    text, link text, commas, paragraphs, images, items) and its name (`weight`, its
    `_class_weight`; one call per part of a block that may be the whole page: what it asks
    is asked inline)."""
    if weight < 0 and weight + scores.get(element, 0.0) < 0:
        # Its name marks it and its text does not redeem it (a list's own tag weight is no
        # mark: a definition list of short terms is content).
        return _not_a_label(element)
    if commas >= 10:
        return False
    items -= 100
    density = links / length if length else 0.0
    tag = element.tag
    in_list = tag in ("ul", "ol")
    if (
        (images > 1 and paragraphs / images < 0.5)
        or (not in_list and items > paragraphs)
        or (
            weight < 25
            and density > 0.2
            and not (in_list and density < 0.5)
            and element not in data_tables
        )
        or (weight >= 25 and density > 0.5)
        or (length < _MIN_BLOCK and images == 0 and tag not in ("table", "ul", "ol"))
    ):
        return _not_a_label(element)
    return False


# The rows a table is judged by: a table of data is alike from top to bottom, and a table
# of 33,000 rows is not walked whole to learn it.
_TABLE_SAMPLE: Final = 64


def _data_table(table: Element, stats: _Stats) -> bool:
    """Whether `table` is a table of data whose links sit in one column (a list of files,
    apps or ferries with their sizes, dates and figures), not a grid of links: most of its
    first rows have two or more cells with text, and at most one of them is a link. Its own
    rows and cells only (a nested table is judged on its own)."""
    rows = 0
    data_rows = 0
    for row in _table_rows(table):
        filled = 0
        linked = 0
        for cell in row:
            if cell.tag not in _CELLS:
                continue
            length = stats.text.get(cell, 0)
            if not length:
                continue
            filled += 1
            if stats.links.get(cell, 0) >= 0.5 * length:
                linked += 1
        if filled:
            rows += 1
            if filled >= 2 and linked <= 1 and linked < filled:
                data_rows += 1
            if rows == _TABLE_SAMPLE:
                break
    return rows >= 3 and data_rows >= 0.8 * rows


def _table_rows(table: Element) -> Iterable[Element]:
    for child in table:
        if child.tag == "tr":
            yield child
        elif child.tag in ("thead", "tbody", "tfoot"):
            yield from (row for row in child if row.tag == "tr")


def _in_data_cell(element: Element, data_tables: set[Element]) -> bool:
    """Whether `element` is the content of a cell of one of `data_tables`."""
    cell = element.getparent()
    if cell is None or cell.tag not in _CELLS or not data_tables:
        return False
    table = cell.getparent()  # the row
    while table is not None and table.tag in ("tr", "tbody", "thead", "tfoot"):
        table = table.getparent()
    return table in data_tables


def _not_a_label(element: Element) -> bool:
    parent = element.getparent()
    # The label of a disclosure (an item's signature on a reference page) is content.
    return parent is None or parent.tag != "summary"


def _first_heading(body: Element) -> str | None:
    for heading in body.iter("h1"):
        text = " ".join(_block_text(heading).split())
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
    stats = _Stats(body)
    if _remove_chrome(body, stats):
        # The lengths are measured again without the chrome (one more linear pass); the old
        # ones go first, so that two sets are never alive at once (issue 23.2).
        del stats
        stats = _Stats(body)
    scores, good = _score_candidates(body, stats)
    if not scores:
        # Nothing long enough to score: the page is short, and all of it is content.
        return MainBlock(elements=(body,), heading=heading)
    top = scores.best()
    best = scores[top]
    if best <= 0 or top is root:
        # No paragraph text anywhere (a page of links, an index): the page is its content.
        return MainBlock(elements=(body,), heading=heading)
    top = _narrow(top, good, stats)
    top = _merge_parts(top, best, scores, good)
    top = _climb(top, best, scores, good, stats)
    top = _container_of(top, good)
    elements = _with_siblings(top, scores, stats) if top is not body else [body]
    chosen = sum(stats.text.get(element, 0) for element in elements)
    if chosen < _SCRAP and stats.text.get(body, 0) >= _SCRAP_RATIO * max(chosen, 1):
        # A scrap of a page ten times its length is not its content: a section front whose
        # teasers are written as links (titles and summaries alike) has next to no paragraph
        # text, and its best "paragraph" is a date line. The page is its content, as when
        # it has no paragraph text at all; the cleaning below still takes its link blocks.
        elements = [body]
    _clean(elements, scores, good, stats)
    return MainBlock(elements=tuple(elements), heading=heading)
