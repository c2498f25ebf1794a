"""Chrome removal, the first step of the main block (REQ-CTX-005, REQ-FETCH-002).

Navigation, headers, footers, sidebars, menus, dialogs and captions go by element (nav,
header, footer, aside, menu, dialog, figcaption) and by ARIA role (navigation, banner,
contentinfo, complementary, search…), whatever they hold. Forms, figures and elements whose
class or id words name chrome (menu, sidebar, share, related…, unless a content word such as
article, content or post is there too, in a name without a word for other pages or for
sharing: "related-posts" is chrome) go as well unless they hold 40 % of the page's text,
half its running text, or a fifth of it with few links: a name is a guess, and a site that
puts its article in a ``<form>`` or names its wrapper ``date-outer`` or ``share_wrapper``
keeps it; inside a declared article body (``itemprop="articleBody"``), a part that leaves an
article's worth of running text beside it is judged by its name alone (a gallery widget). A
comment thread goes whatever its length, unless it is nearly the whole page.
"""

from __future__ import annotations

import bisect
import functools
import re
from itertools import accumulate, chain, compress
from operator import mul, or_
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from rypsok.core.fetch.mainblock.measure import Element, Stats

__all__ = [
    "CHROME_ELEMENTS",
    "CHROME_ROLES",
    "GUARD_PROSE",
    "WRAPPER_PARAGRAPHS",
    "WRAPPER_PROSE",
    "entry_rows",
    "names_a_decoration",
    "remove_chrome",
]

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
# An element holding this share of the body's text, or this share of its running text, is
# never removed as chrome by a guess: a name alone does not remove the article.
_GUARD_SHARE: Final = 0.4
GUARD_PROSE: Final = 0.5
_GUARD_PLAIN: Final = 0.2
_GUARD_DENSITY: Final = 0.25
# A comment thread goes unless it is (nearly) the whole page, a forum's thread.
_THREAD_GUARD: Final = 0.9


def _chrome_kind(element: Element, stats: Stats) -> int:
    """0: content; 1: chrome by a guess (a form, a figure, class or id words), removed
    unless it holds much of the page; 2: chrome by its element or role, always removed;
    3: a comment thread by its name, removed unless it is nearly the whole page."""
    tag = element.tag
    if tag in CHROME_ELEMENTS:
        if tag == "header" and next(element.iterancestors("article", "main"), None) is not None:
            # An article's own header is its headline, dek and lead: content (its chrome,
            # a byline or a share bar, goes by its own name).
            return 0
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


# The running text a declared article keeps outside a part for the part to be one of its
# parts (about five paragraphs: an article's worth), not the wrapper of its text.
_DECLARED_REST: Final = 1000


def _part_of_declared_body(element: Element, stats: Stats) -> bool:
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


def remove_chrome(body: Element, stats: Stats) -> Stats:
    """Remove the chrome under `body` (measured by `stats`); the measures of what is left:
    `stats` itself when nothing went, else new ones (`stats` is then spent: `Stats.without`)."""
    doomed = _chrome(body, stats)
    if not doomed:
        stats.settle()
        return stats
    return stats.without(doomed)


def _chrome(body: Element, stats: Stats) -> list[Element]:
    """The chrome under `body`: the outermost elements, in document order.
    (Apart from `remove_chrome`: what the judging holds of the measure goes with this
    call, before the measure is spent.)"""
    elements = stats.elements
    tags = stats.tags
    end = stats.end
    attributed = stats.attributed
    judge = _Judge(body, stats)
    # In document order, a removed element's subtree skipped: what it holds goes with it,
    # and the list is of the outermost ones only.
    doomed: list[Element] = []
    after = 0
    # The kind of an element that is not a link, a chrome element, a form or a figure
    # depends on its name and attributes alone: pages repeat them (100,000 siblings named
    # "share" are judged once), most often a single class.
    kinds: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    for row in _candidate_rows(stats):
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
        if kind and judge.goes(row, element, kind):
            doomed.append(element)
            after = end[row]
    return doomed


