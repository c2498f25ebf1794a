"""TOML text to plain Python values, with the place of every value for messages.

Two parsers, one job each: `tomllib` (the standard library) decides whether the text is
TOML and says where it is not; tomlkit, which keeps the source, tells where each value
starts. A value is then a plain `str`, `int`, `float`, `bool`, list, dict or date: tomlkit's
own types (subclasses of `str` and `int`) never leave this module.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any, Final

import tomlkit
import tomlkit.container
import tomlkit.items
from tomlkit.parser import Parser

from rypsok.config.messages import ConfigError, Place, with_place

__all__ = ["Path", "Positions", "format_path", "parse_toml"]

Path = tuple[str | int, ...]
Positions = dict[Path, Place]

_TOMLLIB_PLACE: Final = re.compile(r"^(?P<msg>.*?) \(at line (?P<line>\d+), column (?P<col>\d+)\)$")
_DUPLICATE_WORDS: Final = (
    "Cannot declare",
    "Cannot overwrite",
    "Duplicate inline table key",
    "Cannot mutate",
    "Cannot redefine",
)
# tomllib's sentences that quote a character of the file: the character is left out.
_QUOTING: Final = re.compile(r"\s*(?:'[^']*'|\"[^\"]*\"|\([^)]*\))")


def format_path(path: Path) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += part if not out else f".{part}"
    return out


def parse_toml(text: str) -> tuple[dict[str, Any], Positions]:
    """Parse `text`; raise ConfigError with the place of a syntax error or a duplicate."""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _translate(str(exc), text) from None
    except RecursionError:
        raise ConfigError("TOML syntax error: the nesting is too deep") from None
    try:
        parser = _PlacedParser(text)
        document = parser.parse()
        positions: Positions = {}
        data = _unwrap(document, (), parser, positions, text)
    except Exception:
        # tomllib accepted the text, so this is a disagreement between two parsers, not the
        # author's mistake; still one line, and without tomlkit's wording.
        raise ConfigError("TOML syntax error: the file could not be read as TOML") from None
    assert isinstance(data, dict)
    return data, positions


def _translate(raw: str, text: str) -> ConfigError:
    match = _TOMLLIB_PLACE.match(raw)
    msg, place = raw, None
    if match is not None:
        msg = match["msg"]
        place = Place(line=int(match["line"]), column=int(match["col"]))
    if msg.startswith(_DUPLICATE_WORDS):
        found = find_duplicate(text)
        if found is not None:
            path, dup_place = found
            return ConfigError(with_place(f"{path}: defined more than once", dup_place))
        return ConfigError(with_place("a table or a key is defined more than once", place))
    if "(at end of document)" in msg:
        msg = msg.replace("(at end of document)", "").strip()
        msg = f"{msg} at the end of the file"
    # Drop every quoted character: the file's text is never repeated.
    words = msg if msg.startswith("Expected") else _QUOTING.sub("", msg)
    words = words[:1].lower() + words[1:]
    return ConfigError(with_place(f"TOML syntax error: {words}", place))


class _PlacedParser(Parser):
    """tomlkit's parser, noting where each value and each table header starts."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.starts: dict[int, int] = {}
        self._keep: list[object] = []  # keeps ids unique while `starts` is in use

    def _parse_value(self) -> tomlkit.items.Item:
        start = self._idx
        item = super()._parse_value()
        self.starts[id(item)] = start
        self._keep.append(item)
        return item

    def _parse_table(
        self,
        parent_name: tomlkit.items.Key | None = None,
        parent: tomlkit.items.Table | None = None,
    ) -> tuple[tomlkit.items.Key, tomlkit.items.Table | tomlkit.items.AoT]:
        start = self._idx
        key, table = super()._parse_table(parent_name, parent)
        self.starts.setdefault(id(table), start)
        self._keep.append(table)
        return key, table


def _place(text: str, index: int) -> Place:
    line = text.count("\n", 0, index) + 1
    line_start = text.rfind("\n", 0, index) + 1
    return Place(line=line, column=index - line_start + 1)


