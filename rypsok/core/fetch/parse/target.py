"""The parser target of the bounded parse: counts, filters and builds (REQ-PAGE-006,
REQ-CTX-005, LIM-F10, LIM-F11, LIM-F16, LIM-F17)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final
from xml.sax.saxutils import escape

from rypsok.core.fetch.parse.attributes import (
    KEPT_ATTRIBUTES,
    MAX_ELEMENT_ATTRIBUTES,
    MAX_KEPT_ATTRIBUTES,
)
from rypsok.core.fetch.parse.style import HIDING_ATTRIBUTES, is_hidden
from rypsok.core.fetch.parse.tree_writer import (
    TEXT_REFERENCES,
    TREE_MAX_DEPTH,
    VALUE_REFERENCES,
    VALUE_SPECIAL,
    TreeWriter,
    element_name,
    xml_safe,
)

if TYPE_CHECKING:
    from lxml import etree

__all__ = ["SKIPPED_ELEMENTS", "TRANSPARENT_VOID", "BoundedTarget", "Stop"]

# Elements whose whole subtree a reader never sees as text.
SKIPPED_ELEMENTS: Final = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "iframe",
        "frame",
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
TRANSPARENT_VOID: Final = frozenset(
    {"embed", "param", "source", "track", "keygen", "area", "bgsound"}
)

# Not built, what they hold is: web_fetch never loads a frame (each `frame` is left out), so
# a frameset page's text is its `noframes`, which libxml2 may put inside the frameset.
_UNWRAPPED: Final = frozenset({"frameset"})

_HEAD_READ: Final = frozenset({"title", "meta", "base"})
# What HTML lets a head hold; any other element starts the body.
_IN_HEAD: Final = frozenset(
    {
        "base",
        "basefont",
        "link",
        "meta",
        "title",
        "noscript",
        "noframes",
        "style",
        "script",
        "template",
    }
)

# Elements a document's end tags never close: a browser parses markup after </body> or
# </html> into the body.
_KEPT_OPEN: Final = frozenset({"html", "body"})
# The names the target's rules single out (an element without a name among them, outside a
# skipped subtree, takes the target's quick path).
_SPECIAL_NAMES: Final = (
    SKIPPED_ELEMENTS
    | _HEAD_READ
    | TRANSPARENT_VOID
    | _UNWRAPPED
    | _KEPT_OPEN
    | frozenset({"dialog", ""})
)


class Stop(Exception):
    """Raised inside the target to end the parse at a bound."""


class BoundedTarget:
    """The parser target: counts, filters and builds the tree through a `TreeWriter`
    (which makes text and attribute values safe for XML)."""

    def __init__(self, max_nodes: int, max_depth: int) -> None:
        self.max_nodes = max_nodes
        self.max_depth = min(max_depth, TREE_MAX_DEPTH)
        self.builder = TreeWriter()
        # The writer's markup: the target writes end tags and texts there itself (what
        # `TreeWriter.end` and `data` do, without a call per event at the node bound).
        self.written = self.builder.written
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
        raise Stop

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
        if not skip_depth and name not in _SPECIAL_NAMES and self.root_started:
            # Most elements: outside a skipped subtree, of no name the rules below single out,
            # after the root; what `_start_other` does for them, without asking each.
            if attrib:
                # (Only these attributes hide an element of a name not singled out: most
                # tags carry none of them, and are not asked further.)
                if not HIDING_ATTRIBUTES.isdisjoint(attrib) and is_hidden(name, attrib):
                    self.skip_depth = 1
                    self.skip_root = ""
                    return
                # TreeWriter.start with the kept attributes, written here (no dict of them,
                # no call): the same markup.
                name = element_name(name)
                markup = "<" + name
                kept_count = 0
                for key, value in attrib.items():
                    if key in KEPT_ATTRIBUTES:
                        kept_count += 1
                        if VALUE_SPECIAL.search(value) is not None:
                            value = escape(value, VALUE_REFERENCES)
                        markup += f' {key}="{value}"'
                self.kept_attributes += kept_count
                if self.kept_attributes > MAX_KEPT_ATTRIBUTES:
                    self._stop()
                self.written.append(markup + ">")
            else:
                name = element_name(name)
                self.written.append(f"<{name}>")  # TreeWriter.start without attributes
            self.stack.append(name)
            self.built.append(True)
            return
        self._start_other(name, attrib, depth, skip_depth)

    def _start_other(self, name: str, attrib: dict[str, str], depth: int, skip_depth: int) -> None:
        """`start` for what its quick path does not take: an element inside a skipped
        subtree, of a name the rules single out, or before the root."""
        if skip_depth == 1 and self.skip_root == "head" and name not in _IN_HEAD:
            self._leave_head()
            skip_depth = 0
        if name in _HEAD_READ and (not skip_depth or self.skip_root == "head"):
            # The title and og:title are read from the head, which is otherwise not built.
            if name == "title":
                if not self.title_done and not self.in_title:
                    self.in_title = True
                    self.title_level = depth
            elif name == "base":
                if self.base_href is None and "href" in attrib:
                    self.base_href = xml_safe(attrib["href"])
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
        if (
            name in TRANSPARENT_VOID
            or name in _UNWRAPPED
            or (name in _KEPT_OPEN and name in self.stack)
        ):
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
        name = element_name(name)
        if attrib:
            kept = {k: v for k, v in attrib.items() if k in KEPT_ATTRIBUTES}
            self.kept_attributes += len(kept)
            if self.kept_attributes > MAX_KEPT_ATTRIBUTES:
                self._stop()
            self.builder.start(name, kept)
        else:
            self.builder.start(name, {})
        self.stack.append(name)
        self.built.append(True)

    def _leave_head(self) -> None:
        """Start the body at an element that cannot be in a head, as HTML's "in head:
        anything else" does. libxml2 keeps an element it does not know (a word processor's
        `<o:p>`, a custom element, a legacy `<bgsound>`) and what follows it in a head never
        closed, which is never read: the page's text would be lost with it."""
        self.skip_depth = 0
        self.skip_root = ""
        self.built.append(False)  # the head: its end closes nothing built
        self.written.append("<body>")  # TreeWriter.start("body", {})
        self.stack.append("body")

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
        built = self.built
        stack = self.stack
        if built and built.pop() and stack:
            if stack[-1] in _KEPT_OPEN:
                # </body> and </html> do not close them: markup after them still belongs
                # to the body (finish() closes both).
                return
            self.written.append(f"</{stack.pop()}>")  # TreeWriter.end

    def data(self, text: str) -> None:
        if self.stopped:
            return
        if self.in_title:
            self.title_parts.append(text)
            return
        if self.skip_depth or not self.stack:
            return
        # TreeWriter.data. Most text holds none of these: four searches for one character
        # each cost less than one search of a character class.
        if "&" in text or "<" in text or ">" in text or "\r" in text:
            text = escape(text, TEXT_REFERENCES)
        self.written.append(text)

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
        """Close what is still open and hand back the root (the XML needs balance)."""
        if not self.root_started:
            return None
        while self.stack:
            self.builder.end(self.stack.pop())
        root: etree._Element = self.builder.close()
        return root

    def forget_tree(self) -> None:
        """Drop every reference to the tree built so far.

        lxml's HTML feed parser and its parser context refer to each other once a Python
        target has been fed, so that parser, its context and this target outlive the call
        until the cycle collector runs, which Python starts from counts of Python objects,
        not of the C memory a tree holds. When the target held lxml's TreeBuilder, each
        call's tree hung from that cycle: under concurrent calls about one page piled up per
        completed call until a full collection. The tree writer lets go of its
        document at `close`; a writer whose close did not run (a failure on the way) could
        still hold part of one, so the target drops it whatever happened, and the caller's
        reference to the root is the tree's only one.
        """
        self.builder = TreeWriter()
        self.written = self.builder.written
