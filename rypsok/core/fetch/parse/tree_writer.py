"""The tree the bounded parse keeps, written as XML and built by libxml2's XML parser."""

from __future__ import annotations

import functools
import re
from typing import Final
from xml.sax.saxutils import escape

from lxml import etree

__all__ = [
    "TEXT_REFERENCES",
    "TREE_MAX_DEPTH",
    "VALUE_REFERENCES",
    "VALUE_SPECIAL",
    "TreeWriter",
    "element_name",
    "xml_safe",
]

# Characters an lxml tree cannot hold (XML 1.0 excludes them): C0 controls but tab, line feed
# and carriage return, U+FFFE, U+FFFF, and lone surrogates. Browsers show none of them; they
# are dropped from text and attribute values rather than failing the page.
_NOT_XML: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


@functools.lru_cache(maxsize=1024)
def element_name(name: str) -> str:
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


def xml_safe(text: str) -> str:
    # Runs on all the text and kept attributes (the tree writer's markup, a slice at a time),
    # since character references (&#1;) bring these characters back whatever the document's
    # own bytes were.
    if _NOT_XML.search(text) is None:
        return text
    # A form feed is white space to HTML; the others are nothing.
    return _NOT_XML.sub("", text.replace("\x0c", " "))


# Characters written as references in the XML the tree is built from: the markup characters,
# and those XML reads otherwise than written (a carriage return in text becomes a line feed;
# a line end or a tab in an attribute value, a space).
TEXT_REFERENCES: Final = {"\r": "&#13;"}  # besides the three `escape` always writes
VALUE_REFERENCES: Final = {'"': "&quot;", "\r": "&#13;", "\n": "&#10;", "\t": "&#9;"}
# The characters of an attribute value `escape` with these references changes.
VALUE_SPECIAL: Final = re.compile('[&<>"\r\n\t]')
# The nesting libxml2's XML parser builds (with huge_tree); a deeper LIM-F11 is held at it.
TREE_MAX_DEPTH: Final = 2048


class TreeWriter:
    """Builds the tree the target keeps; called as lxml's TreeBuilder is (start, end, data).
    (On its quick path the target appends the same markup to `written` itself: a call fewer
    per event at the node bound.)

    TreeBuilder, called from Python, makes each element through a proxy object and takes
    each text and attribute value after the target has checked it for characters XML cannot
    hold (a regular expression per text: at the node bound, 200,000 searches). Here the
    elements are written as XML instead (names lxml accepts, the kept attributes, every
    markup character a reference) and libxml2's XML parser builds them in C. `flush` hands
    it what was written since the last call, after one search of it all for characters XML
    cannot hold (dropped, a form feed made a space, as `xml_safe` does to each text: the
    repair is of single characters, so made once over the markup it is the same). The
    target's parse flushes after every FEED_SLICE it feeds, so the markup held at a time is
    one slice's. The tree is the one TreeBuilder makes: the same elements, attributes, text
    and tails (a text made only of characters XML cannot hold is no text, where TreeBuilder
    keeps an empty one: the same to every reader here, which reads a text by its truth).
    """

    __slots__ = ("parser", "written")

    def __init__(self) -> None:
        self.parser = etree.XMLParser(
            huge_tree=True, resolve_entities=False, no_network=True, collect_ids=False
        )
        self.written: list[str] = []

    def start(self, name: str, attrib: dict[str, str]) -> None:
        written = self.written
        if attrib:
            written.append(f"<{name}")
            for key, value in attrib.items():
                if VALUE_SPECIAL.search(value) is not None:
                    # (Most values, an address or a class, hold none of them: one search
                    # instead of the seven replacements of `escape`.)
                    value = escape(value, VALUE_REFERENCES)
                written.append(f' {key}="{value}"')
            written.append(">")
        else:
            written.append(f"<{name}>")

    def end(self, name: str) -> None:
        self.written.append(f"</{name}>")

    def data(self, text: str) -> None:
        # Most text holds none of these: four searches for one character each cost less
        # than one search of a character class.
        if "&" in text or "<" in text or ">" in text or "\r" in text:
            text = escape(text, TEXT_REFERENCES)
        self.written.append(text)

    def flush(self) -> None:
        written = self.written
        if written:
            markup = xml_safe("".join(written))
            # Emptied in place: the target appends its end tags and texts to this list
            # itself (a call fewer per event).
            written.clear()
            self.parser.feed(markup)

    def close(self) -> etree._Element:
        self.flush()
        root: etree._Element = self.parser.close()
        return root
