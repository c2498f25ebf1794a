"""Scoring, the second step of the main block (REQ-FETCH-002).

Every block's own run of inline text (a paragraph, or text written straight into a
container) of at least 25 characters scores by its length and its commas; the score goes to
its container in full and to the next ancestors in part. A container's score is weighed by
its element, its class and id words, and the share of its text that is link text.
"""

from __future__ import annotations

import functools
import heapq
import re
from typing import TYPE_CHECKING, Final, overload

from rypsok.core.fetch.elements import BLOCK_ELEMENTS
from rypsok.core.fetch.mainblock.chrome import GUARD_PROSE

if TYPE_CHECKING:
    from rypsok.core.fetch.mainblock.measure import Column, Element, Stats

__all__ = ["Scores", "class_weight", "score_candidates"]

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


def class_weight(element: Element) -> int:
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


# What a run's score is divided by for its parent, grandparent and the three above them.
_DIVIDERS: Final = (1, 2, 6, 9, 12)
_BELOW_PARAGRAPHS: Final = _DIVIDERS[1:]


class Scores:
    """The containers' scores, read like a dict keyed by element (`get`, `[]`), held by row
    of the measure (`Stats`): at the node bound a dict of 100,000 elements costs more to
    build than the scoring itself. The rows are in the order they are first scored, which
    breaks ties between equal scores (the first scored wins)."""

    __slots__ = ("by_row", "elements", "index", "named")

    def __init__(self, by_row: dict[int, float], stats: Stats, named: dict[int, int]) -> None:
        self.by_row = by_row
        self.index = stats.index
        self.elements = stats.elements
        # The `class_weight` of the rows with attributes that were scored, by row: the
        # cleaning asks it again of the same parts, and reads it here instead.
        self.named = named

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


def score_candidates(body: Element, stats: Stats) -> tuple[Scores, Column]:
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

    most = prose_of[0] * GUARD_PROSE

    attributed = stats.attributed
    named: dict[int, int] = {}

    def initial(row: int) -> float:
        if not attributed[row]:
            return _TAG_WEIGHT.get(tags[row], 0)  # most elements: no name to weigh
        element = elements[row]
        names = element.get("class")
        ident = element.get("id")
        if names is None and ident is None:
            named[row] = 0
            return _TAG_WEIGHT.get(tags[row], 0)  # most elements: no name to weigh
        weight = named[row] = _words_weight(names) + _words_weight(ident)
        if weight < 0 and most and prose_of[row] >= most:
            # A name does not count against the block holding most of the running text.
            weight = 0
        return _TAG_WEIGHT.get(str(tags[row]), 0) + weight

    inline_of = stats.inline
    commas_of = stats.commas
    breaks = stats.breaks
    # In document order (the order breaks ties between equal scores), the blocks that can
    # score: those whose run is long enough.
    for row in stats.runs:
        tag = tags[row]
        if tag not in _SCORED_SET:
            continue
        length = inline_of[row]
        parts = 1 + breaks.get(row, 0)  # its paragraphs, between <br><br>
        score = parts + commas_of[row] + min(length // 100, 3 * parts)
        if (tag in _BLOCK_TAGS and tag != "p") or parts > 1:
            # Text straight inside a container is a paragraph of that container (and text
            # in paragraphs between <br><br>, in a cell too, is that cell's).
            if row in scores:
                scores[row] += score
            elif attributed[row]:
                scores[row] = initial(row) + score
            else:
                scores[row] = _TAG_WEIGHT.get(tag, 0) + score
        # The measured tree's parents: the root's own is outside it (-1).
        # (A run of paragraphs between <br><br> is their container, as a division is of
        # its <p>s: its parent has half their score.)
        # (One read and one write of each score: a container first met starts from its
        # weight, an element without attributes from its tag's alone, without a call.)
        ancestor = parent[row]
        for divider in _DIVIDERS if parts == 1 else _BELOW_PARAGRAPHS:
            if ancestor < 0:
                break
            value = scores.get(ancestor)
            if value is None:
                value = (
                    initial(ancestor)
                    if attributed[ancestor]
                    else _TAG_WEIGHT.get(tags[ancestor], 0)
                )
            scores[ancestor] = value + score / divider
            ancestor = parent[ancestor]
    return Scores(_weighed(scores, stats), stats, named), stats.prose


def _weighed(scores: dict[int, float], stats: Stats) -> dict[int, float]:
    """Each score weighed by the share of its element's text that is not link text."""
    text_of = stats.text.values
    links_of = stats.links.values
    rows = list(scores)
    return dict(
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
