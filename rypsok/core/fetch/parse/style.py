"""What a reader never sees because markup or an inline style hides it (REQ-CTX-005).

``hidden``, ``aria-hidden="true"``, a closed ``<dialog>``, and an inline style read as CSS
reads it (``display: none``, ``visibility: hidden``, a zero font size, off-screen
positioning). The CSS one parse reads is bounded (STYLE_BUDGET_CHARS): past it, a style that
could hide its element is taken to hide it.
"""

from __future__ import annotations

import contextvars
import re
from typing import Any, Final

import tinycss2

__all__ = [
    "HIDING_ATTRIBUTES",
    "OFF_SCREEN_PX",
    "STYLE_BUDGET",
    "STYLE_BUDGET_CHARS",
    "StyleBudget",
    "is_hidden",
]


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


class StyleBudget:
    """The CSS still to be read in one parse, and the verdicts already reached."""

    __slots__ = ("left", "seen")

    def __init__(self, chars: int) -> None:
        self.left = chars
        self.seen: dict[str, bool] = {}


STYLE_BUDGET: Final[contextvars.ContextVar[StyleBudget | None]] = contextvars.ContextVar(
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
        budget = STYLE_BUDGET.get()
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
HIDING_ATTRIBUTES: Final = frozenset({"hidden", "aria-hidden", "style"})
