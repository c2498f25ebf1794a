"""Parsing of a fetched HTML document under the node and depth bounds (REQ-PAGE-006).

lxml's tree-building HTML parser caps nesting silently (at 255 levels), so it can neither
report the depth bound nor stop at it. The parse here drives lxml's parser with a *target*:
libxml2 tokenises and repairs the markup, and every start tag reaches `_BoundedTarget`, which
counts nodes (LIM-F10) and nesting (LIM-F11) and stops the parse at the first tag beyond
either bound. The document is fed in slices so that the stop takes effect within one slice: a
page nested a million levels deep costs what a page at the bound costs.

The target also leaves out, while parsing, what a reader never sees (REQ-CTX-005): scripts,
styles, comments, noscript and template contents, embedded objects, form controls, and
elements hidden by markup (``hidden``, ``aria-hidden="true"``) or by inline style
(``display: none``, ``visibility: hidden``). Their subtrees still count against the bounds.
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

import functools
import re
from typing import Final

import attrs
import trio
from lxml import etree

__all__ = [
    "FEED_SLICE",
    "MAX_ELEMENT_ATTRIBUTES",
    "MAX_KEPT_ATTRIBUTES",
    "ParsedDocument",
    "attribute_cut",
    "parse_html",
]

# Characters (or bytes) handed to the parser at a time; the bound check runs between slices
# as well as inside them, so this is the most the parser reads past a bound.
FEED_SLICE: Final = 32768

# LIM-F16: attributes of one element (start or end tag). Real markup stays far below (a few
# dozen at most); past it a tag is an attack on memory, and the parse stops before it.
MAX_ELEMENT_ATTRIBUTES: Final = 256
# LIM-F17: attributes kept in the tree, in total. A kept attribute costs about 280 bytes of
# parse (10 on each of 63,000 elements of a 5 MiB page made a parse of 196 MiB; at the node
# bound, two on each node 127 MiB, one 98, none 70): one per node at the node bound.
MAX_KEPT_ATTRIBUTES: Final = 100_000

# Elements whose whole subtree a reader never sees as text.
SKIPPED_ELEMENTS: Final = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "iframe",
        "frame",
        "frameset",
        "object",
        "applet",
        "svg",
        "math",
        "canvas",
        "audio",
        "video",
        "map",
        "button",
        "input",
        "select",
        "option",
        "optgroup",
        "datalist",
        "textarea",
        "head",
        "link",
        "base",
    }
)

# Void elements that libxml2 does not know as void: the text after one would become its
# content, so they are left out of the tree but what follows them is kept.
TRANSPARENT_VOID: Final = frozenset({"embed", "param", "source", "track", "keygen", "area"})

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

# The attributes the extraction and the Markdown writer read; the others are dropped.
KEPT_ATTRIBUTES: Final = frozenset(
    {"id", "class", "role", "itemprop", "href", "alt", "src", "start", "colspan", "open"}
)

_HIDING_STYLE: Final = re.compile(
    r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*(?:hidden|collapse))\s*(?:!\s*important\s*)?(?:;|$)",
    re.IGNORECASE,
)


def is_hidden(tag: str, attrib: dict[str, str]) -> bool:
    """Whether a browser would not render this element (REQ-CTX-005)."""
    if "hidden" in attrib:
        return True
    if attrib.get("aria-hidden", "").strip().lower() == "true":
        return True
    style = attrib.get("style")
    if style is not None and _HIDING_STYLE.search(style) is not None:
        return True
    # A closed dialog is not rendered; an open one is content.
    return tag == "dialog" and "open" not in attrib


_HEAD_READ: Final = frozenset({"title", "meta", "base"})

# Elements a document's end tags never close: a browser parses markup after </body> or
# </html> into the body.
_KEPT_OPEN: Final = frozenset({"html", "body"})

# Characters an lxml tree cannot hold (XML 1.0 excludes them): C0 controls but tab, line feed
# and carriage return, U+FFFE, U+FFFF, and lone surrogates. Browsers show none of them; they
# are dropped from text and attribute values rather than failing the page.
_NOT_XML: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


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


@functools.lru_cache(maxsize=1024)
def _element_name(name: str) -> str:
    """`name` when lxml accepts it as an element name, else ``span``.

    libxml2 hands over names lxml's tree refuses (``o:p`` from word processors,
    ``svg:rect``, ``1abc``); a browser renders such an element as an unknown inline element,
    which is what ``span`` is to the writer.
    """
    try:
        etree.Element(name)
    except ValueError:
        return "span"
    return name


def _xml_safe(text: str) -> str:
    # Runs on every text and kept attribute, since character references (&#1;) bring these
    # characters back whatever the document's own bytes were.
    if _NOT_XML.search(text) is None:
        return text
    # A form feed is white space to HTML; the others are nothing.
    return _NOT_XML.sub("", text.replace("\x0c", " "))


def _stop_if_abandoned() -> None:
    """End the parse when it runs in a Trio worker thread whose call has ended (the pipeline
    abandons it at the deadline): what it would build is thrown away, and its parse permit
    and its memory are held until it ends (issue 23). Raises trio.Cancelled, which no
    `except Exception` here catches."""
    try:
        trio.from_thread.check_cancelled()
    except RuntimeError:
        return  # not a Trio worker thread: no call to outlive


class _Stop(Exception):
    """Raised inside the target to end the parse at a bound."""


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


class _BoundedTarget:
    """The parser target: counts, filters and builds the tree through a TreeBuilder."""

    def __init__(self, max_nodes: int, max_depth: int) -> None:
        self.max_nodes = max_nodes
        self.max_depth = max_depth
        self.builder = etree.TreeBuilder()
        self.nodes = 0
        self.depth = 0
        self.max_seen = 0
        self.skip_depth = 0  # > 0 inside a subtree that is not built
        self.stack: list[str] = []  # the built elements still open
        self.open_tags: list[str] = []  # every element still open, built or not
        self.built: list[bool] = []  # for each open element outside a skipped subtree
        self.stopped = False
        self.kept_attributes = 0
        self.root_started = False
        self.in_title = False
        self.title_level = 0
        self.skip_root = ""
        self.title_parts: list[str] = []
        self.title_done = False
        self.og_title: str | None = None
        self.base_href: str | None = None

    def _stop(self) -> None:
        self.stopped = True
        raise _Stop

    def start(self, tag: object, attrib: dict[str, str]) -> None:
        if self.stopped:
            return
        nodes = self.nodes + 1
        depth = self.depth + 1
        if nodes > self.max_nodes or depth > self.max_depth:
            self._stop()
        if len(attrib) > MAX_ELEMENT_ATTRIBUTES:
            # attribute_cut keeps such a tag from the parser; this holds for what it cannot
            # read (bytes in an encoding that is not ASCII-compatible).
            self._stop()
        self.nodes = nodes
        self.depth = depth
        if depth > self.max_seen:
            self.max_seen = depth
        # libxml2's HTML parser hands tag names in lower case.
        name = tag if isinstance(tag, str) else ""
        self.open_tags.append(name)
        skip_depth = self.skip_depth
        if name in _HEAD_READ and (not skip_depth or self.skip_root == "head"):
            # The title and og:title are read from the head, which is otherwise not built.
            if name == "title":
                if not self.title_done and not self.in_title:
                    self.in_title = True
                    self.title_level = depth
            elif name == "base":
                if self.base_href is None and "href" in attrib:
                    self.base_href = _xml_safe(attrib["href"])
            elif self.og_title is None:
                prop = attrib.get("property") or attrib.get("name") or ""
                if prop.strip().lower() == "og:title":
                    self.og_title = attrib.get("content", "")
        if skip_depth:
            self.skip_depth = skip_depth + 1
            return
        if name in SKIPPED_ELEMENTS or name in _HEAD_READ or not name:
            self.skip_depth = 1
            self.skip_root = name
            return
        if attrib and is_hidden(name, attrib):
            self.skip_depth = 1
            self.skip_root = ""
            return
        if name == "dialog" and "open" not in attrib:
            self.skip_depth = 1
            self.skip_root = ""
            return
        if name in TRANSPARENT_VOID or (name in _KEPT_OPEN and name in self.stack):
            # A second html or body (libxml2 opens a new root for markup after </html>) is
            # no element of its own: what it holds goes into the open body, as in a browser.
            self.built.append(False)
            return
        if not self.root_started:
            self.root_started = True
            if name != "html":
                # A fragment without an html element still gets one root.
                self.builder.start("html", {})
                self.stack.append("html")
        name = _element_name(name)
        if attrib:
            kept = {k: _xml_safe(v) for k, v in attrib.items() if k in KEPT_ATTRIBUTES}
            self.kept_attributes += len(kept)
            if self.kept_attributes > MAX_KEPT_ATTRIBUTES:
                self._stop()
            self.builder.start(name, kept)
        else:
            self.builder.start(name, {})
        self.stack.append(name)
        self.built.append(True)

    def end(self, tag: object) -> None:
        if self.stopped or not self.open_tags:
            return
        self.depth -= 1
        self.open_tags.pop()
        if self.in_title and self.depth < self.title_level:
            self.in_title = False
            self.title_done = True
        if self.skip_depth:
            self.skip_depth -= 1
            return
        if self.built and self.built.pop() and self.stack:
            if self.stack[-1] in _KEPT_OPEN:
                # </body> and </html> do not close them: markup after them still belongs
                # to the body (finish() closes both).
                return
            self.builder.end(self.stack.pop())

    def data(self, text: str) -> None:
        if self.stopped:
            return
        if self.in_title:
            self.title_parts.append(text)
            return
        if self.skip_depth or not self.stack:
            return
        if _NOT_XML.search(text) is not None:
            text = _xml_safe(text)
        self.builder.data(text)

    def comment(self, text: str) -> None:
        if self.stopped:
            return
        self.nodes += 1
        if self.nodes > self.max_nodes:
            self.nodes -= 1
            self._stop()

    def pi(self, target: str, data: str | None = None) -> None:
        self.comment("")

    def doctype(self, *args: object) -> None:
        return None

    def close(self) -> None:
        return None

    def finish(self) -> etree._Element | None:
        """Close what is still open and hand back the root (the TreeBuilder needs balance)."""
        if not self.root_started:
            return None
        while self.stack:
            self.builder.end(self.stack.pop())
        root: etree._Element = self.builder.close()
        return root


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
    target = _BoundedTarget(max_nodes, max_depth)
    malformed = False
    if isinstance(document, str) and not document.isascii():
        # A lone surrogate cannot be encoded for the parser; it is a replacement character.
        document = _SURROGATE.sub("\ufffd", document)
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
            _stop_if_abandoned()
            parser.feed(document[offset : min(offset + FEED_SLICE, limit)])
            if target.stopped:
                break
        if not target.stopped:
            # Elements still open here were never closed by the document: libxml2 closes
            # them at the end, which is a repair, not the author's structure.
            malformed = any(tag not in _OPTIONAL_END for tag in target.open_tags)
            if limit:
                parser.close()
    except _Stop:
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