def _unwrap(
    item: object, path: Path, parser: _PlacedParser, positions: Positions, text: str
) -> Any:
    start = parser.starts.get(id(item))
    if start is not None:
        positions[path] = _place(text, start)
    # `.item(key)` and indexing give tomlkit's own items (a plain iteration would turn a
    # boolean into a Python bool and lose its place).
    if isinstance(item, tomlkit.container.OutOfOrderTableProxy):
        # A table written in pieces (`[a.b]`, then `[[a.b.c]]`, then `[a.b]` keys again):
        # tomlkit merges the pieces into one container behind this proxy, whose own API
        # gives no item with its place; the merged container does.
        item = item._internal_container
    if isinstance(
        item, tomlkit.container.Container | tomlkit.items.Table | tomlkit.items.InlineTable
    ):
        return {
            str(k): _unwrap(item.item(k), (*path, str(k)), parser, positions, text)
            for k in list(item.keys())
        }
    if isinstance(item, tomlkit.items.Array | tomlkit.items.AoT):
        return [_unwrap(item[i], (*path, i), parser, positions, text) for i in range(len(item))]
    if isinstance(item, tomlkit.items.Item):
        return item.unwrap()
    return item


# -- finding the duplicate, for the message ---------------------------------------------------

_BARE: Final = re.compile(r"[A-Za-z0-9_-]+")


def _split_key(raw: str) -> list[tuple[str, int]] | None:
    """A dotted key's parts with the offset of each in `raw`; None when it is not simple."""
    parts: list[tuple[str, int]] = []
    i = 0
    while True:
        while i < len(raw) and raw[i] in " \t":
            i += 1
        if i >= len(raw):
            return None
        if raw[i] in "\"'":
            quote = raw[i]
            end = raw.find(quote, i + 1)
            if end < 0:
                return None
            parts.append((raw[i + 1 : end], i))
            i = end + 1
        else:
            match = _BARE.match(raw, i)
            if match is None:
                return None
            parts.append((match.group(), i))
            i = match.end()
        while i < len(raw) and raw[i] in " \t":
            i += 1
        if i >= len(raw):
            return parts
        if raw[i] != ".":
            return None
        i += 1


def _value_closes(rest: str) -> int:
    """The change of bracket depth of a value's text, strings and comments left out."""
    depth = 0
    quote = ""
    i = 0
    while i < len(rest):
        ch = rest[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            break
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        i += 1
    return depth


def find_duplicate(text: str) -> tuple[str, Place] | None:
    """The first key path defined twice and the place of its second definition.

    Only called on a file that tomllib refused for a duplicate, so an approximate line scan
    is enough: multi-line strings and arrays are skipped, never misread as keys.
    """
    tables: set[tuple[str, ...]] = set()
    keys: set[Path] = set()
    aot_count: dict[tuple[str, ...], int] = {}
    prefix: Path = ()
    depth = 0
    in_multiline = ""
    for lineno, line in enumerate(text.splitlines(), 1):
        if in_multiline:
            if line.count(in_multiline) % 2 == 1:
                in_multiline = ""
            continue
        if depth > 0:
            depth += _value_closes(line)
            continue
        stripped = line.lstrip(" \t")
        indent = len(line) - len(stripped)
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("[["):
            end = stripped.find("]]")
            parts = _split_key(stripped[2:end]) if end > 0 else None
            if parts is None:
                return None
            names = tuple(p for p, _ in parts)
            index = aot_count.get(names, -1) + 1
            aot_count[names] = index
            if names in tables:
                return format_path(names), Place(line=lineno, column=indent + 3 + parts[-1][1])
            prefix = (*names, index)
            continue
        if stripped.startswith("["):
            end = stripped.find("]")
            parts = _split_key(stripped[1:end]) if end > 0 else None
            if parts is None:
                return None
            names = tuple(p for p, _ in parts)
            if names in tables or names in keys or names in aot_count:
                return format_path(names), Place(line=lineno, column=indent + 2 + parts[-1][1])
            tables.add(names)
            prefix = names
            continue
        eq = _find_equals(stripped)
        if eq < 0:
            return None
        parts = _split_key(stripped[:eq])
        if parts is None:
            return None
        full: Path = (*prefix, *(p for p, _ in parts))
        if full in keys or full in tables:
            return format_path(full), Place(line=lineno, column=indent + 1 + parts[0][1])
        keys.add(full)
        for n in range(len(prefix) + 1, len(full)):
            tables.add(tuple(str(p) for p in full[:n]))
        rest = stripped[eq + 1 :].lstrip()
        for triple in ('"""', "'''"):
            if rest.startswith(triple) and rest.count(triple) == 1:
                in_multiline = triple
        if not in_multiline:
            depth = max(0, _value_closes(rest))
    return None


def _find_equals(line: str) -> int:
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "=":
            return i
    return -1
