"""The validated values become the frozen `Config` without cattrs (REQ-PERF-005).

`rypsok.config.validate` builds the classes directly when the validator's values are of the
exact kinds (always, unless the validator has a bug) and hands anything else to the cattrs
converter it used before. These tests pin that both give the same configuration, that the
converter still decides (and raises as before) for what is not exact, and that serving's
start does not import cattrs.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import cattrs
import pytest

from rypsok.config import validate
from rypsok.config.load import ConfigError, load_config, load_config_text
from rypsok.config.schema import Config, EngineConfig
from rypsok.shared.vocabulary import Category, SafeSearch

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples" / "configs").glob("*.toml"))

# Every kind of field the schema has: tables in tables, arrays of tables, of texts, of numbers
# and of categories, an optional table, optional texts, the vocabularies, int, bool, str.
EVERYTHING = """\
config_version = 1
[service]
user_agent_contact = "ops@example.org"
structured_content = false
[service.http]
bind = "127.0.0.1:9000"
allowed_hosts = ["a.example.org", "b.example.org"]
[[service.http.auth.callers]]
id = "ops"
token_env = "RYPSOK_TEST_TOKEN"
[search]
languages = ["en", "fi"]
safe_search = "strict"
[fetch]
ports = [80, 443, 8443]
[egress]
allow_http = true
allow = ["wiki.corp.example.org"]
deny = ["*.blocked.example.org"]
[logging]
level = "debug"
[cache]
enabled = true
[coordination]
url = "redis://127.0.0.1:6379/0"
replicas = 3
[engines.wikipedia]
type = "wikipedia"
categories = ["general", "science"]
[engines.mirror]
type = "wikipedia"
categories = ["science"]
base_url = "http://127.0.0.1:9/w"
enabled = false
"""


@pytest.fixture
def both_ways(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Config, Config]]:
    """Every structuring of the validator is also done by cattrs; both results are kept."""
    pairs: list[tuple[Config, Config]] = []

    def structure(structured: dict[str, Any]) -> Config:
        direct = validate._structure(structured, Config)
        converted = validate._converter().structure(structured, Config)
        pairs.append((direct, converted))
        return direct

    monkeypatch.setattr(validate, "_structure_config", structure)
    return pairs


def _same(direct: Config, converted: Config) -> None:
    assert direct == converted
    # Equal and of the same kinds all the way down (True == 1, but a bool is not an int).
    assert repr(direct) == repr(converted)


def test_req_perf_005_every_kind_of_field_is_built_as_cattrs_builds_it(
    both_ways: list[tuple[Config, Config]],
) -> None:
    config = load_config_text(EVERYTHING, {"RYPSOK_TEST_TOKEN": "t" * 40})
    assert len(both_ways) == 1
    _same(*both_ways[0])
    assert config.coordination is not None
    assert config.service.http.auth.callers[0].id == "ops"
    assert config.search.safe_search is SafeSearch.STRICT
    assert config.engines[0].categories == (Category.GENERAL, Category.SCIENCE)
    assert type(config.fetch.ports) is tuple


def test_req_perf_005_the_defaults_are_built_as_cattrs_builds_them(
    both_ways: list[tuple[Config, Config]],
) -> None:
    load_config(None, {})
    _same(*both_ways[0])


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_req_perf_005_the_examples_are_built_as_cattrs_builds_them(
    both_ways: list[tuple[Config, Config]], path: Path
) -> None:
    text = path.read_text().replace("/run/secrets/rypsok-ops", "/nonexistent/rypsok-ops")
    # Tutorial 4's caller token file does not exist here: refused after the structuring.
    with contextlib.suppress(ConfigError):
        load_config_text(text, {"RYPSOK_TOKEN_MIMLYS": "m" * 40})
    assert len(both_ways) == 1
    _same(*both_ways[0])


@pytest.mark.parametrize(
    "structured",
    [
        {"config_version": 1, "not_a_key": 1},  # an extra key
        {"config_version": "1"},  # a kind that is not exact
        {"config_version": 1, "engines": [{"id": "x", "type": "wikipedia"}]},  # a key missing
        {"config_version": 1, "search": {"safe_search": "nope"}},  # no such member
        {"config_version": 1, "engines": [{"id": "x", "type": "wikipedia", "categories": "ab"}]},
        # a member given as itself, not as its text: refused as the validator never hands it
        {"config_version": 1, "search": {"safe_search": SafeSearch.STRICT}},
        # a number where a text is: refused, never turned into "5"
        {"config_version": 1, "engines": [{"id": 5, "type": "wikipedia", "categories": []}]},
    ],
)
def test_req_perf_005_what_is_not_exact_is_left_to_cattrs(structured: dict[str, Any]) -> None:
    with pytest.raises(cattrs.BaseValidationError) as expected:
        validate._converter().structure(structured, Config)
    with pytest.raises(type(expected.value)) as caught:
        validate._structure_config(structured)
    assert isinstance(caught.value, cattrs.BaseValidationError)
    assert str(caught.value) == str(expected.value)


def test_req_perf_005_an_exact_configuration_is_built_without_cattrs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every kind of field the schema has (optional tables and values, arrays, members,
    # nested tables) is built by the direct path: cattrs is never asked.
    def no_cattrs() -> None:
        raise AssertionError("cattrs was asked for an exact configuration")

    monkeypatch.setattr(validate, "_converter", no_cattrs)
    config = load_config_text(EVERYTHING, {"RYPSOK_TEST_TOKEN": "t" * 40})
    assert config.coordination is not None
    assert load_config(None, {}).coordination is None


def test_req_perf_005_a_tuple_given_for_an_array_is_built_as_cattrs_builds_it() -> None:
    # Not what the validator hands over (it gives lists), but the same result either way.
    engine = {"id": "x", "type": "wikipedia", "categories": ["general"]}
    structured = {"config_version": 1, "engines": (engine,)}
    direct = validate._structure_config(structured)
    converted = validate._converter().structure(structured, Config)
    _same(direct, converted)
    assert type(direct.engines[0]) is EngineConfig


def test_req_perf_005_serving_imports_no_cattrs() -> None:
    code = (
        "import sys\n"
        "from rypsok.config.check import validate\n"
        "import rypsok.mcp.stdio, rypsok.core.services\n"
        "validate(None, {})\n"
        "print(','.join(m for m in ('cattrs',) if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == ""
