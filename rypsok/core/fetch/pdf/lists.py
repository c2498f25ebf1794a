"""List items recognised by their markers: bullets and numbers (REQ-PDF-006).

A line starting with a bullet (``•``, ``◦``, ``▪``, ``–``, ``-``, ``*``…) or a number or letter
followed by ``.`` or ``)`` (``1.``, ``2)``, ``a.``, ``iv)``) starts a list item; the number of
an ordered item is its own number (letters and roman numerals count from their place in the
alphabet or the numerals).
"""

from __future__ import annotations

import re
from typing import Final

import attrs

__all__ = ["Marker", "is_marker", "marker_of"]

_MARKER: Final = re.compile(
    r"^\s*(?:(?P<bullet>[•◦▪▫●○■□‣⁃∙·\-–—*➢►✓])"
    r"|\(?(?P<number>\d{1,3}|[a-z]|[ivx]{1,5})[.)])(?:\s+|$)"
)
_ROMAN: Final = {"i": 1, "v": 5, "x": 10}


@attrs.frozen
class Marker:
    """A list marker: whether it numbers, its number, and the text after it."""

    ordered: bool
    number: int
    rest: str


def _value(token: str) -> int:
    if token.isdigit():
        return int(token)
    if len(token) == 1 and token not in "ivx":
        return ord(token) - ord("a") + 1
    total = 0
    for ch, nxt in zip(token, [*token[1:], ""], strict=True):
        value = _ROMAN[ch]
        total += -value if nxt and _ROMAN[nxt] > value else value
    return total


def marker_of(text: str) -> Marker | None:
    """The list marker `text` starts with, if any."""
    match = _MARKER.match(text)
    if match is None:
        return None
    rest = text[match.end() :]
    if match.group("bullet") is not None:
        return Marker(ordered=False, number=0, rest=rest)
    return Marker(ordered=True, number=_value(match.group("number")), rest=rest)


def is_marker(text: str) -> bool:
    """Whether `text` is a list marker and nothing else."""
    marker = marker_of(text.strip())
    return marker is not None and not marker.rest.strip()
