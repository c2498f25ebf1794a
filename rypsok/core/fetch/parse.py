"""Parsing of a fetched HTML document under the node and depth bounds (REQ-PAGE-006).

lxml's tree-building HTML parser caps nesting silently (at 255 levels), so it can neither
report the depth bound nor stop at it. The parse here drives lxml's parser with a *target*:
libxml2 tokenises and repairs the markup, and every start tag reaches `_BoundedTarget`, which
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

import contextvars
import functools
import re
from typing import Any, Final
from xml.sax.saxutils import escape

import attrs
import tinycss2
import trio
from lxml import etree

__all__ = [
    "FEED_SLICE",
    "MAX_ELEMENT_ATTRIBUTES",
    "MAX_KEPT_ATTRIBUTES",
    "ParsedDocument",
    "attribute_cut",
    "parse_html",
    "stop_if_abandoned",
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

# Not built, what they hold is: web_fetch never loads a frame (each `frame` is left out), so
# a frameset page's text is its `noframes`, which libxml2 may put inside the frameset.
_UNWRAPPED: Final = frozenset({"frameset"})

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

# What an inline style can say that hides an element, read as CSS reads it (tinycss2): names
# and values unescaped (`\64isplay`, `n\one`), comments skipped, the last declaration of a
# property winning unless an earlier one is `!important`, a value CSS does not accept for the
# property ignored (`display: nonsense` leaves an earlier `display: none` in force).
_STYLE_PROPERTIES: Final = frozenset(
    {
        "display",
        "visibility",
        "content-visibility",
        "font-size",
        "position",
        "left",
        "top",
        "right",
        "bottom",
        "text-indent",
        "font",
    }
)
# A style naming none of these (nor holding an escape, which could spell one) hides nothing,
# and is not read further: most inline styles on a page are of that kind.
_STYLE_WORDS: Final = ("display", "visibility", "font", "position", "text-indent", "\\")
_CSS_WIDE: Final = frozenset({"inherit", "initial", "unset", "revert", "revert-layer"})
_DISPLAY: Final = frozenset(
    {
        "none",
        "contents",
        "block",
        "inline",
        "run-in",
        "flow",
        "flow-root",
        "table",
        "flex",
        "grid",
        "ruby",
        "list-item",
        "inline-block",
        "inline-table",
        "inline-flex",
        "inline-grid",
        "inline-list-item",
        "table-row-group",
        "table-header-group",
        "table-footer-group",
        "table-row",
        "table-cell",
        "table-column-group",
        "table-column",
        "table-caption",
        "ruby-base",
        "ruby-text",
        "ruby-base-container",
        "ruby-text-container",
        "math",
        "-webkit-box",
        "-webkit-inline-box",
        "-ms-flexbox",
        "-ms-inline-flexbox",
    }
)
_KEYWORDS: Final = {
    "display": _DISPLAY,
    "visibility": frozenset({"visible", "hidden", "collapse"}),
    "content-visibility": frozenset({"visible", "hidden", "auto"}),
    "position": frozenset({"static", "relative", "absolute", "fixed", "sticky"}),
    "font-size": frozenset(
        {
            "xx-small",
            "x-small",
            "small",
            "medium",
            "large",
            "x-large",
            "xx-large",
            "xxx-large",
            "larger",
            "smaller",
            "math",
        }
    ),
    "left": frozenset({"auto"}),
    "top": frozenset({"auto"}),
    "right": frozenset({"auto"}),
    "bottom": frozenset({"auto"}),
    "text-indent": frozenset({"hanging", "each-line"}),
}
_LENGTH_PROPERTIES: Final = frozenset(
    {"font-size", "left", "top", "right", "bottom", "text-indent"}
)
# CSS pixels per unit of the absolute lengths, and of the font-relative ones at the default
# font size (16px); viewport and percentage lengths count against 100 (a whole viewport or
# container away).
_PX_PER_UNIT: Final = {
    "px": 1.0,
    "pt": 4 / 3,
    "pc": 16.0,
    "in": 96.0,
    "cm": 96 / 2.54,
    "mm": 96 / 25.4,
    "q": 96 / 101.6,
    "em": 16.0,
    "rem": 16.0,
    "ex": 8.0,
    "ch": 8.0,
}
_RELATIVE_UNITS: Final = frozenset(
    {"vw", "vh", "vmin", "vmax", "svw", "svh", "lvw", "lvh", "dvw", "dvh"}
)
# How far off the page a positioned element (or indented text) must be moved to count as
# hidden: the "-9999px" of every off-screen idiom, not the few pixels of a layout nudge.
OFF_SCREEN_PX: Final = 1000.0
# The CSS read per page: tinycss2 reads about 3 µs per character, so this bounds what inline
# styles can cost one parse (about 0.4 s). Past it, a style that could hide its element (it
# names a property above or holds an escape) is taken to hide it.
STYLE_BUDGET_CHARS: Final = 131_072


class _StyleBudget:
    """The CSS still to be read in one parse, and the verdicts already reached."""

    __slots__ = ("left", "seen")

    def __init__(self, chars: int) -> None:
        self.left = chars
        self.seen: dict[str, bool] = {}


_STYLE_BUDGET: Final[contextvars.ContextVar[_StyleBudget | None]] = contextvars.ContextVar(
    "rypsok_style_budget", default=None
)


def _value(tokens: list[Any]) -> Any | None:
    """The one component of a declaration's value, or None when it has several."""
    parts = [t for t in tokens if t.type not in ("whitespace", "comment")]
    return parts[0] if len(parts) == 1 else None


