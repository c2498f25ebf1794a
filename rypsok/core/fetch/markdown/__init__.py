"""Markdown from the main block of a parsed page (REQ-FETCH-004).

The writer renders structure an agent can use and nothing made for the eye (REQ-CTX-008):
headings as ``#``, lists as ``-`` or ``1.``, tables as pipe tables (each cell under its
column, spans spread), preformatted text as fenced code, quotes as ``>``, links as
``[text](url)`` with the URL made absolute against the page's URL and written in ASCII as
web_search writes URLs. A link whose scheme is not http or https (javascript:, data:,
mailto:…) keeps only its text, and an image becomes its alternative text. Emphasis and
layout are dropped. The page's own text is escaped where it could start Markdown, so that
the only Markdown in the answer is what this writer writes (REQ-SEC-001).

"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rypsok.core.fetch.markdown.writer import Writer

if TYPE_CHECKING:
    from collections.abc import Sequence

    from lxml import etree

__all__ = ["render_markdown"]


def render_markdown(elements: Sequence[etree._Element], base_url: str) -> str:
    """The Markdown of `elements`, in order, blocks separated by a blank line."""
    writer = Writer(base_url)
    for element in elements:
        writer.node(element)
    writer.flush()
    text = "\n\n".join(writer.blocks)
    # Blocks are stripped and joined by one blank line; code keeps its own blank lines.
    return text.strip()
