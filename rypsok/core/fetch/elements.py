"""The HTML elements every stage after the parse reads as blocks (REQ-FETCH-002, -004).

The main block measures a block's own run of text and the Markdown writer sets a block apart
from what surrounds it: both read the same set, defined here once.
"""

from __future__ import annotations

from typing import Final

__all__ = ["BLOCK_ELEMENTS"]

# Elements that stand apart from what surrounds them. Any other element, unknown and custom
# ones included, is inline, as a browser renders it, unless it holds blocks.
BLOCK_ELEMENTS: Final = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "center",
        "dd",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hgroup",
        "hr",
        "html",
        "legend",
        "li",
        "listing",
        "main",
        "menu",
        "nav",
        "ol",
        "p",
        "plaintext",
        "pre",
        "search",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
        "xmp",
    }
)