class _Judge:
    """Whether an element of a chrome kind goes, against the page's measures."""

    __slots__ = (
        "entries",
        "guard",
        "links_of",
        "mains",
        "paragraph_totals",
        "prose",
        "prose_of",
        "stats",
        "text_of",
        "thread_guard",
        "titled",
    )

    def __init__(self, body: Element, stats: Stats) -> None:
        self.stats = stats
        # The columns read per element judged (tens of thousands of named regions at the
        # node bound), held here rather than looked up through `stats` each time.
        self.text_of = stats.text.values
        self.links_of = stats.links.values
        self.prose_of = stats.prose.values
        self.guard = stats.text.get(body, 0) * _GUARD_SHARE
        self.prose = stats.prose.get(body, 0)
        self.thread_guard = self.prose * _THREAD_GUARD
        # The containers of the page's first h1: a comment thread never holds the article's
        # title, so one of them named for comments ("comments-open") is judged as a guess.
        self.titled: set[Element] = set()
        heading = next(body.iter("h1"), None)
        while heading is not None and heading is not body:
            self.titled.add(heading)
            heading = heading.getparent()
        self.entries = _Entries(stats)
        self.paragraph_totals: list[int] | None = None
        # The rows of the page's <main> elements (one, most often none).
        tags = stats.tags
        self.mains = (
            list(compress(range(len(tags)), map("main".__eq__, tags))) if "main" in tags else []
        )

    def goes(self, row: int, element: Element, kind: int) -> bool:
        prose_of = self.prose_of
        prose = self.prose
        if kind == 3 and element in self.titled:
            kind = 1
        if kind == 1:
            return self._guess_goes(row, element)
        if kind == 2:
            # Removed by its element or role, unless it wraps the page: a header or a nav the
            # parser could not close at its end tag (misnested markup inside it) holds the
            # rest of the page, the article with it.
            end = self.stats.end[row]
            return not (
                (prose and prose_of[row] >= prose * GUARD_PROSE)
                or any(row < main < end for main in self.mains)
            )
        return not prose or prose_of[row] < self.thread_guard

    def _paragraphs(self, row: int) -> int:
        """The paragraphs of prose under the element at `row` (the totals are counted when
        first asked: only a decoration holding much running text asks)."""
        totals = self.paragraph_totals
        if totals is None:
            totals = self.paragraph_totals = _paragraph_totals(self.stats)
        return totals[self.stats.end[row]] - totals[row + 1]

    def _guess_goes(self, row: int, element: Element) -> bool:
        """A name is a guess: the element goes unless it holds much of the page, holds the
        post (a region is protected by what it holds, not by its size), or is a decoration
        wrapping the post's paragraphs."""
        prose = self.prose
        length = self.text_of[row]
        share = self.prose_of[row]
        density = self.links_of[row] / length if length else 0.0
        much_prose = share >= prose * GUARD_PROSE or (
            share >= prose * _GUARD_PLAIN and density < _GUARD_DENSITY
        )
        placed = self.entries.place(row)
        return (
            placed != _HOLDS
            and (
                (length <= self.guard and not much_prose)
                or _part_of_declared_body(element, self.stats)
                or (placed == _BESIDE and element not in self.titled)
            )
            and not (
                placed != _BESIDE
                and share >= WRAPPER_PROSE
                and names_a_decoration(element)
                and self._paragraphs(row) >= WRAPPER_PARAGRAPHS
            )
        )


def _candidate_rows(stats: Stats) -> list[int]:
    """The rows that can be chrome, in document order (`_chrome_kind` finds every other
    one content)."""
    # The elements that can be chrome (`_chrome_kind` finds every other one content): those
    # of a chrome element's name, a form or a figure, and those with attributes (most
    # elements of a page have none), found by `map` over the measured rows.
    elements = stats.elements
    tags = stats.tags
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
    return sorted(
        chain(
            compress(
                range(1, len(tags)), map(or_, map(_CHROME_TAGS.__contains__, tags[1:]), named)
            ),
            roled,
        )
    )


# Names of the container of a post or an article's text (not of its teasers): a blog's
# post body, a news page's article body, microformats' entry.
_ENTRY_NAMES: Final = re.compile(
    r"(?:^|[-_ ])(?:(?:post|entry|article|story|blog)[-_]?(?:body|content|text|entry)"
    r"|hentry|h-entry|single-?post)(?:$|[-_ ])",
    re.IGNORECASE,
)


_NO_ENTRY: Final = 0
_HOLDS: Final = 1
_INSIDE: Final = 2
_BESIDE: Final = 3


