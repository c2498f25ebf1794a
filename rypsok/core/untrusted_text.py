"""The content boundary: cleaning of external text and the instruction-like check.

Every title and snippet passes one of two cleaners, chosen by where the text came from
(external design §9): `clean_markup_text` for raw provider text that still carries markup and
entities (the JSON engines), `clean_decoded_text` for text a parser already decoded (a fetched
page's title, a scraping driver's results), so that ``std::vec::Vec<T> - Rust`` survives.

Both run, in this order (REQ-CTX-004): markup removal and entity decoding (raw text only),
whitespace collapsing, removal of invisible characters (REQ-SEC-015), NFC normalization, and
the bound (REQ-CTX-006, LIM-U1). The pipeline calls them on every title and snippet, so the
common case (no invisible character, nothing to normalize) costs a few regex scans and
nothing per character in Python.

Implements REQ-CTX-010.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from typing import TYPE_CHECKING, Final

import attrs

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = [
    "INVISIBLE_RANGES",
    "Cleaned",
    "clean_decoded_text",
    "clean_in_pieces",
    "clean_markup_text",
    "looks_like_instruction",
    "remove_invisible",
    "without_surrogates",
]

ZWNJ = "\u200c"
ZWJ = "\u200d"


@attrs.frozen(kw_only=True)
class Cleaned:
    """A cleaned string and what cleaning it did.

    `removed` counts the invisible characters taken out (the characters_removed notice);
    `truncated` says the bound cut the text (title_truncated / snippet_truncated);
    `instruction_like` says the text reads like an instruction to an agent (REQ-SEC-003).
    """

    text: str
    removed: int
    truncated: bool
    instruction_like: bool


# --- character classes --------------------------------------------------------------------

# Unicode White_Space. Defined explicitly because Python's str.isspace also counts the
# information separators U+001C..U+001F, which are control characters to remove and count.
_WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"

# Everything removed as invisible (before the joiner and variation-selector rules keep some):
# control characters that are not whitespace, format characters (Cf: soft hyphen, zero-width
# characters, bidi marks, embeddings, overrides and isolates, byte order mark, tags, ...), the
# rest of Default_Ignorable_Code_Point (combining grapheme joiner, Hangul fillers, Khmer
# inherent vowels, Mongolian selectors, variation selectors), surrogates and noncharacters.
INVISIBLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x0008),
    (0x000E, 0x001F),
    (0x007F, 0x0084),
    (0x0086, 0x009F),
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xD800, 0xDFFF),
    (0xFDD0, 0xFDEF),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
    # The two noncharacters at the end of every plane.
    *((plane + 0xFFFE, plane + 0xFFFF) for plane in range(0, 0x110000, 0x10000)),
)


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    parts = []
    for low, high in ranges:
        if low == high:
            parts.append(re.escape(chr(low)))
        else:
            parts.append(f"{re.escape(chr(low))}-{re.escape(chr(high))}")
    return "[" + "".join(parts) + "]"


@functools.cache
def _rx(source: str, flags: int = 0) -> re.Pattern[str]:
    """`source` compiled on first use. For the patterns that only text with invisible
    characters, a joiner or a selector, or an instruction's anchor word, reaches: most text
    never needs them, and compiling them at import (the CJK class alone takes about 2 ms,
    the instruction phrases 1.6 ms) would delay every start."""
    return re.compile(source, flags)


_INVISIBLE_CLASS = _char_class(INVISIBLE_RANGES)
_INVISIBLE_RUN = _INVISIBLE_CLASS + "+"  # compiled by _rx, as the sources below
# Scanning with the whole class is slow (each astral range is tested one by one), so the
# common case scans the Basic Multilingual Plane part and looks at the astral part only when
# the text has an astral character at all.
_INVISIBLE_BMP = re.compile(_char_class(tuple(r for r in INVISIBLE_RANGES if r[1] <= 0xFFFF)))
_INVISIBLE_ASTRAL = _char_class(tuple(r for r in INVISIBLE_RANGES if r[0] > 0xFFFF))
_ANY_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_ASCII_INVISIBLE = re.compile("[\x00-\x08\x0e-\x1f\x7f]")
# The information separators: Python's str.split counts them as whitespace, Unicode does not.
_SEPARATORS = re.compile("[\x1c-\x1f]")
_WS_RUN = re.compile(f"[{_WHITESPACE}]+")


def _has_invisible(text: str) -> bool:
    if text.isascii():
        return _ASCII_INVISIBLE.search(text) is not None
    if _INVISIBLE_BMP.search(text) is not None:
        return True
    return _ANY_ASTRAL.search(text) is not None and _rx(_INVISIBLE_ASTRAL).search(text) is not None


# Scripts whose orthography uses ZWNJ (REQ-SEC-015): Arabic script, and the Indic (Brahmic)
# scripts. Both neighbours of a kept ZWNJ belong to the same one of these two groups.
_ARABIC = (
    "[\u0600-\u06ff\u0750-\u077f\u0870-\u089f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufefe"
    "\U00010e60-\U00010e7f\U0001ec70-\U0001ecbf\U0001ee00-\U0001eeff]"
)
_INDIC = (
    "[\u0900-\u0dff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff\u1a20-\u1aaf\u1b00-\u1bbf"
    "\u1c00-\u1c4f\u1cd0-\u1cff\ua800-\ua82f\ua880-\ua8ff\ua980-\ua9df\uaa00-\uaa5f"
    "\uaa60-\uaaff\uabc0-\uabff\U00011000-\U00011dff]"
)

# Extended_Pictographic (UTS #51), which a ZWJ must join on both sides in an emoji sequence.
_PICTOGRAPHIC = (
    "[\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u2199\u21a9\u21aa\u231a\u231b\u2328"
    "\u2388\u23cf\u23e9-\u23f3\u23f8-\u23fa\u24c2\u25aa\u25ab\u25b6\u25c0\u25fb-\u25fe"
    "\u2600-\u2605\u2607-\u2612\u2614-\u2685\u2690-\u2705\u2708-\u2712\u2714\u2716"
    "\u271d\u2721\u2728\u2733\u2734\u2744\u2747\u274c\u274e\u2753-\u2755\u2757"
    "\u2763-\u2767\u2795-\u2797\u27a1\u27b0\u27bf\u2934\u2935\u2b05-\u2b07\u2b1b\u2b1c"
    "\u2b50\u2b55\u3030\u303d\u3297\u3299"
    "\U0001f000-\U0001f0ff\U0001f10d-\U0001f10f\U0001f12f\U0001f16c-\U0001f171"
    "\U0001f17e\U0001f17f\U0001f18e\U0001f191-\U0001f19a\U0001f1ad-\U0001f1e5"
    "\U0001f201-\U0001f20f\U0001f21a\U0001f22f\U0001f232-\U0001f23a\U0001f23c-\U0001f23f"
    "\U0001f249-\U0001f3fa\U0001f400-\U0001f53d\U0001f546-\U0001f64f\U0001f680-\U0001f6ff"
    "\U0001f774-\U0001f77f\U0001f7d5-\U0001f7ff\U0001f80c-\U0001f80f\U0001f848-\U0001f84f"
    "\U0001f85a-\U0001f85f\U0001f888-\U0001f88f\U0001f8ae-\U0001f8ff\U0001f90c-\U0001f93a"
    "\U0001f93c-\U0001f945\U0001f947-\U0001faff\U0001fc00-\U0001fffd]"
)
# Emoji modifiers (skin tones) end an emoji before a ZWJ too: 👩🏽‍💻.
_EMOJI_MODIFIER = "[\U0001f3fb-\U0001f3ff]"

_CJK = "[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]"
_MONGOLIAN = "[\u1800-\u18af]"
_MONGOLIAN_SELECTORS = frozenset("\u180b\u180c\u180d\u180f")
_STANDARD_SELECTORS = frozenset(chr(c) for c in range(0xFE00, 0xFE10))
_JOINERS = frozenset((ZWNJ, ZWJ))


def _is_virama(ch: str) -> bool:
    # Canonical combining class 9 is the virama class of every Brahmic script.
    return unicodedata.combining(ch) == 9 and _rx(_INDIC).match(ch) is not None


def _keeps_selector(selector: str, base: str) -> bool:
    """A variation selector stays only directly after a character it can vary."""
    if base.isspace():
        return False
    if selector in _STANDARD_SELECTORS:
        return True
    if selector in _MONGOLIAN_SELECTORS:
        return _rx(_MONGOLIAN).match(base) is not None
    # VS17..VS256 (U+E0100..U+E01EF) are ideographic variation selectors.
    if "\U000e0100" <= selector <= "\U000e01ef":
        return _rx(_CJK).match(base) is not None
    return False


def _letter_or_mark(ch: str) -> bool:
    # Orthography is between letters and their marks, not next to digits or punctuation.
    return unicodedata.category(ch)[0] in "LM"


def _keeps_zwnj(before: str, after: str) -> bool:
    if not (_letter_or_mark(before) and _letter_or_mark(after)):
        return False
    if _rx(_ARABIC).match(before) and _rx(_ARABIC).match(after):
        return True
    return bool(_rx(_INDIC).match(before) and _rx(_INDIC).match(after))


def _keeps_zwj(before: str, after: str) -> bool:
    # An Indic conjunct: next to a virama, between two letters or marks of an Indic script.
    if (
        (_is_virama(before) or _is_virama(after))
        and _rx(_INDIC).match(before)
        and _rx(_INDIC).match(after)
        and _letter_or_mark(before)
        and _letter_or_mark(after)
    ):
        return True
    # Between two emoji: 👨‍👩‍👧, 🏳️‍🌈 (the selector was kept before), 👩🏽‍💻.
    emoji_before = _rx(_PICTOGRAPHIC).match(before) or _rx(_EMOJI_MODIFIER).match(before)
    return bool(emoji_before and _rx(_PICTOGRAPHIC).match(after))


def _kept_part(run: str, before: str | None, after: str | None) -> str:
    """What survives of one maximal run of invisible characters between two visible ones.

    At most one variation selector (the first character of the run, directly after its base)
    and at most one joiner (never at the start or the end of the text) are kept.
    """
    kept = ""
    if before is not None and _keeps_selector(run[0], before):
        kept = run[0]
    if before is None or after is None or before.isspace() or after.isspace():
        return kept
    has_zwj = ZWJ in run
    has_zwnj = ZWNJ in run
    if has_zwj and _keeps_zwj(before, after):
        return kept + ZWJ
    if has_zwnj and _keeps_zwnj(before, after):
        return kept + ZWNJ
    return kept


# A run with none of these in it is removed whole, without looking at its neighbours.
_KEEPABLE = (
    _JOINERS
    | _STANDARD_SELECTORS
    | _MONGOLIAN_SELECTORS
    | frozenset(chr(c) for c in range(0xE0100, 0xE01F0))
)


def remove_invisible(text: str) -> tuple[str, int]:
    """Remove invisible and control characters (REQ-SEC-015); return the text and the count.

    Whitespace is not touched here (the cleaners collapse it). The joiners ZWNJ and ZWJ and the
    variation selectors are kept only where they carry writing; everything else in the
    invisible set is removed and counted, one per scalar value.
    """
    if not _has_invisible(text):
        return text, 0
    removed = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal removed
        start, end = match.span()
        run = match.group()
        before = text[start - 1] if start > 0 else None
        after = text[end] if end < len(text) else None
        kept = _kept_part(run, before, after) if (set(run) & _KEEPABLE) else ""
        removed += len(run) - len(kept)
        return kept

    out = _rx(_INVISIBLE_RUN).sub(replace, text)
    return out, removed


_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(text: str) -> str:
    """The text without its surrogates: a provider's JSON may escape one (`"\\ud800"`), which
    no UTF-8 encoder accepts. For what a driver derives from external text before cleaning
    (a URL built from a title); the text itself is cleaned, and the removal counted, by the
    cleaners (surrogates are in INVISIBLE_RANGES)."""
    if text.isascii():
        return text
    return _SURROGATE.sub("", text)


# --- markup -----------------------------------------------------------------------------

# Elements whose content is not text a reader sees.
_HIDDEN_ELEMENT = re.compile(
    r"<(script|style|template|noscript)(?=[\s/>])(?:[^>\"']|\"[^\"]*\"|'[^']*')*>"
    r".*?(?:</\1\s*>|\Z)",
    re.IGNORECASE | re.DOTALL,
)
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_DECLARATION = re.compile(r"<![A-Za-z\[][^<>]*>|<\?[^<>]*>")
# A start or end tag: a name (after a prefix and a colon when namespaced: <jats:p>, <mml:mi>),
# then attributes where quoted values may hold any character. Each alternative begins with a
# different character, so matching is linear.
_TAG = re.compile(
    r"<(/?)(?:([A-Za-z_][A-Za-z0-9._-]*):)?([A-Za-z][A-Za-z0-9-]*)(?=[\s/>])"
    r"((?:[^<>\"']|\"[^\"]*\"|'[^']*')*)>"
)

# Tags that break a line in a rendered page: replaced by a space, so that words on either side
# stay apart. Every other HTML element disappears without a trace ("<b>Rust</b>acean").
# fmt: off
_BLOCK_ELEMENTS = frozenset((
    "address", "article", "aside", "blockquote", "br", "caption", "dd", "details", "dialog",
    "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3",
    "h4", "h5", "h6", "header", "hgroup", "hr", "li", "main", "menu", "nav", "ol", "option",
    "p", "pre", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr",
    "ul", "legend",
))
_INLINE_ELEMENTS = frozenset((
    "a", "abbr", "acronym", "area", "audio", "b", "base", "basefont", "bdi", "bdo", "big",
    "blink", "body", "button", "canvas", "center", "cite", "code", "col", "colgroup", "data",
    "datalist", "del", "dfn", "dir", "em", "embed", "font", "frame", "frameset", "head", "html",
    "i", "iframe", "img", "input", "ins", "kbd", "label", "link", "map", "mark", "marquee",
    "meta", "meter", "nobr", "noframes", "object", "optgroup", "output", "param", "picture",
    "progress", "q", "rp", "rt", "ruby", "s", "samp", "search", "select", "slot", "small",
    "source", "span", "strike", "strong", "sub", "sup", "svg", "math", "textarea", "time",
    "title", "track", "tt", "u", "var", "video", "wbr",
))
# fmt: on


# The JATS elements (Crossref's abstracts) that break a line and HTML's block ones omit.
_JATS_BLOCK_ELEMENTS = frozenset(("sec", "title", "list", "list-item", "label"))


def _replace_tag(match: re.Match[str]) -> str:
    name, namespaced = match.group(3).lower(), match.group(2) is not None
    if name in _BLOCK_ELEMENTS or (namespaced and name in _JATS_BLOCK_ELEMENTS):
        return " "
    # A namespaced tag is markup whatever its name: no text writes "<a:b>".
    if namespaced or name in _INLINE_ELEMENTS:
        return ""
    # Not an HTML element: text such as "Vec<T>" or "a <b" that happens to use angle brackets.
    return match.group()


def _remove_markup(raw: str) -> str:
    if "<" not in raw:
        return raw
    text = _HIDDEN_ELEMENT.sub(" ", raw)
    text = _COMMENT.sub("", text)
    text = _DECLARATION.sub("", text)
    return _TAG.sub(_replace_tag, text)


# --- instruction-like patterns -------------------------------------------------------------

# The documented list (book/content-boundary.md). The text is lower-cased first (after the
# invisible characters are removed and compatibility forms such as fullwidth letters are
# folded), so the patterns are written in lower case. Words are separated by any whitespace,
# newlines included.
_INSTRUCTION_PHRASES = r"""
    \b(?:ignore|disregard|forget|override|skip)\s+(?:all\s+|any\s+|the\s+|your\s+|of\s+)*
        (?:previous|prior|above|earlier|preceding|former|foregoing|original)\s+
        (?:instructions?|prompts?|directions?|rules|guidelines|messages?|context|commands?)\b
    | \b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+)?(?:your|the\s+system'?s?)\s+
        (?:instructions|rules|guidelines|system\s+prompt)\b
    | \bdisregard\s+all\s+prior\b
    | \byou\s+are\s+now\s+(?:in\s+)?(?:an?\s+)?
        (?:dan|developer\s+mode|god\s+mode|jailbroken|unrestricted|unfiltered|uncensored
          |evil|different\s+(?:ai|assistant|model)|(?:ai|assistant|chatbot|language\s+model)\b)
    | \bfrom\s+now\s+on,?\s+you\s+(?:are|will|must|shall)\b
    | \b(?:reveal|print|show|output|repeat|leak|disclose)\s+(?:me\s+)?(?:your|the)\s+
        (?:system\s+prompt|hidden\s+prompt|initial\s+instructions|instructions)\b
    | \b(?:new|updated|revised|real|actual)\s+(?:system\s+)?(?:prompt|instructions)\s*:
    | \bsystem\s+prompt\s*:
    | \b(?:do\s+not|don'?t|never)\s+(?:tell|inform|alert|reveal\s+(?:this\s+)?to)\s+the\s+user\b
    | \bwithout\s+(?:telling|informing|alerting)\s+the\s+user\b
    | \b(?:note|message|instructions?|attention)\s+(?:to|for)\s+(?:the\s+|all\s+|any\s+)?
        (?:ai|llm|assistant|agent|ai\s+agent|ai\s+assistant|language\s+model|chatbot)s?\s*[:,!]
    | <\|\s*(?:im_start|im_end|im_sep|system|user|assistant|endoftext|eot_id
              |start_header_id|end_header_id|begin_of_text)\s*\|>
    | \[/?inst\] | <</?sys>> | <(?:start|end)_of_turn>
    | </?(?:system|assistant|user)(?:_prompt|_message)?>
    | (?<!\#)\#{2,}+\s*+(?:instruction|system|response)s?\b
    """  # compiled by _rx, re.VERBOSE
# Every phrase above contains one of these; one scan for them (a literal-led alternation is
# several times faster than the phrases) decides whether the phrases are tried at all.
_INSTRUCTION_ANCHORS = re.compile(
    r"ignore|disregard|forget|override|skip|you\s+are\s+now|from\s+now|prompt|instruction"
    r"|the\s+user|note\s|message\s|attention\s|<\||\[/?inst\]|<</?sys>>|_of_turn>"
    r"|system|assistant|user(?:_message)?>|##"
)
# A role label at the start of a line (or of the text): "assistant: sure, here is ...".
_ROLE_AT_LINE_START = re.compile(r"^[ \t]*(?:system|assistant|human|ai)[ \t]*:", re.MULTILINE)


def looks_like_instruction(text: str, checkpoint: Callable[[], None] | None = None) -> bool:
    """True when the text carries a pattern from the documented instruction-like list.

    It only looks: the text is never changed (REQ-SEC-003); the notice, and the optional drop,
    are the pipeline's decision. A text longer than a piece is read in pieces (see
    `_instruction_like_in_pieces`), with the same answer; `checkpoint` runs between them (the
    pipeline's raises once its call was abandoned).
    """
    if len(text) <= PIECE_CHARS:
        view, _ = remove_invisible(text)
        return _instruction_like_visible(view)
    return _instruction_like_in_pieces(text, PIECE_CHARS, checkpoint or _nothing)


def _instruction_like_visible(view: str) -> bool:
    if not view.isascii():
        view = unicodedata.normalize("NFKC", view)
    view = view.lower()
    if _ROLE_AT_LINE_START.search(view) is not None:
        return True
    return (
        _INSTRUCTION_ANCHORS.search(view) is not None
        and _rx(_INSTRUCTION_PHRASES, re.VERBOSE).search(view) is not None
    )


# --- long texts, in pieces ----------------------------------------------------------------
#
# One regular-expression scan, normalization or removal over a whole page (5 MB) is one C
# call that holds the GIL for up to 1.8 s: the event loop cannot answer any call meanwhile,
# and a fetch ends past LIM-F5. A long text is therefore read in pieces of about
# PIECE_CHARS characters, Python running between them (the GIL can pass, and the caller's
# checkpoint can end an abandoned read). The answer is the whole text's, on every input,
# because of where a text is cut and how each piece is read:
#
# - A cut falls between two characters that every step reads without looking across them:
#   neither is invisible (REQ-SEC-015 looks only at a run's neighbours), the second has no
#   NFC/NFKC composition with what precedes (an ASCII character, a character with combining
#   class 0 after white space, or one of two CJK ideographs or Hangul syllables), and neither
#   lets a final sigma's context through (str.lower() reads a capital sigma's neighbours,
#   skipping case-ignorable characters: white space, ASCII letters and digits and ideographs
#   are not case-ignorable).
# - For the instruction check a cut also falls outside every run that the check's patterns
#   repeat without bound: a run of white space, of "#", and of the filler words of the first
#   phrase ("ignore all the ... previous instructions"). Each piece's runs are then shortened
#   to what the patterns cannot tell apart (white space to one character, "#" to two, five
#   filler words or more to four), so that no match is longer than _MATCH_BOUND, and each
#   piece is searched with _OVERLAP characters of its neighbours on both sides: a match that
#   starts in the piece ends within its overlap, and every assertion sees its true context.

PIECE_CHARS: Final = 16384
# Longer than any match of the patterns once runs are shortened: the longest phrase is about
# 70 characters ("disregard" + four filler words + "foregoing guidelines", the role labels
# with their one white-space character, a chat-template token).
_MATCH_BOUND: Final = 128
_OVERLAP: Final = 2 * _MATCH_BOUND
# Where a cut may fall (the first test; the second is `_cut_allowed`): after white space and
# before a character that starts no run (an ASCII one that is not white space, "#" nor the
# first letter of a filler word; any other character is looked at in Python); between two
# ASCII letters or digits that are not two neighbours inside a filler word; between two
# ideographs or two Hangul syllables.
_CUT: Final = re.compile(
    r"(?<=[ \n\t])(?:(?=[\x21-\x7e])(?![#atyoATYO])|(?=[^\x00-\x7f]))"
    r"|(?<=[A-Za-z0-9])(?=[A-Za-z0-9])"
    r"(?!(?<=[aA])[lLnN]|(?<=[lL])[lL]|(?<=[nN])[yY]|(?<=[tT])[hH]|(?<=[hH])[eE]"
    r"|(?<=[yY])[oO]|(?<=[oO])[uUfF]|(?<=[uU])[rR])"
    r"|(?<=[\u4e00-\u9fff\uac00-\ud7a3])(?=[\u4e00-\u9fff\uac00-\ud7a3])"
)
_RUN_STARTS: Final = frozenset("#atyo")


def _nothing() -> None:
    return None


def _cut_allowed(text: str, at: int) -> bool:
    """Whether `text` may be cut before `at`, a place `_CUT` found."""
    after = text[at]
    if after.isascii() or not text[at - 1].isspace():
        return True  # the pattern alone decides
    # White space, then a character that is not ASCII: it must be visible, compose with
    # nothing before it, and not be read (NFKC, lower case) as the start of a run.
    if _has_invisible(after) or unicodedata.combining(after):
        return False
    read = unicodedata.normalize("NFKC", after).lower()
    if not read or read[0].isspace() or read[0] in _RUN_STARTS:
        return False
    before = text[at - 1]
    return unicodedata.normalize("NFKC", before + after) == before + unicodedata.normalize(
        "NFKC", after
    )


def _cuts(text: str, piece_chars: int, checkpoint: Callable[[], None]) -> Iterator[int]:
    """The places `text` is cut at: the first allowed place at least `piece_chars` after the
    last. Each search is bounded to a window, so no scan holds the GIL long."""
    size = len(text)
    start = 0
    while size - start > piece_chars:
        position = start + piece_chars
        found = None
        while found is None and position < size:
            checkpoint()
            end = min(position + PIECE_CHARS, size)
            for match in _CUT.finditer(text, position, end):
                if _cut_allowed(text, match.start()):
                    found = match.start()
                    break
            position = end
        if found is None:
            return
        yield found
        start = found


def _pieces(text: str, piece_chars: int, checkpoint: Callable[[], None]) -> Iterator[str]:
    start = 0
    for cut in _cuts(text, piece_chars, checkpoint):
        yield text[start:cut]
        start = cut
    yield text[start:]


_SPACE_RUN: Final = re.compile(r"\s{2,}")
_SPACE_OR_TAB: Final = frozenset(" \t")
_HASH_RUN: Final = re.compile(r"#{3,}")
_FILLER: Final = r"(?:all|any|the|your|of)\s"
_FILLER_RUN: Final = re.compile(rf"(?<!\S)(?:{_FILLER}){{5,}}")
_FILLER_WORD: Final = re.compile(_FILLER)


def _one_space(match: re.Match[str]) -> str:
    """A run of white space as the patterns tell it apart: `\\s+` reads any run alike; a role
    label (`^[ \\t]*`) needs to know whether a line starts in it and ends in spaces and tabs
    only, and a run with no line end whether it is spaces and tabs only."""
    run = match.group()
    line = run.rfind("\n")
    if line >= 0:
        return "\n" if all(c in _SPACE_OR_TAB for c in run[line + 1 :]) else "\x0b"
    return " " if all(c in _SPACE_OR_TAB for c in run) else "\x0b"


def _filler_ends(match: re.Match[str]) -> str:
    """A run of five filler words or more as its first two and last two: the first phrase
    takes any number, every other pattern at most two next to a word that is no filler."""
    words = _FILLER_WORD.findall(match.group())
    return "".join(words[:2] + words[-2:])


def _instruction_view(piece: str) -> str:
    """A piece as the instruction check reads it: invisible characters removed, NFKC, lower
    case, and its runs shortened."""
    view, _ = remove_invisible(piece)
    if not view.isascii():
        view = unicodedata.normalize("NFKC", view)
    view = _SPACE_RUN.sub(_one_space, view.lower())
    if "###" in view:
        view = _HASH_RUN.sub("##", view)
    return _FILLER_RUN.sub(_filler_ends, view)


def _around(views: list[str], index: int, chars: int, *, after: bool) -> str:
    """Up to `chars` characters of the views before (or after) `views[index]`."""
    parts: list[str] = []
    taken = 0
    others = views[index + 1 :] if after else reversed(views[:index])
    for view in others:
        part = view[: chars - taken] if after else view[max(0, len(view) - (chars - taken)) :]
        parts.append(part)
        taken += len(part)
        if taken >= chars:
            break
    return "".join(parts) if after else "".join(reversed(parts))


def _found_in(pattern: re.Pattern[str], views: list[str], checkpoint: Callable[[], None]) -> bool:
    """Whether `pattern` matches the joined views, searched piece by piece."""
    for index, view in enumerate(views):
        if not view:
            continue
        checkpoint()
        before = _around(views, index, _OVERLAP, after=False)
        window = before + view + _around(views, index, _OVERLAP, after=True)
        match = pattern.search(window, len(before))
        # A match starting in the overlap after the piece is the next piece's to find.
        if match is not None and match.start() < len(before) + len(view):
            return True
    return False


def _instruction_like_in_pieces(
    text: str, piece_chars: int, checkpoint: Callable[[], None]
) -> bool:
    """`looks_like_instruction`, read in pieces of about `piece_chars` characters."""
    views = []
    for piece in _pieces(text, piece_chars, checkpoint):
        checkpoint()
        views.append(_instruction_view(piece))
    if _found_in(_ROLE_AT_LINE_START, views, checkpoint):
        return True
    return _found_in(_INSTRUCTION_ANCHORS, views, checkpoint) and _found_in(
        _rx(_INSTRUCTION_PHRASES, re.VERBOSE), views, checkpoint
    )


def _unchanged(piece: str) -> bool:
    return not _has_invisible(piece) and (
        piece.isascii() or unicodedata.is_normalized("NFC", piece)
    )


def clean_in_pieces(text: str, checkpoint: Callable[[], None] | None = None) -> tuple[str, int]:
    """`remove_invisible`, then NFC, of a long text (a fetched page's content), in pieces
    cut where neither step looks across (see above); `checkpoint` runs between them. The
    text itself comes back, never copied, when neither step changes anything."""
    check = checkpoint or _nothing
    if len(text) <= PIECE_CHARS:
        pieces = [text]
    else:
        for piece in _pieces(text, PIECE_CHARS, check):
            check()
            if not _unchanged(piece):
                break
        else:
            return text, 0
        pieces = list(_pieces(text, PIECE_CHARS, check))
    if all(_unchanged(piece) for piece in pieces):
        return text, 0
    removed = 0
    for index, piece in enumerate(pieces):
        check()
        cleaned, count = remove_invisible(piece)
        removed += count
        if not cleaned.isascii() and not unicodedata.is_normalized("NFC", cleaned):
            cleaned = unicodedata.normalize("NFC", cleaned)
        pieces[index] = cleaned
    return "".join(pieces), removed


# --- the cleaners ---------------------------------------------------------------------------


def _collapse(text: str) -> str:
    if _SEPARATORS.search(text) is None:
        # str.split without an argument splits on exactly the Unicode White_Space characters
        # once U+001C..U+001F are absent, and does it in C.
        return " ".join(text.split())
    return _WS_RUN.sub(" ", text).strip(" ")


def _bound(text: str, max_chars: int) -> tuple[str, bool]:
    """Cut to max_chars scalar values (a Python str indexes scalar values: no split is
    possible inside one); never end on a space or a joiner."""
    if len(text) <= max_chars:
        return text, False
    # A kept joiner always has visible neighbours, so a joiner and a space never sit side by
    # side: one strip of both leaves an end that cleaning would not change again.
    return text[:max_chars].rstrip(" \u200c\u200d"), True


def _finish(decoded: str, max_chars: int) -> Cleaned:
    if max_chars < 0:
        raise ValueError("max_chars must not be negative")
    # The removal runs before the collapse here although REQ-CTX-004 lists it after: the two
    # commute (the removal treats every whitespace character alike and never removes one),
    # and this way the instruction check sees the text's line starts without a second pass.
    text, removed = remove_invisible(decoded)
    instruction_like = _instruction_like_visible(text)
    text = _collapse(text)
    if not text.isascii() and not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    text, truncated = _bound(text, max_chars)
    return Cleaned(
        text=text, removed=removed, truncated=truncated, instruction_like=instruction_like
    )


def clean_markup_text(raw: str, max_chars: int) -> Cleaned:
    """Clean raw provider text: markup removed, entities decoded, then as `clean_decoded_text`.

    HTML and namespaced elements (`<jats:p>`) count as tags, so "a < b" and "Vec<T>" survive.
    Entities are decoded once, after the markup is gone: "&amp;lt;" becomes "&lt;", and
    "&lt;here&gt;" the text "<here>", never read as markup again.
    """
    decoded = _remove_markup(raw)
    if "&" in decoded:
        decoded = html.unescape(decoded)
    return _finish(decoded, max_chars)


def clean_decoded_text(text: str, max_chars: int) -> Cleaned:
    """Clean text a parser already decoded: whitespace, invisible characters, NFC, bound."""
    return _finish(text, max_chars)
