"""Parsing of a fetched HTML document under the node and depth bounds (REQ-PAGE-006).

lxml's tree-building HTML parser caps nesting silently (at 255 levels), so it can neither
report the depth bound nor stop at it. The parse here drives lxml's parser with a *target*:
libxml2 tokenises and repairs the markup, and every start tag reaches `BoundedTarget`, which
counts nodes (LIM-F10) and nesting (LIM-F11) and stops the parse at the first tag beyond
either bound. The document is fed in slices so that the stop takes effect within one slice: a
page nested a million levels deep costs what a page at the bound costs.

The target also leaves out, while parsing, what a reader never sees (REQ-CTX-005): scripts,
styles, comments, noscript and template contents, embedded objects, form controls, and
elements hidden by markup (``hidden``, ``aria-hidden="true"``) or by an inline style, read as
CSS reads it (``display: none``, ``visibility: hidden``, a zero font size, off-screen
positioning; see `is_hidden`). Their subtrees still count against the bounds.
Only the attributes the extraction reads are kept, so the tree is small.

Attributes are bounded too, before they cost anything: libxml2 collects every attribute of
a tag and lxml hands them to the target as one dict, so a single tag carrying 400,000
attributes costs about 90 MiB before `start` could refuse it. `attribute_cut` therefore
reads the document first as the HTML tokenizer does (tags, quoted values, comments, raw text)
and the parser is fed only up to the first tag with more than MAX_ELEMENT_ATTRIBUTES
(LIM-F16); the target stops the parse once the attributes it keeps in the tree exceed
MAX_KEPT_ATTRIBUTES (LIM-F17). Either is a bound reached: the page is read in part.

One parser and one target per call: lxml parsers are not shareable between threads.
"""

from __future__ import annotations

import re
from typing import Final

import attrs
import trio
from lxml import etree

from rypsok.core.fetch.parse.attributes import attribute_cut
from rypsok.core.fetch.parse.style import STYLE_BUDGET, STYLE_BUDGET_CHARS, StyleBudget
from rypsok.core.fetch.parse.target import BoundedTarget, Stop

__all__ = ["FEED_SLICE", "ParsedDocument", "parse_html", "stop_if_abandoned"]

# Characters (or bytes) handed to the parser at a time; the bound check runs between slices
# as well as inside them, so this is the most the parser reads past a bound.
FEED_SLICE: Final = 32768

# Elements whose end tag HTML lets an author leave out; one still open at the end of the
# document is not a sign of a cut or broken document.
_OPTIONAL_END: Final = frozenset(
    {
        "html",
        "head",
        "body",
        "p",
        "li",
        "dt",
        "dd",
        "tr",
        "td",
        "th",
        "thead",
        "tbody",
        "tfoot",
        "caption",
        "colgroup",
        "option",
        "optgroup",
        "rt",
        "rp",
    }
)

_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def stop_if_abandoned() -> None:
    """End the parse when it runs in a Trio worker thread whose call has ended (the pipeline
    abandons it at the deadline): what it would build is thrown away, and its parse permit
    and its memory are held until it ends. Raises trio.Cancelled, which no
    `except Exception` here catches."""
    try:
        trio.from_thread.check_cancelled()
    except RuntimeError:
        return  # not a Trio worker thread: no call to outlive


@attrs.frozen(kw_only=True)
class ParsedDocument:
    """The outcome of one bounded parse.

    `root` is the ``html`` element of the tree built so far (None when nothing was built).
    `title` and `og_title` are the document's ``<title>`` text and its ``og:title`` meta
    property, as the parser decoded them, and `base_href` the ``href`` of its first
    ``<base>`` (None when absent). `nodes` and `depth` are what the
    parse counted; `bound_hit` says the parse stopped at LIM-F10, LIM-F11, LIM-F16 or
    LIM-F17, `malformed` that
    the parser had to give up or the document ended with elements left open.
    """

    root: etree._Element | None
    title: str | None
    og_title: str | None
    base_href: str | None
    nodes: int
    depth: int
    bound_hit: bool
    malformed: bool


# A DOCTYPE with an internal subset (`<!DOCTYPE html [<!ENTITY …>]>`, written by XHTML
# tools), after an optional BOM, XML declaration and comments. libxml2's HTML parser ends the
# DOCTYPE at its first `>` and reads the rest of the subset as text (`]>`); an XML parser, which
# XHTML is written for, reads it as a declaration. Each alternative of the subset starts with
# a different character and every repetition is possessive, so matching is linear whatever
# the bytes; it is looked for in the document's head only.
_COMMENT: Final = r"<!--(?:[^-]|-(?!->))*+-->"  # ends at its first "-->", never later
_INTERNAL_SUBSET: Final = re.compile(
    rf"(\A\ufeff?\s*+(?:<\?xml[^>]*+>\s*+)?(?:{_COMMENT}\s*+)*+<!DOCTYPE\b[^\[>]*+)"
    rf"\[(?:[^\]\"'<]++|\"[^\"]*+\"|'[^']*+'|{_COMMENT}|<(?!!--))*+\]\s*>",
    re.IGNORECASE,
)
_SUBSET_SCAN: Final = 65536