class _Entries:
    """The page's entry containers that hold running text: an ``<article>``, an
    ``itemprop="articleBody"``, or an element named for a post's or an article's body
    (`_ENTRY_NAMES`). Found when first asked (most pages never ask); each question is a
    binary search, so that a page of many entries and many named regions stays linear."""

    __slots__ = ("ends", "rows", "starts", "stats")

    def __init__(self, stats: Stats) -> None:
        self.stats = stats
        self.rows: list[int] | None = None
        # The outermost entries' rows and the ends of their subtrees.
        self.starts: list[int] = []
        self.ends: list[int] = []

    def place(self, row: int) -> int:
        """Where the element at `row` is with respect to the entries: `_HOLDS` one (it wraps
        the post, whatever its name), `_INSIDE` one (a part of a post), `_BESIDE` them (a
        region beside the post: a sidebar, a profile, a text widget, however much text it
        holds), or `_NO_ENTRY` when the page has none."""
        rows = self.rows
        end = self.stats.end
        if rows is None:
            rows = self.rows = entry_rows(self.stats)
            for entry in rows:
                if not self.ends or entry >= self.ends[-1]:
                    self.starts.append(entry)
                    self.ends.append(end[entry])
        if not rows:
            return _NO_ENTRY
        first = bisect.bisect_left(rows, row)
        if first < len(rows) and rows[first] < end[row]:
            return _HOLDS
        around = bisect.bisect_left(self.starts, row) - 1
        if around >= 0 and row < self.ends[around]:
            return _INSIDE
        return _BESIDE


def entry_rows(stats: Stats) -> list[int]:
    """The rows of the page's entry containers that hold running text (see `_Entries`), in
    document order."""
    elements = stats.elements
    tags = stats.tags
    prose_of = stats.prose.values
    rows: list[int] = []
    # Whether attributes name an entry, by the attributes: pages repeat them (a post body's
    # class on each of thousands of posts), and one read of them is cheaper than three.
    named: dict[tuple[tuple[str, str], ...], bool] = {}
    for row in compress(range(1, len(tags)), stats.attributed[1:]):
        if not prose_of[row]:
            continue
        if tags[row] == "article":
            rows.append(row)
            continue
        element = elements[row]
        key = tuple(element.items())
        entry = named.get(key)
        if entry is None:
            entry = named[key] = _names_an_entry(element)
        if entry:
            rows.append(row)
    if "article" in tags:
        rows += [
            row
            for row in compress(range(1, len(tags)), map("article".__eq__, tags[1:]))
            if prose_of[row] and not stats.attributed[row]
        ]
    return sorted(rows)


def _names_an_entry(element: Element) -> bool:
    """Whether `element`'s attributes name an entry: ``itemprop="articleBody"``, or a class
    or id of `_ENTRY_NAMES`."""
    if "articlebody" in element.get("itemprop", "").lower().split():
        return True
    names = f"{element.get('class') or ''} {element.get('id') or ''}"
    return _ENTRY_NAMES.search(names) is not None


# A decoration of a post (a caption, a credit, a byline, a date, a share bar, a figure or a
# form) that holds several paragraphs of prose is a wrapper of the post's text, whatever its
# name: a caption left open, a byline span never closed, a share wrapper.
_DECORATION_WORDS: Final = re.compile(
    r"caption|credit|byline|author|(?:^|[-_ ])(?:date|time|timestamp|dateline)(?:$|[-_ ])"
    r"|share|sharing|social|print|follow",
    re.IGNORECASE,
)
WRAPPER_PROSE: Final = 240
WRAPPER_PARAGRAPHS: Final = 3
_PARAGRAPH_CHARS: Final = 80


def names_a_decoration(element: Element) -> bool:
    """Whether `element` is named (or is an element) for a decoration of a post."""
    if element.tag in ("figure", "form"):
        return True
    words = f"{element.get('class') or ''} {element.get('id') or ''}"
    return _DECORATION_WORDS.search(words) is not None


def _paragraph_totals(stats: Stats) -> list[int]:
    """The paragraphs of prose in the rows before each row, as running totals (those under
    an element: the difference at the two ends of its rows): blocks whose own run of text is
    a sentence or more."""
    return list(
        accumulate(
            (
                inline >= _PARAGRAPH_CHARS and tag in ("p", "div", "blockquote")
                for inline, tag in zip(stats.inline, stats.tags, strict=True)
            ),
            initial=0,
        )
    )
