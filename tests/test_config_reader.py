"""One reader for every configuration, passing or failing (REQ-CFG-005).

`rypsok.config.validate` reads each key once, checks it and builds the frozen classes of
`rypsok.config.schema` itself: the code that refuses a value is the code that keeps it. The
fixed ranges are written once, beside their defaults, as the schema's `ranged` fields; these
tests walk that table and ask the real loader, for every entry, for values in range (kept as
written) and out of range (refused with the Configuration chapter's message, naming the key,
the range, what was found and the place).
"""

from __future__ import annotations

import inspect
from typing import Final

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rypsok.config import schema
from rypsok.config.load import ConfigError, load_config_text
from rypsok.config.schema import (
    CacheConfig,
    Config,
    CoordinationConfig,
    EngineConfig,
    FetchConfig,
    HttpConfig,
    LimitsConfig,
    ResilienceConfig,
    SearchConfig,
    ServiceConfig,
    int_range,
    ranged_keys,
)
from rypsok.shared.vocabulary import Category, SafeSearch

# Each class of the schema with ranged keys, at the table of the file it reads.
TABLES: Final[dict[str, type]] = {
    "service": ServiceConfig,
    "service.http": HttpConfig,
    "search": SearchConfig,
    "fetch": FetchConfig,
    "limits": LimitsConfig,
    "resilience": ResilienceConfig,
    "cache": CacheConfig,
    "coordination": CoordinationConfig,
    "engines.mine": EngineConfig,
}
# What a table needs besides the key under test to be valid.
REQUIRED: Final = {
    "coordination": ['url = "redis://127.0.0.1:6379/0"', "replicas = 1"],
    "engines.mine": ['type = "wikipedia"', 'categories = ["general"]'],
}
# Keys whose dependent range the key under test bounds, set so that only it is at its end.
COMPANIONS: Final = {
    "search.max_results_ceiling": ("search", "max_results = 1"),
    "search.deadline_ms": ("search", "engine_timeout_ms = 100"),
    "search.reserve_ms": ("search", "engine_timeout_ms = 100"),
    "fetch.max_chars_ceiling": ("fetch", "max_chars = 500"),
    "fetch.deadline_ms": ("service.http", "request_timeout_s = 600"),
    "resilience.max_cooldown_s": ("resilience", "first_cooldown_s = 10"),
}

ENTRIES: Final = [
    (table, key, *int_range(cls, key)) for table, cls in TABLES.items() for key in ranged_keys(cls)
]


def _file(table: str, key: str, value: str) -> tuple[str, int]:
    """The file setting `key` of `table` to `value`, and the line the key is on."""
    lines = ["config_version = 1"]
    companion = COMPANIONS.get(f"{table}.{key}")
    if companion is not None and companion[0] != table:
        lines += [f"[{companion[0]}]", companion[1]]
    lines.append(f"[{table}]")
    lines += REQUIRED.get(table, [])
    if companion is not None and companion[0] == table:
        lines.append(companion[1])
    lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n", len(lines)


def _kept(config: Config, table: str, key: str) -> object:
    node: object = config.engines[0] if table == "engines.mine" else config
    if table != "engines.mine":
        for part in table.split("."):
            node = getattr(node, part)
    return getattr(node, key)


def _refusal(table: str, key: str, lo: int, hi: int, value: int, line: int) -> str:
    dotted = f"{table}.{key}"
    found = (
        "a negative number"
        if value < 0 <= lo
        else f"a number below {lo}"
        if value < lo
        else f"a number above {hi}"
    )
    column = len(f"{key} = ") + 1
    place = f"(line {line}, column {column})"
    return f"{dotted}: expected an integer from {lo} to {hi}, found {found} {place}"


def _read(table: str, key: str, lo: int, hi: int, value: int) -> None:
    """The reader keeps a value in range as written and refuses one outside with the
    documented message: the same call, whichever way it goes."""
    text, line = _file(table, key, str(value))
    if lo <= value <= hi:
        assert _kept(load_config_text(text, {}), table, key) == value
        return
    with pytest.raises(ConfigError) as caught:
        load_config_text(text, {})
    assert str(caught.value) == _refusal(table, key, lo, hi, value, line)


def test_req_cfg_005_every_class_with_ranged_keys_is_walked() -> None:
    with_ranges = {
        cls
        for _, cls in inspect.getmembers(schema, inspect.isclass)
        if attrs.has(cls) and ranged_keys(cls)
    }
    assert with_ranges == set(TABLES.values())
    assert len(ENTRIES) == 40


@pytest.mark.parametrize(
    ("table", "key", "lo", "hi", "value"),
    [
        pytest.param(table, key, lo, hi, value, id=f"{table}.{key}={value}")
        for table, key, _, lo, hi in ENTRIES
        for value in (lo - 1, lo, hi, hi + 1)
    ],
)
def test_req_cfg_005_each_range_end_is_kept_and_one_past_it_refused_with_the_message(
    table: str, key: str, lo: int, hi: int, value: int
) -> None:
    _read(table, key, lo, hi, value)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_req_cfg_005_any_integer_is_kept_in_range_and_refused_outside_it(
    data: st.DataObject,
) -> None:
    table, key, _, lo, hi = data.draw(st.sampled_from(ENTRIES))
    value = data.draw(st.integers(min_value=lo - 2 * (hi - lo) - 2, max_value=2 * hi + 2))
    _read(table, key, lo, hi, value)


