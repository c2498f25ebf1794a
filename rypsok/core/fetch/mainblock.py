"""The choice of a page's main block (REQ-FETCH-002, REQ-PAGE-002).

Three steps over the tree the bounded parse built:

1. Chrome removal. Navigation, headers, footers, sidebars, forms and dialogs go, by element
   (nav, header, footer, aside, form, menu), by ARIA role (navigation, banner, contentinfo,
   complementary, search…) and by class or id words that name chrome (menu, sidebar, share,
   related, comment…) unless a content word (article, content, post…) is there too. An
   element holding most of the page's text is never removed this way: a site that puts its
   article in a ``<form>`` or names its wrapper ``has-sidebar`` keeps it.
2. Scoring. Every paragraph-like block (p, pre, td, and blocks of inline content) of at least
   25 characters scores by its length and its commas; the score goes to its parent in full
   and to the next ancestors in part. A container's score is weighed by its tag, its class
   and id words, and the share of its text that is link text. The best container is the main
   block; its siblings join it when they score close to it or are plain paragraphs. An
   ``<article>`` (or ``itemprop="articleBody"``) holding the best block is preferred to it
   when the block is a small part of it.
3. Cleaning. Inside the block, lists, tables and divisions that are mostly links, images or
   short fragments are removed, as are the page-title heading and short runs of chrome text.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, TypeAlias

import attrs
from lxml import etree

from rypsok.core.fetch.markdown import INLINE_ELEMENTS

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["MainBlock", "select_main_block"]

Element: TypeAlias = etree._Element

CHROME_ELEMENTS: Final = frozenset({"nav", "header", "footer", "aside", "form", "menu", "dialog"})
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
_BLOCK_TAGS: Final = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "dd",
        "details",
        "dialog",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hgroup",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "ul",
    }
)
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
# An element holding this share of the body's text is never removed as chrome.
_GUARD_SHARE: Final = 0.4


@attrs.frozen
class MainBlock:
    """The elements of the main block, in document order, and the page's first heading."""

    elements: tuple[Element, ...]
    heading: str | None


class _Stats:
    """Lengths of every element, measured in one pass from the leaves up.

    `text` is the length of all the text under an element and `links` the part of it inside
    links; `inline`, `inline_links` and `commas` count only the element's own run of inline
    content (its text, its inline children, the tails of its children), which is what a
    reader sees as the element's paragraph.
    """

    def __init__(self, root: Element) -> None:
        self.text: dict[Element, int] = {}
        self.links: dict[Element, int] = {}
        self.inline: dict[Element, int] = {}
        self.inline_links: dict[Element, int] = {}
        self.commas: dict[Element, int] = {}
        text_of = self.text
        links_of = self.links
        inline_of = self.inline
        inline_links_of = self.inline_links
        commas_of = self.commas
        for element in reversed(list(root.iter())):
            own = element.text
            length = len(own.strip()) if own else 0
            inline = length
            commas = own.count(",") if own else 0
            links = 0
            inline_links = 0
            for child in element:
                child_length = text_of[child]
                length += child_length
                links += links_of[child]
                if child.tag in INLINE_ELEMENTS:
                    inline += child_length
                    inline_links += links_of[child]
                    commas += commas_of[child]
                tail = child.tail
                if tail:
                    tail_length = len(tail.strip())
                    length += tail_length
                    inline += tail_length
                    commas += tail.count(",")
            text_of[element] = length
            if element.tag == "a":
                links_of[element] = length
                inline_links_of[element] = inline
            else:
                links_of[element] = links
                inline_links_of[element] = inline_links
            inline_of[element] = inline
            commas_of[element] = commas

    def density(self, element: Element) -> float:
        length = self.text.get(element, 0)
        return self.links.get(element, 0) / length if length else 0.0

    def inline_density(self, element: Element) -> float:
        length = self.inline.get(element, 0)
        return self.inline_links.get(element, 0) / length if length else 0.0


def _words(element: Element) -> str:
    return f"{element.get('class', '')} {element.get('id', '')}".strip()


def _class_weight(element: Element) -> int:
    weight = 0
    for value in (element.get("class"), element.get("id")):
        if value:
            if _NEGATIVE.search(value):
                weight -= 25
            if _POSITIVE.search(value):
                weight += 25
    return weight


def _is_chrome(element: Element) -> bool:
    tag = element.tag
    if tag in CHROME_ELEMENTS or tag == "figcaption":
        return True
    if tag == "figure":
        # A figure is an illustration and its caption, unless it holds text of its own.
        return not any(True for _ in element.iter("pre", "blockquote", "table", "p"))
    role = element.get("role")
    if role is not None and role.strip().lower() in CHROME_ROLES:
        return True
    if tag in ("body", "html", "article", "main", "a"):
        return False
    if element.get("itemprop", "").lower() == "articlebody":
        return False
    words = _words(element)
    return bool(words) and bool(_CHROME_WORDS.search(words)) and not _CONTENT_WORDS.search(words)


