"""Reading one table of the configuration: kinds, ranges and messages with their places.

`Reader` knows where each value of the file is; `Table` reads the keys of one table through
it. A table knows its class in `rypsok.config.schema`: a key left out gets that class's
default, and a `ranged` key that class's range, so neither is written twice. Every refusal
is a ConfigError naming the key, what was expected and the kind of value found, never the
value itself.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

import attrs

from rypsok.config.messages import ConfigError, Place, kind_of, with_place
from rypsok.config.rules import RuleError
from rypsok.config.schema import int_range, ranged_keys
from rypsok.config.toml import Path, Positions, format_path

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["PRINTABLE_KEY", "Reader", "Table", "nearest_name"]

# A key shown in a message: a plain word. Any other key is not repeated: it could be anything.
PRINTABLE_KEY: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")

# The longest key compared with the known names for a guess: longer than any name and its
# slips, and a guess's cost stays small whatever the file holds.
_NEAREST_MAX: Final = 128

# A getter's default when none is given: the one of the table's schema class.
SCHEMA: Final[Any] = object()


class Reader:
    """The places of the file's values, and the one way to refuse a value with its place."""

    def __init__(self, positions: Positions) -> None:
        self.positions = positions

    def place(self, path: Path) -> Place | None:
        exact = self.positions.get(path)
        if exact is not None:
            return exact
        inside = [p for k, p in self.positions.items() if k[: len(path)] == path]
        return min(inside, key=lambda p: (p.line, p.column)) if inside else None

    def fail(self, path: Path, what: str, *, placed: bool = True) -> ConfigError:
        where = self.place(path) if placed else None
        return ConfigError(with_place(f"{format_path(path)}: {what}", where))

    def missing(self, path: Path, what: str) -> ConfigError:
        """A required key that is absent: named by its full path, placed at its table."""
        return ConfigError(with_place(f"{format_path(path)}: {what}", self.place(path[:-1])))

    def integer(self, path: Path, value: object, lo: int, hi: int, why: str | None) -> int:
        expected = f"expected an integer from {lo} to {hi}"
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"{expected}, found {kind_of(value)}")
        if value < 0 and lo >= 0:
            raise self.fail(path, f"{expected}, found a negative number")
        if lo <= value <= hi:
            return value
        if why is not None:
            raise self.fail(path, f"must be between {lo} and {hi} ({why})", placed=False)
        found = f"a number below {lo}" if value < lo else f"a number above {hi}"
        raise self.fail(path, f"{expected}, found {found}")

    def table(self, data: object, path: Path, schema: type | None = None) -> Table:
        if not isinstance(data, dict):
            raise self.fail(path, f"expected a table, found {kind_of(data)}")
        return Table(self, path, data, schema)


def nearest_name(written: str, names: set[str] | frozenset[str]) -> str | None:
    """The name of `names` closest to `written` (a mistyped key), when one is close enough
    to be the one meant; None otherwise. Case is ignored in the comparison, so that
    `Max_Results` finds `max_results`."""
    import difflib  # on the first mistake only: a valid file never needs it

    by_folded = {name.lower(): name for name in sorted(names)}
    close = difflib.get_close_matches(written.lower(), list(by_folded), n=1, cutoff=0.6)
    return by_folded[close[0]] if close else None


