"""The measures of a page's tree the main block is chosen by (REQ-FETCH-002).

Every element's text length, link text, own run of inline text, commas and running text,
summed from the leaves up in one linear pass whatever the tree's depth: the chrome removal,
the scoring and the cleaning read these columns instead of the tree.
"""

from __future__ import annotations

from array import array
from itertools import accumulate, compress, repeat
from operator import add, attrgetter, le, mul, not_, sub
from typing import TYPE_CHECKING, Final, NamedTuple, TypeAlias

from lxml import etree

from rypsok.core.fetch.elements import BLOCK_ELEMENTS
from rypsok.core.fetch.mainblock.tree import drop_all

if TYPE_CHECKING:
    from collections.abc import MutableSequence, Sequence

__all__ = ["MIN_BLOCK", "Column", "Element", "Stats"]

Element: TypeAlias = etree._Element

# The shortest run of inline text that counts as a paragraph (characters).
MIN_BLOCK: Final = 25
# The text (not links) a paragraph between <br><br> holds on average to count as one.
_PARAGRAPH_CHARS: Final = 80
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
_ATTRIB: Final = attrgetter("attrib")
_PARENT: Final = etree._Element.getparent
# The blocks whose run is running text when long enough and not mostly links.
_PROSE_TAGS: Final = BLOCK_ELEMENTS - _NOT_PROSE


class Column:
    """One measure of every element, read like a dict keyed by element (a missing element
    reads as the default). The dense measures of a page share one index and sit in arrays
    of machine integers: at the node bound (LIM-F10) a dict of 100,000 entries costs about
    5 MiB of a parse, an array under the shared index under 1 MiB."""

    __slots__ = ("index", "values")

    def __init__(self, index: dict[Element, int], values: array[int]) -> None:
        self.index = index
        self.values = values

    def __getitem__(self, element: Element) -> int:
        return self.values[self.index[element]]

    def get(self, element: Element, default: int = 0) -> int:
        row = self.index.get(element)
        return default if row is None else self.values[row]


