"""What widens a block without being its content: repeated signed items and linked teasers
(REQ-FETCH-002, REQ-PAGE-002).

A comment thread without a telling class name, or a "Recent posts" list of linked titles
with their one-line summaries, sits in the same container as the post, and its paragraphs
make that container the best scored. Among the chosen block's children, a run of alike
items (the same element and class, three or more, short) most of which open or close with a
signature ("Posted by X at 08:00": a time, a date) is a thread, unless one of them holds the
page's best paragraph or most have a heading (the posts of a blog's front page); three or
more headings that are links, each followed by at most a short summary, after the block's
own text, are teasers of other pages. Both go, with the heading that introduces them,
unless the block would keep under 200 characters of running text of its own (a forum's
page is its thread).
"""

from __future__ import annotations

import re
from itertools import compress, islice
from typing import TYPE_CHECKING, Final

from rypsok.core.fetch.mainblock.tree import block_text

if TYPE_CHECKING:
    from collections.abc import Iterable

    from rypsok.core.fetch.mainblock.measure import Element, Stats

__all__ = ["repeated_parts"]

# A signature, at an item's start or end: a time of day, a date, "posted".
_SIGNED: Final = re.compile(
    r"(?<!\d)\d{1,2}:\d{2}(?!\d)|(?<!\d)\d{1,4}[/.-]\d{1,2}[/.-]\d{2,4}(?!\d)|\bposted\b",
    re.IGNORECASE,
)
_SIGNATURE_CHARS: Final = 120
_ITEMS: Final = frozenset({"div", "li", "dl", "table", "section", "article", "blockquote"})
_HEADINGS: Final = frozenset({"h2", "h3", "h4", "h5", "h6"})
_TITLES: Final = ("h1", "h2", "h3", "h4", "h5", "h6")
# Alike items in a run before it can be a thread; the items sampled to judge it.
_THREAD_ITEMS: Final = 3
_SAMPLE: Final = 8
# An item of a thread is short: a long one is an article's part, signed or not.
_ITEM_CHARS: Final = 1200
# The median length of a thread's items: readers' comments are short.
_COMMENT_CHARS: Final = 500
# The running text the block keeps of its own for a thread beside it to go.
_OWN_TEXT: Final = 200
# Linked headings before a run is a list of teasers; a teaser's summary is short.
_TEASERS: Final = 3
_SUMMARY_CHARS: Final = 300


def repeated_parts(elements: Iterable[Element], stats: Stats, best: Element) -> list[Element]:
    """The children of `elements` that are a thread or teasers (`best`: the best-scored
    element of the page)."""
    prose_of = stats.prose.values
    index = stats.index
    found: list[Element] = []
    for block in elements:
        children = list(block.iterchildren("*"))
        parts = _thread_items(children, stats, _child_over(block, best)) + _teaser_run(
            children, stats
        )
        kept = stats.prose.get(block, 0) - sum(
            map(prose_of.__getitem__, map(index.__getitem__, parts))
        )
        if kept >= _OWN_TEXT:
            found += parts
        # (Else the block is its thread, a forum's page: it stays.)
    return found


def _child_over(block: Element, best: Element) -> Element | None:
    """The child of `block` that is `best` or holds it (None when `best` is not under it)."""
    child = best
    parent = child.getparent()
    while parent is not None and parent is not block:
        child = parent
        parent = child.getparent()
    return child if parent is not None else None


def _thread_items(
    children: list[Element], stats: Stats, over_best: Element | None
) -> list[Element]:
    """The items of the runs of alike children (`children`) that are a thread; never the
    run holding the page's best paragraph (the child `over_best`)."""
    groups: dict[tuple[str, str | None], list[Element]] = {}
    for child in children:
        tag = child.tag  # (lxml makes the string at each read: read once)
        if tag in _ITEMS:
            groups.setdefault((tag, child.get("class")), []).append(child)
    skipped = None if over_best is None else (over_best.tag, over_best.get("class"))
    index = stats.index
    text_of = stats.text.values
    found: list[Element] = []
    for key, items in groups.items():
        if len(items) < _THREAD_ITEMS or key == skipped:
            continue
        # The first items judge the run; all of them are counted only for a thread.
        sample = list(
            islice((item for item in items if 0 < text_of[index[item]] <= _ITEM_CHARS), _SAMPLE)
        )
        if not sample or not _a_thread(sample, stats):
            continue
        lengths = map(text_of.__getitem__, map(index.__getitem__, items))
        short = list(compress(items, [0 < length <= _ITEM_CHARS for length in lengths]))
        if len(short) >= max(_THREAD_ITEMS, 0.8 * len(items)):
            found += short
    return found


def _a_thread(sample: list[Element], stats: Stats) -> bool:
    """Whether alike items, judged by the first of them, are a thread: short, without
    titles of their own, most of them signed."""
    lengths = sorted(stats.text.get(item, 0) for item in sample)
    if lengths[len(lengths) // 2] > _COMMENT_CHARS:
        return False  # long items: posts or an article's parts, not a thread's comments
    if sum(1 for item in sample if next(item.iter(*_TITLES), None) is not None) >= len(sample) / 2:
        return False  # items with titles of their own: posts, not a thread's comments
    return sum(1 for item in sample if _signed(block_text(item))) >= 0.8 * len(sample)


def _signed(text: str) -> bool:
    """Whether a signature opens or closes `text` (where a thread writes it)."""
    text = text.strip()
    return (
        _SIGNED.search(text, 0, _SIGNATURE_CHARS) is not None
        or _SIGNED.search(text, max(0, len(text) - _SIGNATURE_CHARS)) is not None
    )


def _teaser_run(children: list[Element], stats: Stats) -> list[Element]:
    """Three or more linked headings after the block's first paragraph of its own, each
    with at most a short summary after it, and the plain heading just before them."""
    linked = [
        index
        for index, child in enumerate(children)
        if child.tag in _HEADINGS and _is_link(child, stats)
    ]
    if len(linked) < _TEASERS:
        return []
    first = linked[0]
    if not any(stats.prose.get(child, 0) for child in children[:first]):
        return []  # nothing of the block's own before them: they may be its content
    run: list[Element] = []
    previous = children[first - 1] if first else None
    if previous is not None and previous.tag in _HEADINGS and not _is_link(previous, stats):
        run.append(previous)
    for position, index in enumerate(linked):
        stop = linked[position + 1] if position + 1 < len(linked) else len(children)
        after = children[index + 1 : stop]
        if len(after) > 1 or any(stats.text.get(part, 0) > _SUMMARY_CHARS for part in after):
            return []
        run.append(children[index])
        run += after
    return run


def _is_link(heading: Element, stats: Stats) -> bool:
    length = stats.text.get(heading, 0)
    return bool(length) and stats.links.get(heading, 0) >= 0.8 * length