def _length_px(token: Any) -> float | None:
    """A length in CSS pixels (a viewport or percentage length scaled to 100 = 1000px)."""
    if token.type == "number" and token.value == 0:
        return 0.0
    if token.type == "percentage":
        return float(token.value) * OFF_SCREEN_PX / 100
    if token.type == "dimension":
        unit = token.lower_unit
        if unit in _PX_PER_UNIT:
            return float(token.value) * _PX_PER_UNIT[unit]
        if unit in _RELATIVE_UNITS:
            return float(token.value) * OFF_SCREEN_PX / 100
    return None


def _accepted(name: str, tokens: list[Any]) -> tuple[str, float | None] | None:
    """The value CSS would accept for `name` (a keyword, or a length in px), else None.

    A function (`var(--x)`, `calc(…)`) is accepted as a value this reading does not compute:
    it stands for "not hiding", and it overrides what came before, as it does in a browser.
    """
    token = _value(tokens)
    if token is None:
        # Several components: `display: block flow` and the like; any other value is
        # accepted only as "not hiding" when it is a list of known keywords.
        words = [t for t in tokens if t.type not in ("whitespace", "comment")]
        if (
            name == "display"
            and words
            and all(
                t.type == "ident" and t.lower_value in _DISPLAY and t.lower_value != "none"
                for t in words
            )
        ):
            return ("block", None)
        return None
    if token.type == "function":
        return ("", None)
    if token.type == "ident":
        word = token.lower_value
        if word in _CSS_WIDE or word in _KEYWORDS[name]:
            return (word, None)
        return None
    if name in _LENGTH_PROPERTIES:
        px = _length_px(token)
        if px is not None:
            return ("", px)
    return None


def _font_size_in_shorthand(tokens: list[Any]) -> tuple[str, float | None] | None:
    """The font size a `font` shorthand sets (`font: 0/0 a`, the old hide-text idiom), as
    `_accepted` gives a `font-size`; None when it names none (the declaration is invalid,
    or a system font, whose size is not zero)."""
    words = [t for t in tokens if t.type not in ("whitespace", "comment")]
    if len(words) == 1 and words[0].type == "ident":
        return (words[0].lower_value, None)  # a system font, or inherit, initial…
    for index, token in enumerate(words):
        # Style, variant, weight and stretch come first: keywords, or a weight's number
        # (never 0). The first length or percentage, or a bare 0, is the size; then an
        # optional "/" and line height, then the family, without which nothing is set.
        if token.type in ("dimension", "percentage") or (
            token.type == "number" and token.value == 0
        ):
            px = _length_px(token)
            rest = words[index + 1 :]
            if rest and rest[0].type == "literal" and rest[0].value == "/":
                rest = rest[2:]
            family = bool(rest) and all(t.type in ("ident", "string", "literal") for t in rest)
            return ("", px) if px is not None and family else None
        if token.type not in ("ident", "number"):
            return None
    return None


def _style_hides(style: str) -> bool:
    values: dict[str, tuple[tuple[str, float | None], bool]] = {}
    for item in tinycss2.parse_blocks_contents(style, skip_comments=True, skip_whitespace=True):
        if item.type != "declaration" or item.lower_name not in _STYLE_PROPERTIES:
            continue
        name = item.lower_name
        if name == "font":
            # The shorthand sets the size like a font-size declaration in its place.
            name = "font-size"
            value = _font_size_in_shorthand(item.value)
        else:
            value = _accepted(name, item.value)
        if value is None:
            continue
        earlier = values.get(name)
        if earlier is None or item.important or not earlier[1]:
            values[name] = (value, item.important)

    def keyword(name: str) -> str:
        found = values.get(name)
        return found[0][0] if found is not None else ""

    def px(name: str) -> float | None:
        found = values.get(name)
        return found[0][1] if found is not None else None

    if keyword("display") == "none" or keyword("content-visibility") == "hidden":
        return True
    if keyword("visibility") in ("hidden", "collapse"):
        return True
    if px("font-size") == 0:
        return True
    indent = px("text-indent")
    if indent is not None and indent <= -OFF_SCREEN_PX:
        return True
    if keyword("position") in ("absolute", "fixed"):
        for side in ("left", "top", "right", "bottom"):
            offset = px(side)
            if offset is not None and offset <= -OFF_SCREEN_PX:
                return True
    return False