class Table:
    """One table of the file, read key by key; a missing key gives its default, the one
    of `schema` (the table's class) unless the getter is given another."""

    def __init__(
        self, validator: Reader, path: Path, data: dict[str, Any], schema: type | None = None
    ) -> None:
        self.v = validator
        self.path = path
        self.data = data
        self.schema = schema

    def default(self, key: str) -> Any:
        """The default of `key` in the table's schema class (a factory's value built)."""
        assert self.schema is not None, "a table without a schema class has no defaults"
        value: Any = attrs.fields_dict(self.schema)[key].default
        assert value is not attrs.NOTHING, f"{key} has no default: it is required"
        factory = getattr(value, "factory", None)  # an attrs.Factory
        return factory() if callable(factory) else value

    def _or_default(self, key: str, default: Any) -> Any:
        return self.default(key) if default is SCHEMA else default

    def key(self, key: str | int) -> Path:
        return (*self.path, key)

    def known(self, *, keys: set[str], tables: set[str] | frozenset[str] = frozenset()) -> None:
        for key, value in self.data.items():
            if key in keys or key in tables:
                continue
            what = "unknown table" if isinstance(value, dict) else "unknown key"
            if PRINTABLE_KEY.fullmatch(key):
                error = self.v.fail(self.key(key), what)
                nearest = nearest_name(key, keys | tables)
                if nearest is None:
                    raise error
                raise ConfigError(f"{error}; did you mean {nearest}?")
            parent = format_path(self.path) or "the top level"
            # A key that is not a plain word is not repeated: it could be anything. The known
            # name close to it is (an accent or an invisible character pasted with the name).
            error = ConfigError(with_place(f"{parent}: an {what}", self.v.place(self.key(key))))
            nearest = nearest_name(key, keys | tables) if len(key) <= _NEAREST_MAX else None
            if nearest is None:
                raise error
            raise ConfigError(f"{error}; did you mean {nearest}?")

    def sub(self, key: str, schema: type | None = None) -> Table:
        if key not in self.data:
            return Table(self.v, self.key(key), {}, schema)
        return self.v.table(self.data[key], self.key(key), schema)

    def default_fits(
        self, key: str, default: int, lo: int, hi: int, set_key: str, message: str
    ) -> None:
        """When `key` is unset, its default must fit the range that `set_key` gives it; the
        message is then about `set_key`, the key the author wrote."""
        if key not in self.data and not lo <= default <= hi:
            raise self.v.fail(self.key(set_key), message)

    def get_ranged(self, key: str) -> int:
        """A key whose default and fixed range the schema's class gives (`ranged`)."""
        assert self.schema is not None
        return self.get_int(key, *int_range(self.schema, key))

    def get_ranged_ints(self) -> dict[str, int]:
        """Every `ranged` key of the schema's class, in the class's order."""
        assert self.schema is not None
        return {key: self.get_ranged(key) for key in ranged_keys(self.schema)}

    def get_int(self, key: str, default: int, lo: int, hi: int, why: str | None = None) -> int:
        """An integer from `lo` to `hi`; `why` names the other keys a dependent range has."""
        if key not in self.data:
            return default
        return self.v.integer(self.key(key), self.data[key], lo, hi, why)

    def get_dependent_int(
        self, key: str, default: int, lo: int, hi: int, *, set_key: str, unfit: str, why: str
    ) -> int:
        """`get_int` for a key whose range `set_key` gives, after `default_fits` with `unfit`."""
        self.default_fits(key, default, lo, hi, set_key, unfit)
        return self.get_int(key, default, lo, hi, why)

    def get_ints(self, key: str, lo: int, hi: int, default: Any = SCHEMA) -> tuple[int, ...]:
        if key not in self.data:
            return tuple(self._or_default(key, default))
        items = self._array(key, f"expected an array of integers from {lo} to {hi}")
        if not items:
            raise self.v.fail(self.key(key), "expected at least one port, found an empty array")
        out: list[int] = []
        for index, item in enumerate(items):
            path = (*self.path, key, index)
            value = self.v.integer(path, item, lo, hi, None)
            if value in out:
                raise self.v.fail(path, "listed more than once")
            out.append(value)
        return tuple(out)

    def get_bool(self, key: str, default: Any = SCHEMA) -> bool:
        if key not in self.data:
            return bool(self._or_default(key, default))
        value = self.data[key]
        if not isinstance(value, bool):
            raise self.v.fail(
                self.key(key), f"expected true or false (without quotes), found {kind_of(value)}"
            )
        return value

    def get_choice(self, key: str, words: tuple[str, ...], default: Any = SCHEMA) -> str:
        if key not in self.data:
            return str(self._or_default(key, default))
        value = self.data[key]
        expected = f"expected one of {', '.join(words)}"
        if not isinstance(value, str):
            raise self.v.fail(self.key(key), f"{expected}, found {kind_of(value)}")
        if value not in words:
            raise self.v.fail(self.key(key), f"{expected}, found an unknown word")
        return value

    # A check raises RuleError for a bad text; what it returns is ignored, so a parser
    # (parse_bind) serves as a check as well as a validator does.
    def get_text(
        self, key: str, default: Any = SCHEMA, *, check: Callable[[str], object] | None = None
    ) -> Any:
        """A text, or the default (which may be None) when the key is left out."""
        if key not in self.data:
            return self._or_default(key, default)
        value = self.data[key]
        if not isinstance(value, str):
            raise self.v.fail(self.key(key), f"expected text, found {kind_of(value)}")
        if check is not None:
            try:
                check(value)
            except RuleError as exc:
                raise self.v.fail(self.key(key), str(exc)) from None
        return value

    def _array(self, key: str, expected: str) -> list[Any]:
        value = self.data[key]
        if not isinstance(value, list):
            raise self.v.fail(self.key(key), f"{expected}, found {kind_of(value)}")
        return value

    def get_texts(
        self,
        key: str,
        default: Any = SCHEMA,
        *,
        check: Callable[[str], object] | None = None,
        non_empty: bool = False,
        unique: bool = False,
        words: str | None = None,
    ) -> tuple[str, ...]:
        if key not in self.data:
            return tuple(self._or_default(key, default))
        expected = f"expected an array of {'texts' if words is None else 'words: ' + words}"
        items = self._array(key, expected)
        if non_empty and not items:
            raise self.v.fail(self.key(key), f"{expected}, at least one, found an empty array")
        out: list[str] = []
        for index, item in enumerate(items):
            path = (*self.path, key, index)
            if not isinstance(item, str):
                raise self.v.fail(path, f"expected text, found {kind_of(item)}")
            if check is not None:
                try:
                    check(item)
                except RuleError as exc:
                    raise self.v.fail(path, str(exc)) from None
            if unique and item in out:
                raise self.v.fail(path, "listed more than once")
            out.append(item)
        return tuple(out)