@pytest.mark.parametrize(("table", "key", "default", "lo", "hi"), ENTRIES)
@pytest.mark.parametrize(
    ("written", "found"),
    [('"5"', "text"), ("5.0", "a decimal number"), ("true", "a boolean"), ("[5]", "an array")],
)
def test_req_cfg_005_a_value_of_another_kind_is_refused_with_the_range(
    table: str, key: str, default: int, lo: int, hi: int, written: str, found: str
) -> None:
    text, line = _file(table, key, written)
    with pytest.raises(ConfigError) as caught:
        load_config_text(text, {})
    column = len(f"{key} = ") + 1
    assert str(caught.value) == (
        f"{table}.{key}: expected an integer from {lo} to {hi}, found {found} "
        f"(line {line}, column {column})"
    )


@pytest.mark.parametrize(("table", "key", "default", "lo", "hi"), ENTRIES)
def test_req_cfg_003_a_key_left_out_is_its_default(
    table: str, key: str, default: int, lo: int, hi: int
) -> None:
    # Only the table's required keys are written: the reader gives the schema's default.
    lines = ["config_version = 1", f"[{table}]", *REQUIRED.get(table, [])]
    config = load_config_text("\n".join(lines) + "\n", {})
    assert _kept(config, table, key) == default
    assert lo <= default <= hi


def test_req_cfg_005_what_the_reader_builds_is_of_the_exact_kinds() -> None:
    # Every kind of field the schema has: nested tables, arrays of tables, of texts, of
    # numbers and of categories, an optional table, optional texts, the vocabularies.
    text = """\
config_version = 1
[service.http]
bind = "127.0.0.1:9000"
allowed_hosts = ["a.example.org"]
[[service.http.auth.callers]]
id = "ops"
token_env = "RYPSOK_TEST_TOKEN"
[search]
languages = ["en", "fi"]
safe_search = "strict"
[fetch]
ports = [80, 443, 8443]
[egress]
allow = ["wiki.corp.example.org"]
[coordination]
url = "redis://127.0.0.1:6379/0"
replicas = 3
[engines.mirror]
type = "wikipedia"
categories = ["general", "science"]
base_url = "http://127.0.0.1:9/w"
"""
    config = load_config_text(text, {"RYPSOK_TEST_TOKEN": "t" * 40})
    assert config.search.safe_search is SafeSearch.STRICT
    assert config.search.languages == ("en", "fi")
    assert config.fetch.ports == (80, 443, 8443)
    assert config.egress.allow == ("wiki.corp.example.org",)
    assert config.service.http.allowed_hosts == ("a.example.org",)
    (caller,) = config.service.http.auth.callers
    assert (caller.id, caller.token_env, caller.token_file) == ("ops", "RYPSOK_TEST_TOKEN", None)
    assert config.coordination == CoordinationConfig(url="redis://127.0.0.1:6379/0", replicas=3)
    (engine,) = config.engines
    assert engine.categories == (Category.GENERAL, Category.SCIENCE)
    assert all(type(c) is Category for c in engine.categories)
    # A file without an engine table gets the schema's two default engines.
    assert load_config_text("config_version = 1\n", {}) == Config()


@pytest.mark.parametrize(
    ("written", "message"),
    [
        (
            "[search]\nmax_results_ceiling = 3\n",
            "search.max_results_ceiling: must be at least 5 (search.max_results, default 5) "
            "(line 3, column 23)",
        ),
        (
            "[search]\ndeadline_ms = 2100\n",
            "search.deadline_ms: must be at least 2200 (search.engine_timeout_ms, default 2000, "
            "plus search.reserve_ms 200) (line 3, column 15)",
        ),
        (
            "[search]\nreserve_ms = 900\n",
            "search.reserve_ms: must be at most 500 (search.deadline_ms 2500 minus "
            "search.engine_timeout_ms, default 2000) (line 3, column 14)",
        ),
        (
            "[fetch]\nmax_chars_ceiling = 1000\n",
            "fetch.max_chars_ceiling: must be at least 3000 (fetch.max_chars, default 3000) "
            "(line 3, column 21)",
        ),
        (
            "[fetch]\ndeadline_ms = 29000\n",
            "fetch.deadline_ms: must be at most 28000 (service.http.request_timeout_s, default "
            "30 s, minus 2 s) (line 3, column 15)",
        ),
        (
            "[resilience]\nmax_cooldown_s = 30\n",
            "resilience.max_cooldown_s: must be at least 60 (resilience.first_cooldown_s, "
            "default 60) (line 3, column 18)",
        ),
    ],
)
def test_req_cfg_005_a_default_that_no_longer_fits_is_named_with_its_figure(
    written: str, message: str
) -> None:
    # The defaults the reader takes from the schema, said in the message on the key the
    # author wrote: the figures are the Configuration chapter's defaults.
    with pytest.raises(ConfigError) as caught:
        load_config_text("config_version = 1\n" + written, {})
    assert str(caught.value) == message


def test_req_cfg_003_an_unset_head_timeout_follows_a_short_idle_time() -> None:
    # Unset, 10 s, or the idle time less 1 s when that is shorter (decisions/config-value-rules).
    short = load_config_text("config_version = 1\n[service.http]\nidle_timeout_s = 5\n", {})
    assert short.service.http.head_timeout_s == 4
    assert load_config_text("config_version = 1\n", {}).service.http.head_timeout_s == 10