def _style_could_hide(style: str) -> bool:
    lowered = style.lower()
    return any(word in lowered for word in _STYLE_WORDS)


# Where a style without escapes, comments or blocks can be cut into its declarations: its
# strings (on one line) and the brackets a `;` inside does not end a declaration within.
_STYLE_STRUCTURE: Final = re.compile(r"\"[^\"\n\r\f]*\"|'[^'\n\r\f]*'|[()\[\];\"']")


def _declarations_read(style: str) -> str:
    """What of `style` needs reading as CSS: the declarations of the properties above, in
    their order, when the style can be cut into declarations exactly without a tokenizer
    (no escape, comment, block, url or unclosed string); else the whole style."""
    if any(mark in style for mark in ("\\", "/*", "{", "}", "@")) or "url(" in style.lower():
        # (An unquoted url(…) is one token, brackets and all: the tokenizer reads it.)
        return style
    kept: list[str] = []
    # The closing brackets awaited: a block ends only at its own (`[)]` is still open).
    awaited: list[str] = []
    start = 0
    for match in _STYLE_STRUCTURE.finditer(style):
        char = match.group()
        if char in "\"'":
            return style  # a quote that opens no string on its line: the tokenizer decides
        if char == "(":
            awaited.append(")")
        elif char == "[":
            awaited.append("]")
        elif char in ")]":
            if awaited and awaited[-1] == char:
                awaited.pop()
        elif char == ";" and not awaited:
            _keep_declaration(style[start : match.start()], kept)
            start = match.end()
    _keep_declaration(style[start:], kept)
    return ";".join(kept)


def _keep_declaration(declaration: str, kept: list[str]) -> None:
    name = declaration.split(":", 1)[0].strip().lower()
    if name in _STYLE_PROPERTIES:
        kept.append(declaration)


def is_hidden(tag: str, attrib: dict[str, str]) -> bool:
    """Whether a browser would not show this element to a reader (REQ-CTX-005)."""
    if "hidden" in attrib:
        return True
    if attrib.get("aria-hidden", "").strip().lower() == "true":
        return True
    style = attrib.get("style")
    if style is not None and _style_could_hide(style):
        budget = _STYLE_BUDGET.get()
        if budget is None:
            return _style_hides(_declarations_read(style))
        verdict = budget.seen.get(style)
        if verdict is None:
            css = _declarations_read(style)
            if len(css) > budget.left:
                budget.left = 0
                return True
            budget.left -= len(css)
            verdict = budget.seen[style] = _style_hides(css)
        if verdict:
            return True
    # A closed dialog is not rendered; an open one is content.
    return tag == "dialog" and "open" not in attrib


# The attributes by which `is_hidden` hides an element other than a dialog.
_HIDING_ATTRIBUTES: Final = frozenset({"hidden", "aria-hidden", "style"})

_HEAD_READ: Final = frozenset({"title", "meta", "base"})

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
    # Runs on all the text and kept attributes (the tree writer's markup, a slice at a time),
    # since character references (&#1;) bring these characters back whatever the document's
    # own bytes were.
    if _NOT_XML.search(text) is None:
        return text
    # A form feed is white space to HTML; the others are nothing.
    return _NOT_XML.sub("", text.replace("\x0c", " "))


def stop_if_abandoned() -> None:
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


# Characters written as references in the XML the tree is built from: the markup characters,
# and those XML reads otherwise than written (a carriage return in text becomes a line feed;
# a line end or a tab in an attribute value, a space).
_TEXT_REFERENCES: Final = {"\r": "&#13;"}  # besides the three `escape` always writes
_VALUE_REFERENCES: Final = {'"': "&quot;", "\r": "&#13;", "\n": "&#10;", "\t": "&#9;"}
# The characters of an attribute value `escape` with these references changes.
_VALUE_SPECIAL: Final = re.compile('[&<>"\r\n\t]')
# The nesting libxml2's XML parser builds (with huge_tree); a deeper LIM-F11 is held at it.
_TREE_MAX_DEPTH: Final = 2048