class Stats:
    """Lengths of every element of the tree under `root` (the root included).

    `text` is the length of all the text under an element and `links` the part of it inside
    links; `inline` and `commas` count only the element's own run of inline content (its
    text, its inline children, the tails of its children), which is what a reader sees as
    the element's paragraph. `prose` is the running text under an element (the runs of its
    blocks that are long enough and not mostly links). `all_commas` counts the commas of all
    the text under an element, so that the cleaning never reads the text from the tree again.
    `runs` are the rows whose run is long enough to score, in document order; `breaks` the
    paragraph breaks (``<br><br>``) in a row's run, for the runs that have any: text in a
    ``<font>`` or a cell written as paragraphs between double line breaks is read as the
    paragraphs a browser shows, not as one.

    Measured by columns, not by a walk: each element's row is its place in document order,
    so the rows under an element are the ones from its own to `end[row]`, and a sum over a
    subtree is the difference of two running totals. Each column is one `map` or list
    comprehension over the one before (the loop in C, the text and tail of each element read
    once), which at the node bound costs a third of a walk doing it all per element in
    Python. Every sum is of integers, so the order in which it is taken does not change it.
    The measures every element has (`text`, `links`, `prose`) are arrays of machine integers
    under one index (`Column`), not a dict each, so that a page at the node bound costs
    little memory.
    """

    elements: list[Element]
    index: dict[Element, int]
    parent: list[int]
    end: list[int]
    tags: list[str]
    attributed: list[int]
    _texts: _Texts
    all_commas: list[int]
    inline: list[int]
    commas: list[int]
    breaks: dict[int, int]
    runs: list[int]
    _holders: list[int]
    text: Column
    links: Column
    prose: Column

    def __init__(self, root: Element) -> None:
        # Elements only, as the walks read them (comments and processing instructions, and
        # their tails, are no text of the page here).
        elements: list[Element] = list(root.iter(etree.Element))
        index, parent, end = _tree_rows(elements)
        self._measure(
            elements,
            index,
            parent,
            end,
            list(map(_TAG, elements)),
            # Whether each element has attributes (most have none: no name, role or address
            # to judge it by, which the steps below need not ask it for).
            list(map(len, map(_ATTRIB, elements))),
            _own_and_tail(elements),
        )

    def without(self, removed: list[Element]) -> Stats:
        """Remove the `removed` elements (the outermost, in document order, each measured
        here) from the tree, their tails kept in place (`drop_all`), and answer the measures
        of what is left: what a new measure of the root reads, taken from these columns.
        This measure is spent: its columns are let go of before the tree is changed and the
        new sums are taken, so that a page's two sets are never alive at once (a set is
        about 20 MiB at the node bound).

        The kept rows keep their order, tags, attributes and texts: only the texts and
        tails the removed tails joined are read from the tree again, and the sums are taken
        afresh over the kept rows. At the node bound this costs a third of a new measure,
        which reads every element's text and tail through lxml again (the chrome removed
        from a page of tens of thousands of posts, each beside its widget)."""
        count = len(self.elements)
        end = self.end
        keep = bytearray(b"\x01") * count
        for row in map(self.index.__getitem__, removed):
            stop = end[row]
            keep[row:stop] = bytes(stop - row)
        # Each row's place among the kept rows (a kept row's new row, a subtree's new end).
        place = array("i", accumulate(keep, initial=0))
        kept = list(compress(range(count), keep))
        parent = [-1]
        parent += map(place.__getitem__, map(self.parent.__getitem__, kept[1:]))
        new_end = list(map(place.__getitem__, map(end.__getitem__, kept)))
        del place, kept
        elements = list(compress(self.elements, keep))
        tags = list(compress(self.tags, keep))
        attributed = list(compress(self.attributed, keep))
        texts = _Texts(*(list(compress(column, keep)) for column in self._texts))
        # (The removed elements' proxies go with the old rows, from the last one back, while
        # the tree still holds them: see `_tree_rows`.)
        self._spend()
        changed = drop_all(removed)
        index = dict(zip(reversed(elements), range(len(elements) - 1, -1, -1), strict=True))
        for element in changed:
            at = index.get(element)
            if at is not None:
                texts.read(at, element)
        measured = Stats.__new__(Stats)
        measured._measure(elements, index, parent, new_end, tags, attributed, texts)
        return measured

    def settle(self) -> None:
        """Let go of what only `without` reads (the tree is measured for good)."""
        self._texts = _Texts([], [], [], [])

    def _spend(self) -> None:
        """Let go of every column (`without` has taken what it keeps of them)."""
        self.elements = []
        self.index = {}
        self.parent = []
        self.end = []
        self.tags = []
        self.attributed = []
        self._texts = _Texts([], [], [], [])
        self.all_commas = []
        self.inline = []
        self.commas = []
        self.breaks = {}
        self.runs = []
        self._holders = []
        self.text = self.links = self.prose = Column({}, array("i"))

    def _measure(
        self,
        elements: list[Element],
        index: dict[Element, int],
        parent: list[int],
        end: list[int],
        tags: list[str],
        attributed: list[int],
        texts: _Texts,
    ) -> None:
        """The columns summed from the rows' own texts and tails (`texts`)."""
        self.elements = elements
        self.index = index
        self.parent = parent
        self.end = end
        self.tags = tags
        self.attributed = attributed
        own, own_commas, tail, tail_commas = texts
        # All the text under each element: its rows' texts and tails, less its own tail.
        running = [0, *accumulate(map(add, own, tail))]
        text_of = list(map(sub, map(sub, map(running.__getitem__, end), running), tail))
        running = [0, *accumulate(map(add, own_commas, tail_commas))]
        self.all_commas = list(
            map(sub, map(sub, map(running.__getitem__, end), running), tail_commas)
        )
        del running
        link_rows, links_of = _link_text(tags, parent, end, text_of)
        self.inline, self.commas, inline_links, self.breaks = _runs(
            tags, parent, own, own_commas, tail, tail_commas, link_rows
        )
        self.runs, prose_of = _running_text(tags, end, self.inline, inline_links, links_of, text_of)
        self._texts = texts  # (for `without`)
        # The rows holding a paragraph, code, a quote or a table, as running totals (a
        # figure that holds one is content, not an illustration).
        self._holders = list(accumulate(map(_TEXT_HOLDERS.__contains__, tags), initial=0))
        self.text = Column(index, array("i", text_of))
        self.links = Column(index, array("i", links_of))
        self.prose = Column(index, array("i", prose_of))

    def holds_text(self, element: Element) -> bool:
        """Whether a paragraph, code, a quote or a table is under `element`."""
        row = self.index[element]
        return self._holders[self.end[row]] > self._holders[row + 1]

    def density(self, element: Element) -> float:
        length = self.text.get(element, 0)
        return self.links.get(element, 0) / length if length else 0.0


def _tree_rows(elements: list[Element]) -> tuple[dict[Element, int], list[int], list[int]]:
    """Each element's row, each row's parent row (the root's: -1, its parent being outside
    the measure), and the end of each row's subtree (one past its last row)."""
    count = len(elements)
    # (Filled backwards: a dict lets go of its keys in the order they came, and lxml frees a
    # removed subtree's nodes as their last proxies go. Let go of from the leaves up, each
    # finds a proxy above it at once; from the top down, each searched the subtree past those
    # gone before it, which cost the square of a removed part's size.)
    index: dict[Element, int] = dict(zip(reversed(elements), range(count - 1, -1, -1), strict=True))
    parent: list[int] = [-1]
    parent += map(index.__getitem__, map(_PARENT, elements[1:]))
    # A subtree ends where its last child's ends, reached first going backwards.
    end = list(range(1, count + 1))
    for row in range(count - 1, 0, -1):
        up = parent[row]
        if end[up] < end[row]:
            end[up] = end[row]
    return index, parent, end


