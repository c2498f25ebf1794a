"""Reads and edits of the tree shared by the main block's steps."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rypsok.core.fetch.mainblock.measure import Element

__all__ = ["block_text", "drop_all"]


def block_text(element: Element) -> str:
    return str(element.xpath("string()"))


def drop_all(doomed: list[Element]) -> list[Element]:
    """Remove the `doomed` elements (in document order, none inside another) but keep their
    tail text in place; the elements whose text or tail the tails joined.

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
    return [element for element, _ in pieces]
