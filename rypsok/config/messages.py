"""The configuration error and the words its messages use.

A message names the key, says what was expected and what kind of value was found, and
never repeats a value from the file: a text can be a secret pasted into the wrong key.
"""

from __future__ import annotations

import datetime
from typing import Final

import attrs

__all__ = ["ConfigError", "Place", "kind_of", "with_place"]


@attrs.frozen(kw_only=True)
class Place:
    """A 1-based line and column in the file as its author sees it."""

    line: int
    column: int

    def __str__(self) -> str:
        return f"(line {self.line}, column {self.column})"


class ConfigError(Exception):
    """A configuration that serve and check refuse; `str()` is one line."""

    def __init__(self, message: str) -> None:
        # One line whatever a caller passes: a line break would split the report.
        super().__init__(" ".join(message.split()))
        # Which file was refused, for a caller that validates several; set by the loader.
        self.source: str | None = None


def with_place(message: str, place: Place | None) -> str:
    return message if place is None else f"{message} {place}"


# First match wins: bool comes before int because a Python bool is an int too.
_KINDS: Final[tuple[tuple[type | tuple[type, ...], str], ...]] = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a decimal number"),
    (str, "text"),
    (list, "an array"),
    (dict, "a table"),
    ((datetime.date, datetime.time), "a date or time"),
)


def kind_of(value: object) -> str:
    """The kind of a TOML value in the words of the book, never the value itself."""
    return next(
        (word for kind, word in _KINDS if isinstance(value, kind)), "a value of another kind"
    )