def _drop(element: Element) -> None:
    """Remove `element` but keep its tail text in place."""
    parent = element.getparent()
    if parent is None:
        return
    tail = element.tail
    if tail:
        previous = element.getprevious()
        if previous is not None:
            previous.tail = (previous.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(element)


def _remove_chrome(body: Element) -> None:
    stats = _Stats(body)
    total = stats.text.get(body, 0)
    guard = total * _GUARD_SHARE
    doomed = [
        element
        for element in body.iterdescendants()
        if isinstance(element.tag, str) and _is_chrome(element) and stats.text[element] <= guard
    ]
    for element in doomed:
        _drop(element)


def _block_text(element: Element) -> str:
    return str(element.xpath("string()"))


def _is_inline_leaf(element: Element) -> bool:
    return not any(child.tag in _BLOCK_TAGS for child in element)


def _score_candidates(
    body: Element, stats: _Stats
) -> tuple[dict[Element, float], dict[Element, int]]:
    """Each container's score, and the length of the paragraph text under each element."""
    scores: dict[Element, float] = {}
    good: dict[Element, int] = {}

    def initial(element: Element) -> float:
        return _TAG_WEIGHT.get(str(element.tag), 0) + _class_weight(element)

    for element in body.iter():
        tag = element.tag
        length = stats.inline[element]
        if length < _MIN_BLOCK or tag in INLINE_ELEMENTS or tag in _UNSCORED:
            continue
        score = 1.0 + stats.commas[element] + min(length // 100, 3)
        if stats.inline_density(element) < 0.5:
            holder: Element | None = element
            while holder is not None:
                good[holder] = good.get(holder, 0) + length
                holder = holder.getparent()
        if tag in _BLOCK_TAGS and tag != "p":
            # Text straight inside a container is a paragraph of that container.
            scores[element] = scores.get(element, initial(element)) + score
        ancestor = element.getparent()
        level = 0
        while ancestor is not None and level < 5:
            if ancestor not in scores:
                scores[ancestor] = initial(ancestor)
            divider = 1 if level == 0 else 2 if level == 1 else level * 3
            scores[ancestor] += score / divider
            ancestor = ancestor.getparent()
            level += 1
    weighed = {element: score * (1 - stats.density(element)) for element, score in scores.items()}
    return weighed, good


def _narrow(top: Element, good: dict[Element, int]) -> Element:
    """The descendant of `top` that holds nearly all its paragraph text."""
    while True:
        total = good.get(top, 0)
        if not total:
            return top
        for child in top:
            if good.get(child, 0) >= 0.9 * total:
                top = child
                break
        else:
            return top


def _container_of(top: Element, stats: _Stats) -> Element:
    """An article (or articleBody) around `top` when `top` is only part of it."""
    ancestor = top.getparent()
    while ancestor is not None:
        if ancestor.tag == "article" or ancestor.get("itemprop", "").lower() == "articlebody":
            if stats.text.get(top, 0) >= 0.6 * stats.text.get(ancestor, 1):
                return top
            return ancestor
        ancestor = ancestor.getparent()
    return top


def _with_siblings(top: Element, scores: dict[Element, float], stats: _Stats) -> list[Element]:
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


def _clean(
    elements: Iterable[Element],
    scores: dict[Element, float],
    good: dict[Element, int],
    stats: _Stats,
) -> None:
    """Remove the chrome-like parts left inside the main block (readability's conditional
    cleaning, in spirit)."""
    for root in elements:
        # A part holding this much of the block's paragraph text is the block, not chrome.
        keep = 0.3 * good.get(root, 0)
        candidates = [
            e
            for e in root.iter("div", "section", "ul", "ol", "table", "dl", "figure", "aside")
            if e is not root
        ]
        for element in reversed(candidates):
            if element.getparent() is None or (keep and good.get(element, 0) >= keep):
                continue
            weight = _class_weight(element)
            if weight + scores.get(element, 0.0) < 0:
                _drop(element)
                continue
            text = _block_text(element)
            if text.count(",") >= 10:
                continue
            paragraphs = sum(1 for _ in element.iter("p"))
            images = sum(1 for _ in element.iter("img"))
            items = sum(1 for _ in element.iter("li")) - 100
            density = stats.density(element)
            length = len(text.strip())
            tag = element.tag
            in_list = tag in ("ul", "ol")
            if (
                (images > 1 and paragraphs / images < 0.5)
                or (not in_list and items > paragraphs)
                or (weight < 25 and density > 0.2 and not (in_list and density < 0.5))
                or (weight >= 25 and density > 0.5)
                or (length < _MIN_BLOCK and images == 0 and tag not in ("table", "ul", "ol"))
            ):
                _drop(element)


def _first_heading(body: Element) -> str | None:
    for heading in body.iter("h1"):
        text = " ".join(_block_text(heading).split())
        if text:
            return text
    return None


def select_main_block(root: Element) -> MainBlock:
    """The main block of the page rooted at `root` (mutates the tree)."""
    body = root.find("body")
    if body is None:
        body = root
    heading = _first_heading(body)
    _remove_chrome(body)
    stats = _Stats(body)
    scores, good = _score_candidates(body, stats)
    if not scores:
        return MainBlock(elements=(body,), heading=heading)
    top = max(scores, key=lambda e: scores[e])
    top = _narrow(top, good)
    top = _container_of(top, stats)
    elements = _with_siblings(top, scores, stats) if top is not body else [body]
    _clean(elements, scores, good, stats)
    return MainBlock(elements=tuple(elements), heading=heading)
