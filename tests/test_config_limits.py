"""Every configurable range of the limits table, read from the table itself.

`book/maintainers/limits.tsv` is the project's copy of the book's limits table (with a
`where` column of its own, read by tools/check-requirements); each row with a numeric range
is checked at both ends (the end is accepted, one past it is refused with the key named) and
its default against the configuration's. The map below only says
which key a row configures; the figures come from the table.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Final

import pytest

from rypsok.config.load import ConfigError, load_config_text
from rypsok.config.schema import Config

ROOT: Final = Path(__file__).resolve().parent.parent
TABLE: Final = ROOT / "book" / "maintainers" / "limits.tsv"
SHARED: Final = Path("/work/shared/spec/limits.tsv")

# LIM id → the configuration key it sets (a dotted path).
KEYS: Final = {
    "LIM-S1": "search.query_max_chars",
    "LIM-S2": "search.max_results",
    "LIM-S3": "search.results_per_engine",
    "LIM-S4": "search.deadline_ms",
    "LIM-S6": "search.reserve_ms",
    "LIM-S8": "search.engines_per_request",
    "LIM-S9": "search.snippet_max_chars",
    "LIM-S10": "search.title_max_chars",
    "LIM-S12": "search.connect_timeout_ms",
    "LIM-F2": "fetch.max_chars_ceiling",
    "LIM-F3": "fetch.max_bytes",
    "LIM-F4": "fetch.deadline_ms",
    "LIM-F6": "fetch.connect_timeout_ms",
    "LIM-F7": "fetch.max_redirects",
    "LIM-F18": "fetch.pdf_max_pages",
    "LIM-F19": "fetch.pdf_max_chars",
    "LIM-F20": "fetch.pdf_memory_mib",
    "LIM-C10": "fetch.pdf_workers",
    "LIM-C1": "limits.outbound_in_flight",
    "LIM-C2": "limits.per_engine_in_flight",
    "LIM-C3": "limits.fetches_in_flight",
    "LIM-C5": "limits.parsing_in_flight",
    "LIM-C6": "limits.web_search_per_minute",
    "LIM-C7": "limits.web_fetch_per_minute",
    "LIM-C8": "limits.engine_status_per_minute",
    "LIM-H1": "service.http.max_connections",
    "LIM-H2": "service.http.max_request_bytes",
    "LIM-H3": "service.http.idle_timeout_s",
    "LIM-H4": "service.http.max_streams",
    "LIM-H5": "service.http.request_timeout_s",
    "LIM-H6": "service.http.max_sessions",
    "LIM-B1": "resilience.failures_to_open",
    "LIM-B2": "resilience.first_cooldown_s",
    "LIM-K2": "cache.ttl_s",
    "LIM-K3": "cache.max_entries",
    "LIM-K4": "cache.max_entry_bytes",
    "LIM-O1": "service.shutdown_ms",
}

# Other keys a range end needs set so that only the key under test is at its end: keys
# whose range this key bounds, or that bound this key's.
COMPANIONS: Final = {
    "search.max_results": {"search.max_results_ceiling": 20},
    "search.deadline_ms": {"search.engine_timeout_ms": 100},
    "search.reserve_ms": {"search.engine_timeout_ms": 100},
    "fetch.max_chars_ceiling": {"fetch.max_chars": 500},
    "fetch.deadline_ms": {"service.http.request_timeout_s": 600},
    "service.http.request_timeout_s": {"fetch.deadline_ms": 1000},
    "resilience.first_cooldown_s": {"resilience.max_cooldown_s": 3600},
}

_UNITS: Final = {"KiB": 1024, "MiB": 1024 * 1024}
_NUMBER: Final = re.compile(r"(\d+)(?:\s*(KiB|MiB))?")


def _rows() -> list[dict[str, str]]:
    with TABLE.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def _amount(text: str) -> int:
    match = _NUMBER.match(text.strip())
    assert match is not None, text
    return int(match.group(1)) * _UNITS.get(match.group(2) or "", 1)


def _range(row: dict[str, str]) -> tuple[int, int]:
    low, high = row["range"].split(",")[0].split("–")
    return _amount(low), _amount(high)


def _cases() -> list[object]:
    rows = {row["id"]: row for row in _rows()}
    cases = []
    for lim, key in KEYS.items():
        lo, hi = _range(rows[lim])
        cases += [
            pytest.param(lim, key, lo, lo - 1, id=f"{lim}-low"),
            pytest.param(lim, key, hi, hi + 1, id=f"{lim}-high"),
        ]
    return cases


def _text(settings: dict[str, int]) -> str:
    tables: dict[str, list[str]] = {}
    for dotted, value in settings.items():
        table, _, key = dotted.rpartition(".")
        tables.setdefault(table, []).append(f"{key} = {value}")
    return "config_version = 1\n" + "".join(
        f"[{table}]\n" + "\n".join(lines) + "\n" for table, lines in tables.items()
    )


def _value(config: Config, dotted: str) -> object:
    node: object = config
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def test_lim_the_committed_table_is_the_books() -> None:
    """The copy is the book's table plus the project's `where` column, its last: the book's
    rows in order; after them only the project's own rows (limits the book does not have yet,
    decisions/requirements-where-column), under ids the book does not use."""
    if not SHARED.exists():
        pytest.skip("the book's limits table is not mounted here")
    lines = TABLE.read_text(encoding="utf-8").split("\n")
    assert lines[0].endswith("\twhere")
    without_where = [line.rsplit("\t", 1)[0] if line else line for line in lines]
    book = SHARED.read_text(encoding="utf-8").split("\n")
    assert book[-1] == ""  # the book's table ends with a newline
    assert without_where[: len(book) - 1] == book[:-1]
    book_ids = {line.split("\t", 1)[0] for line in book}
    own = [line for line in without_where[len(book) - 1 :] if line]
    assert all(line.count("\t") == 4 for line in own)
    assert not {line.split("\t", 1)[0] for line in own} & book_ids


def test_lim_every_mapped_row_has_a_numeric_range_and_every_such_row_is_mapped() -> None:
    ranged = {
        row["id"]
        for row in _rows()
        if re.match(r"\d[^–]*–\s*\d", row["range"]) and not row["id"].startswith("LIM-M")
    }
    assert ranged == set(KEYS)


@pytest.mark.parametrize(("lim", "key", "end", "beyond"), _cases())
def test_lim_each_range_end_is_accepted_and_one_past_it_refused(
    lim: str, key: str, end: int, beyond: int
) -> None:
    companions = COMPANIONS.get(key, {})
    config = load_config_text(_text({**companions, key: end}), {}, source="t")
    assert _value(config, key) == end
    with pytest.raises(ConfigError) as caught:
        load_config_text(_text({**companions, key: beyond}), {}, source="t")
    assert str(caught.value).startswith(f"{key}: ")


@pytest.mark.parametrize("lim", sorted(KEYS))
def test_lim_each_default_is_the_tables(lim: str) -> None:
    row = next(row for row in _rows() if row["id"] == lim)
    assert _value(Config(), KEYS[lim]) == _amount(row["default"])
