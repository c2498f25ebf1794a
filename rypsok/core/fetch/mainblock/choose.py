"""The block, the third step of the main block (REQ-FETCH-002, REQ-PAGE-002).

The best container is narrowed to the descendant holding 90 % of its paragraph text, widened
to the common container of a story split into substantial parts, to a well-scored ancestor
of whose paragraph text it holds less than 60 % (teasers beside it, items headed by a link to
another page, not counted), and to an enclosing ``<article>`` (or ``itemprop="articleBody"``)
of whose paragraph text it holds less than 80 %. Its siblings join it when they score close
to it or are plain paragraphs.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from lxml import etree

from rypsok.core.fetch.mainblock.tree import block_text

if TYPE_CHECKING:
    from rypsok.core.fetch.mainblock.measure import Column, Element, Stats
    from rypsok.core.fetch.mainblock.score import Scores

__all__ = ["climb", "container_of", "merge_parts", "narrow", "with_siblings"]


def narrow(top: Element, good: Column, stats: Stats) -> Element:
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


def merge_parts(top: Element, best: float, scores: Scores, good: Column) -> Element:
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


def climb(top: Element, best: float, scores: Scores, good: Column, stats: Stats) -> Element:
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


def _teaser_text(root: Element, good: Column, stats: Stats) -> dict[Element, int]:
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


def container_of(top: Element, good: Column) -> Element:
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


def with_siblings(top: Element, scores: Scores, stats: Stats) -> list[Element]:
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
            text = block_text(sibling).strip()
            if (length > 80 and density < 0.25) or (
                0 < length <= 80 and density == 0 and re.search(r"\.( |$)", text)
            ):
                chosen.append(sibling)
    return chosen
