"""The attribute bounds of the parse (LIM-F16, LIM-F17, REQ-PAGE-006).

libxml2 collects every attribute of a tag and lxml hands them to the target as one dict, so a
single tag carrying 400,000 attributes costs about 90 MiB before the target could refuse it.
`attribute_cut` therefore reads the document first as the HTML tokenizer does (tags, quoted
values, comments, raw text), and the parser is fed only up to the first tag with more than
MAX_ELEMENT_ATTRIBUTES; the target keeps only KEPT_ATTRIBUTES, at most MAX_KEPT_ATTRIBUTES
in all.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["KEPT_ATTRIBUTES", "MAX_ELEMENT_ATTRIBUTES", "MAX_KEPT_ATTRIBUTES", "attribute_cut"]

# LIM-F16: attributes of one element (start or end tag). Real markup stays far below (a few
# dozen at most); past it a tag is an attack on memory, and the parse stops before it.
MAX_ELEMENT_ATTRIBUTES: Final = 256
# LIM-F17: attributes kept in the tree, in total. A kept attribute costs about 280 bytes of
# parse (10 on each of 63,000 elements of a 5 MiB page made a parse of 196 MiB; at the node
# bound, two on each node 127 MiB, one 98, none 70): one per node at the node bound.
MAX_KEPT_ATTRIBUTES: Final = 100_000

# The attributes the extraction and the Markdown writer read; the others are dropped.
KEPT_ATTRIBUTES: Final = frozenset(
    {
        "id",
        "class",
        "role",
        "itemprop",
        "href",
        "alt",
        "src",
        "start",
        "colspan",
        "rowspan",
        "open",
    }
)


# The HTML tokenizer's view of a document (WHATWG HTML §13.2.5, which libxml2 2.14 follows),
# as far as attributes need it: text, comments, bogus comments (``<!…>``, ``<?…>``), end tags,
# raw text elements (their content is not markup) and start tags, each tag with at most
# MAX_ELEMENT_ATTRIBUTES attributes. Matched from the start with every quantifier possessive
# (linear: nothing is tried twice), it ends at the first tag with more, or at the end.
# Where it cannot agree with libxml2 it ends a comment or a raw text earlier, so it may read
# more as markup than libxml2 does, never less: a tag libxml2 builds is always counted.
_WS: Final = r"[\t\n\f\r ]"
_SEP: Final = r"[\t\n\f\r /]*+"
_VALUE: Final = r"""(?:"[^"]*+(?:"|\Z)|'[^']*+(?:'|\Z)|[^\t\n\f\r >]*+)"""
_ATTRIBUTE: Final = rf"[^\t\n\f\r />][^\t\n\f\r />=]*+(?:{_WS}*+={_WS}*+{_VALUE})?+"
_ATTRIBUTES: Final = rf"(?:{_SEP}{_ATTRIBUTE}){{0,{MAX_ELEMENT_ATTRIBUTES}}}+{_SEP}"
_TAG_END: Final = rf"{_ATTRIBUTES}(?:>|\Z)"
_RAW_TEXT: Final = ("script", "style", "xmp", "iframe", "noembed", "noframes", "textarea", "title")
# The alternatives most text meets come first; the raw text elements behind one look at the
# first letter of their names, so an ordinary tag costs one failed test, not eight.
_CONSTRUCT: Final = "|".join(
    (
        r"[^<]++",
        "<(?=[sStTxXiInN])(?:"
        + "|".join(
            rf"(?i:{name})(?={_WS}|/|>|\Z){_ATTRIBUTES}(?:>(?s:.*?)(?=</(?i:{name})|\Z)|\Z)"
            for name in _RAW_TEXT
        )
        + ")",
        rf"<(?i:plaintext)(?={_WS}|/|>|\Z)(?s:.*)",
        rf"<[A-Za-z][^\t\n\f\r />]*+{_TAG_END}",
        rf"</[A-Za-z][^\t\n\f\r />]*+{_TAG_END}",
        r"<!--(?:>|->|(?s:.*?)(?:--!?>|\Z))",
        r"<[!?][^>]*+(?:>|\Z)",
        r"</>",
        r"</(?![A-Za-z>])[^>]*+(?:>|\Z)",
        r"<(?![A-Za-z/!?])",
    )
)
# At most this many constructs a match: the scan returns to Python between them, where the
# GIL can pass to the event loop (one match over a page of 100,000 elements held it 0.2 s).
_CONSTRUCTS_A_MATCH: Final = 4096
_MARKUP: Final = f"(?:{_CONSTRUCT}){{0,{_CONSTRUCTS_A_MATCH}}}+"
_WITHIN_BOUND: Final = re.compile(_MARKUP)
_WITHIN_BOUND_BYTES: Final = re.compile(_MARKUP.encode("ascii"))


def attribute_cut(document: str | bytes) -> int | None:
    """The offset of the first tag of `document` with more than MAX_ELEMENT_ATTRIBUTES
    attributes, or None. Bytes are read as an ASCII-compatible encoding (another one, such as
    UTF-16, is left to the target's own count)."""
    offset, size = 0, len(document)
    while offset < size:
        if isinstance(document, str):
            within = _WITHIN_BOUND.match(document, offset)
            end = within.end() if within is not None else offset
        else:
            within_bytes = _WITHIN_BOUND_BYTES.match(document, offset)
            end = within_bytes.end() if within_bytes is not None else offset
        if end == offset:
            # No construct fits here: a tag beyond the bound.
            return offset
        offset = end
    return None
