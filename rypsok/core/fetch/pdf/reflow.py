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
_TOKEN: Final = re.compile(r"[\w-]+")
_PART: Final = r"[^\W\d_]+(?:[-\u2010][^\W\d_]+)*"  # a word, with its own hyphens
_WORD_END: Final = re.compile(rf"{_PART}$")
_HEAD: Final = re.compile(rf"^({_PART})")


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
        found = set(_TOKEN.findall(" ".join(self.texts).lower().replace("\u2010", "-")))
        # Most tokens are plain words (letters only): they go in without a loop of Python's.
        self.words.update(filter(str.isalpha, found))
        for token in {token for token in found if "-" in token}:
            word = token.strip("-")
            if word.isalpha():
                self.words.add(word)
            elif "-" in word and word.replace("-", "").isalpha():
                self.compounds.add(word)
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
    if text.isascii() and "\x02" not in text:
        return text  # (isascii is a flag of the string: the usual case costs no pass over it)
    return text.translate(_LIGATURES)


def _inner(text: str, vocabulary: Vocabulary) -> str:
    """`text` with PDFium's line-end hyphen marks (U+FFFE) resolved."""
    if "\ufffe" not in text:
        return text
    parts = text.split("\ufffe")
    out = parts[0]
    for part in parts[1:]:
        first = _word_before(out)
        rest = part.lstrip()
        head = _HEAD.match(rest)
        if first is None or head is None:
            out += "-" + (rest if first is not None and rest else part)
        elif vocabulary.keeps_hyphen(first, head.group(1)):
            out += "-" + rest
        else:
            out += rest
    return out


def _word_before(text: str) -> str | None:
    """The word (letters, with its own hyphens) that ends `text`, if a word ends it."""
    last = text.rsplit(" ", 1)[-1][-64:].replace("\u2010", "-")
    match = _WORD_END.search(last)
    return match.group() if match is not None else None


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
        tail = _word_before(out[:-1]) if out[-1] in _HYPHENS else None
        head = _HEAD.match(line) if tail is not None else None
        if tail is not None and head is not None:
            if vocabulary.keeps_hyphen(tail, head.group(1)):
                out = out[:-1] + "-" + line
            else:
                out = out[:-1] + line
        elif out[-1] in _HYPHENS and out[-2:-1].isalnum():
            # A hyphen between a word and a number or a capital: the compound goes on.
            out = out[:-1] + "-" + line
        else:
            out += " " + line
    return _inner(out, vocabulary)