class _TreeWriter:
    """Builds the tree the target keeps; called as lxml's TreeBuilder is (start, end, data).
    (On its quick path the target appends the same markup to `written` itself: a call fewer
    per event at the node bound.)

    TreeBuilder, called from Python, makes each element through a proxy object and takes
    each text and attribute value after the target has checked it for characters XML cannot
    hold (a regular expression per text: at the node bound, 200,000 searches). Here the
    elements are written as XML instead (names lxml accepts, the kept attributes, every
    markup character a reference) and libxml2's XML parser builds them in C. `flush` hands
    it what was written since the last call, after one search of it all for characters XML
    cannot hold (dropped, a form feed made a space, as `_xml_safe` does to each text: the
    repair is of single characters, so made once over the markup it is the same). The
    target's parse flushes after every FEED_SLICE it feeds, so the markup held at a time is
    one slice's. The tree is the one TreeBuilder made: the same elements, attributes, text
    and tails (a text made only of characters XML cannot hold is no text, where TreeBuilder
    kept an empty one: the same to every reader here, which reads a text by its truth).
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
                if _VALUE_SPECIAL.search(value) is not None:
                    # (Most values, an address or a class, hold none of them: one search
                    # instead of the seven replacements of `escape`.)
                    value = escape(value, _VALUE_REFERENCES)
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
            text = escape(text, _TEXT_REFERENCES)
        self.written.append(text)

    def flush(self) -> None:
        written = self.written
        if written:
            markup = _xml_safe("".join(written))
            # Emptied in place: the target appends its end tags and texts to this list
            # itself (a call fewer per event).
            written.clear()
            self.parser.feed(markup)

    def close(self) -> etree._Element:
        self.flush()
        root: etree._Element = self.parser.close()
        return root


class _BoundedTarget:
    """The parser target: counts, filters and builds the tree through a `_TreeWriter`
    (which makes text and attribute values safe for XML)."""

    def __init__(self, max_nodes: int, max_depth: int) -> None:
        self.max_nodes = max_nodes
        self.max_depth = min(max_depth, _TREE_MAX_DEPTH)
        self.builder = _TreeWriter()
        # The writer's markup: the target writes end tags and texts there itself (what
        # `_TreeWriter.end` and `data` do, without a call per event at the node bound).
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
        if not skip_depth and name not in _SPECIAL_NAMES and self.root_started:
            # Most elements: outside a skipped subtree, of no name the rules below single out,
            # after the root; what the rules below do for them, without asking each.
            if attrib:
                # (Only these attributes hide an element of a name not singled out: most
                # tags carry none of them, and are not asked further.)
                if not _HIDING_ATTRIBUTES.isdisjoint(attrib) and is_hidden(name, attrib):
                    self.skip_depth = 1
                    self.skip_root = ""
                    return
                # _TreeWriter.start with the kept attributes, written here (no dict of them,
                # no call): the same markup.
                name = _element_name(name)
                markup = "<" + name
                kept_count = 0
                for key, value in attrib.items():
                    if key in KEPT_ATTRIBUTES:
                        kept_count += 1
                        if _VALUE_SPECIAL.search(value) is not None:
                            value = escape(value, _VALUE_REFERENCES)
                        markup += f' {key}="{value}"'
                self.kept_attributes += kept_count
                if self.kept_attributes > MAX_KEPT_ATTRIBUTES:
                    self._stop()
                self.written.append(markup + ">")
            else:
                name = _element_name(name)
                self.written.append(f"<{name}>")  # _TreeWriter.start without attributes
            self.stack.append(name)
            self.built.append(True)
            return
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
        name = _element_name(name)
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
            self.written.append(f"</{stack.pop()}>")  # _TreeWriter.end

    def data(self, text: str) -> None:
        if self.stopped:
            return
        if self.in_title:
            self.title_parts.append(text)
            return
        if self.skip_depth or not self.stack:
            return
        # _TreeWriter.data. Most text holds none of these: four searches for one character
        # each cost less than one search of a character class.
        if "&" in text or "<" in text or ">" in text or "\r" in text:
            text = escape(text, _TEXT_REFERENCES)
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
        completed call until a full collection (issue 23.2). The tree writer lets go of its
        document at `close`; a writer whose close did not run (a failure on the way) could
        still hold part of one, so the target drops it whatever happened, and the caller's
        reference to the root is the tree's only one.
        """
        self.builder = _TreeWriter()
        self.written = self.builder.written


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
    cannot be encoded for the parser), a DOCTYPE's internal subset removed."""
    if "\x00" in document:
        document = document.replace("\x00", "")
    if not document.isascii():
        document = _SURROGATE.sub("\ufffd", document)
    head = document[:_SUBSET_SCAN]
    if "[" in head and "<!" in head:
        match = _INTERNAL_SUBSET.match(head)
        if match is not None:
            document = match.group(1) + ">" + document[match.end() :]
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
    token = _STYLE_BUDGET.set(_StyleBudget(STYLE_BUDGET_CHARS))
    try:
        return _parse_bounded(document, max_nodes, max_depth, encoding)
    finally:
        _STYLE_BUDGET.reset(token)


def _parse_bounded(
    document: str | bytes, max_nodes: int, max_depth: int, encoding: str | None
) -> ParsedDocument:
    target = _BoundedTarget(max_nodes, max_depth)
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
