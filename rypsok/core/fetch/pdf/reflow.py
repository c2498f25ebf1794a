"""A block's lines joined into running text (REQ-PDF-004).

Lines are joined with a space. A word hyphenated at a line's end is rejoined
(``extrac-`` + ``tion`` gives ``extraction``) unless the document writes the compound with its
hyphen elsewhere, or either part has hyphens of its own (``state-of-`` + ``the-art``: TeX
breaks such a word only at its hyphens), or its first part is one that forms compounds
(``well-``, ``self-``…), or what follows is not a lowercase letter (``COVID-`` + ``19``):
then the hyphen stays and the space goes. PDFium marks a hyphen it took for a line-end
hyphen with U+FFFE and joins the lines itself; that mark is judged the same way. Ligature
characters (``ﬁ``, ``ﬂ``…) are written as their letters and soft hyphens are dropped.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["Vocabulary", "clean_text", "join_lines"]

_LIGATURES: Final = str.maketrans(
    {
        "\ufb00": "ff",
        "\ufb01": "fi",
        "\ufb02": "fl",
        "\ufb03": "ffi",
        "\ufb04": "ffl",
        "\ufb05": "st",
        "\ufb06": "st",
        "\u00ad": "",
        "\x02": "\ufffe",  # older PDFium builds mark the line-end hyphen with STX
    }
)
_HYPHENS: Final = "-\u2010\ufffe"
_COMPOUND_FIRST: Final = frozenset(
    {"well", "self", "non", "ill", "so", "all", "half", "cross", "ever", "ex", "vice"}
)
_WORD: Final = re.compile(r"[^\W\d_]+(?:[-\u2010][^\W\d_]+)*")
_PART: Final = r"[^\W\d_]+(?:[-\u2010][^\W\d_]+)*"  # a word, with its own hyphens
_TAIL: Final = re.compile(rf"({_PART})[-\u2010\ufffe]$")
_HEAD: Final = re.compile(rf"^({_PART})")
_INNER: Final = re.compile(rf"({_PART})\ufffe\s*((?:{_PART})?)")


@attrs.define
class Vocabulary:
    """The words of a document and the hyphenated compounds it writes within a line.

    They are collected on the first question (most documents ask none).
    """

    texts: list[str]
    words: set[str] = attrs.field(factory=set)
    compounds: set[str] = attrs.field(factory=set)
    ready: bool = False

    @classmethod
    def of(cls, texts: Iterable[str]) -> Vocabulary:
        return cls(texts=list(texts))

    def _collect(self) -> None:
        found = set(_WORD.findall(" ".join(self.texts).lower().replace("\u2010", "-")))
        self.compounds = {word for word in found if "-" in word}
        self.words = found - self.compounds
        self.ready = True

    def keeps_hyphen(self, first: str, rest: str) -> bool:
        """Whether `first`-`rest`, split at a line's end, is a compound rather than one word."""
        if not rest[:1].islower() or "-" in first + rest or "\u2010" in first + rest:
            # A word with hyphens of its own is broken only at them (state-of- the-art).
            return True
        if not self.ready:
            self._collect()
        low_first, low_rest = first.lower(), rest.lower()
        if f"{low_first}-{low_rest}" in self.compounds:
            return True
        if low_first + low_rest in self.words:
            return False
        return low_first in _COMPOUND_FIRST


def clean_text(text: str) -> str:
    """`text` with ligatures as letters and soft hyphens dropped (U+FFFE marks are kept)."""
    return text.translate(_LIGATURES)


def _inner(text: str, vocabulary: Vocabulary) -> str:
    """`text` with PDFium's line-end hyphen marks (U+FFFE) resolved."""

    def resolve(match: re.Match[str]) -> str:
        first, rest = match.group(1), match.group(2)
        if rest and vocabulary.keeps_hyphen(first, rest):
            return f"{first}-{rest}"
        return first + rest if rest else first + "-"

    if "\ufffe" not in text:
        return text
    return _INNER.sub(resolve, text).replace("\ufffe", "-")


def join_lines(lines: list[str], vocabulary: Vocabulary) -> str:
    """The lines of one block as running text (see the module's docstring)."""
    out = ""
    for raw in lines:
        line = " ".join(clean_text(raw).split())
        if not line:
            continue
        if not out:
            out = line
            continue
        tail = _TAIL.search(out[-80:]) if out[-1] in _HYPHENS else None
        head = _HEAD.match(line) if tail is not None else None
        if tail is not None and head is not None:
            if vocabulary.keeps_hyphen(tail.group(1), head.group(1)):
                out = out[:-1] + "-" + line
            else:
                out = out[:-1] + line
        elif out[-1] in _HYPHENS and out[-2:-1].isalnum():
            # A hyphen between a word and a number or a capital: the compound goes on.
            out = out[:-1] + "-" + line
        else:
            out += " " + line
    return _inner(out, vocabulary)