class _Texts(NamedTuple):
    """The stripped length and the commas of each row's own text, and of its tail (the
    root's tail is outside it: none)."""

    own: MutableSequence[int]
    own_commas: MutableSequence[int]
    tail: MutableSequence[int]
    tail_commas: MutableSequence[int]

    def read(self, row: int, element: Element) -> None:
        """Read the text and the tail of `element`, at `row`, from the tree again."""
        own = element.text or ""
        self.own[row] = len(own.strip())
        self.own_commas[row] = own.count(",")
        tail = (element.tail or "") if row else ""
        self.tail[row] = len(tail.strip())
        self.tail_commas[row] = tail.count(",")


def _own_and_tail(elements: list[Element]) -> _Texts:
    """The texts' measures of each element (`_Texts`)."""
    texts = [text or "" for text in map(_TEXT, elements)]
    own = list(map(len, map(str.strip, texts)))
    own_commas = list(map(str.count, texts, repeat(",")))
    del texts
    tails = [text or "" for text in map(_TAIL, elements)]
    tails[0] = ""
    tail = list(map(len, map(str.strip, tails)))
    tail_commas = list(map(str.count, tails, repeat(",")))
    return _Texts(own, own_commas, tail, tail_commas)


def _link_text(
    tags: list[str], parent: list[int], end: list[int], text_of: list[int]
) -> tuple[list[int], list[int]]:
    """The rows of the links, and the link text under each row: a link's whole text, and
    under any other element its links' (the outermost ones: a link inside a link is its
    text already)."""
    count = len(tags)
    if "a" not in tags:
        return [], [0] * count  # (a scan in C: many pages of the bound have no link)
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
        return link_rows, list(map(sub, map(running.__getitem__, end), running))
    links_of = [0] * count
    below = [0] * count
    for row in range(count - 1, -1, -1):
        value = text_of[row] if tags[row] == "a" else below[row]
        links_of[row] = value
        if row:
            below[parent[row]] += value
    return link_rows, links_of


def _runs(
    tags: list[str],
    parent: list[int],
    own: Sequence[int],
    own_commas: Sequence[int],
    tail: Sequence[int],
    tail_commas: Sequence[int],
    link_rows: list[int],
) -> tuple[list[int], list[int], list[int], dict[int, int]]:
    """The length, commas and link text of each row's own run of inline text, and the
    paragraph breaks (`<br><br>`) in the runs that have any.

    Each text belongs to the run of its nearest block or link (itself, or the nearest above
    it: an inline element's run is its container's), a tail to its parent's; a link's run
    then joins the run around it. (The root has a run of its own, whatever it is.) Most
    elements of a page at the node bound own their run: only the others, and the tails, are
    walked.
    """
    count = len(tags)
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
    # Paragraph breaks: a <br> right after another (white space between), the first of a
    # run, counted in the run that holds them (a browser shows a blank line there).
    breaks: dict[int, int] = {}
    for row in compress(range(2, count), map("br".__eq__, tags[2:])) if "br" in tags else ():
        before = row - 1
        up = parent[row]
        if tags[before] == "br" and parent[before] == up and not tail[before]:
            if tags[before - 1] == "br" and parent[before - 1] == up and not tail[before - 1]:
                continue  # a third <br> of a run: the same break
            into = owner[up]
            breaks[into] = breaks.get(into, 0) + 1
    inline_links = [0] * count
    for row in reversed(link_rows):
        if row:
            # Backwards: a link inside a link has joined its run before it joins its own.
            into = owner[parent[row]]
            inline[into] += inline[row]
            commas[into] += commas[row]
            inline_links[into] += inline[row]
    if breaks:
        # Only paragraphs of prose count as such: each a sentence or more of text that is
        # not links on average (a footer's lines between breaks are not).
        breaks = {
            row: count
            for row, count in breaks.items()
            if inline[row] - inline_links[row] >= _PARAGRAPH_CHARS * (count + 1)
        }
    return inline, commas, inline_links, breaks


def _running_text(
    tags: list[str],
    end: list[int],
    inline: list[int],
    inline_links: list[int],
    links_of: list[int],
    text_of: list[int],
) -> tuple[list[int], list[int]]:
    """The rows whose run is long enough to score (in document order), and the running text
    under each row: the runs of the blocks that are long enough and not mostly links, summed
    over each subtree; an item that is a quarter links (a teaser of another page, a title and
    its summary) counts none of the runs under it."""
    count = len(tags)
    runs = list(compress(range(count), map(le, repeat(MIN_BLOCK), inline)))
    counted = [0] * count
    for row in runs:
        tag = tags[row]
        length = inline[row]
        if (
            tag in _PROSE_TAGS
            and inline_links[row] < (_TEASER_LINKS if tag == "li" else 0.5) * length
        ):
            counted[row] = length
    resets = (
        [
            row
            for row in compress(range(count), map("li".__eq__, tags))
            if not counted[row] and links_of[row] >= _TEASER_LINKS * text_of[row]
        ]
        if "li" in tags
        else []
    )
    running = list(accumulate(counted, initial=0))
    prose_of = list(map(sub, map(running.__getitem__, end), running))
    if resets:
        # What a reset item holds, less what the reset items inside it hold (taken off
        # already by them): summed over a subtree, this takes off exactly what its outermost
        # reset items hold.
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
    return runs, prose_of