def _readable(document: str) -> str:
    """The document as the parser should read it: NUL characters dropped (a browser drops
    them from text; libxml2 turns them into U+FFFD and reads the end tags after one late, so
    a well-formed page looked cut off), lone surrogates made replacement characters (they
    cannot be encoded for the parser), a DOCTYPE's internal subset removed, a broken title
    ended (`_title_ended`)."""
    if "\x00" in document:
        document = document.replace("\x00", "")
    if not document.isascii():
        document = _SURROGATE.sub("\ufffd", document)
    head = document[:_SUBSET_SCAN]
    if "[" in head and "<!" in head:
        match = _INTERNAL_SUBSET.match(head)
        if match is not None:
            document = match.group(1) + ">" + document[match.end() :]
    return _title_ended(document)


# The start of the first title element, its end tag (what HTML ends a title at: `</title`
# and then white space, `/` or `>`), any end tag of that name, and a line that starts
# with markup.
_TITLE_START: Final = re.compile(r"<title(?:[\t\n\f\r ][^>]*+)?>", re.IGNORECASE)
_TITLE_END: Final = re.compile(r"</title[\t\n\f\r />]", re.IGNORECASE)
_TITLE_END_ANY: Final = re.compile(r"</title[^>]*+>?", re.IGNORECASE)
_MARKUP_LINE: Final = re.compile(r"\n[\t\f\r ]*+<[A-Za-z!/?]")
_TAG_START: Final = re.compile(r"<[A-Za-z!/?]")


def _title_ended(document: str) -> str:
    """`document` with its first title ended where a browser's reader sees it end.

    HTML ends a title's text at its end tag only, so a title never closed, or closed by a
    tag that is no end tag of it (`</titlevalue=…>`), takes the rest of the page as its
    text. A title that runs past a line starting with markup is a broken one: it ends
    before that line. One closed by a broken end tag ends there; one never closed at all,
    at its first tag. A well-formed title is left as it is."""
    start = _TITLE_START.search(document)
    if start is None:
        return document
    opened = start.end()
    end = _TITLE_END.search(document, opened)
    stop = len(document) if end is None else end.start()
    line = _MARKUP_LINE.search(document, opened, stop)
    if line is not None:
        return document[: line.start()] + "</title>" + document[line.start() :]
    if end is not None:
        return document
    broken = _TITLE_END_ANY.search(document, opened)
    if broken is not None:
        return document[: broken.start()] + "</title>" + document[broken.end() :]
    tag = _TAG_START.search(document, opened)
    if tag is not None:
        return document[: tag.start()] + "</title>" + document[tag.start() :]
    return document


def parse_html(
    document: str | bytes,
    *,
    max_nodes: int,
    max_depth: int,
    encoding: str | None = None,
) -> ParsedDocument:
    """Parse `document` under the bounds; never raises for any input (in a Trio worker
    thread its call has abandoned, it ends with trio.Cancelled at the next slice).

    A str is parsed as it is; bytes are decoded by the parser with `encoding` (the pipeline
    decodes first and passes str; bytes are for callers that have a known charset).
    """
    # The inline styles of this document share one reading budget (STYLE_BUDGET_CHARS).
    token = STYLE_BUDGET.set(StyleBudget(STYLE_BUDGET_CHARS))
    try:
        return _parse_bounded(document, max_nodes, max_depth, encoding)
    finally:
        STYLE_BUDGET.reset(token)


def _parse_bounded(
    document: str | bytes, max_nodes: int, max_depth: int, encoding: str | None
) -> ParsedDocument:
    target = BoundedTarget(max_nodes, max_depth)
    malformed = False
    if isinstance(document, str):
        document = _readable(document)
    # The parser never sees a tag beyond LIM-F16, nor anything after it (REQ-PAGE-006).
    cut = attribute_cut(document)
    limit = len(document) if cut is None else cut
    try:
        parser = etree.HTMLParser(
            target=target,
            encoding=encoding if isinstance(document, bytes) else None,
            no_network=True,
            recover=True,
            huge_tree=False,
        )
        for offset in range(0, limit, FEED_SLICE):
            stop_if_abandoned()
            parser.feed(document[offset : min(offset + FEED_SLICE, limit)])
            if target.stopped:
                break
            target.builder.flush()
        if not target.stopped:
            # Elements still open here were never closed by the document: libxml2 closes
            # them at the end, which is a repair, not the author's structure.
            malformed = any(tag not in _OPTIONAL_END for tag in target.open_tags)
            if limit:
                parser.close()
    except Stop:
        pass
    except Exception:  # any parser failure becomes a partial outcome
        if not target.stopped:
            malformed = True
    root: etree._Element | None
    try:
        root = target.finish()
    except Exception:  # a builder that cannot close yields nothing
        root = None
        malformed = True
    finally:
        target.forget_tree()
    title = "".join(target.title_parts) if target.title_parts else None
    return ParsedDocument(
        root=root,
        title=title,
        og_title=target.og_title,
        base_href=target.base_href,
        nodes=target.nodes,
        depth=target.max_seen,
        bound_hit=target.stopped or cut is not None,
        malformed=malformed,
    )
