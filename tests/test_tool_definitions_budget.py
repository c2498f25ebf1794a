"""LIM-I1 enforced against the configuration (REQ-MCP-008).

The configuration and the protocol layer measure the same definitions: the configuration's
count (rypsok.shared.tooldefs.definition_chars) agrees with the size of the definitions the
protocol layer serves, for many configurations; `check` and `serve` refuse a file whose
definitions would pass the bound, naming search.languages.
"""

from __future__ import annotations

import itertools
import json
import string
from typing import Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rypsok import cli
from rypsok.config.load import ConfigError, load_config_text
from rypsok.config.schema import Config
from rypsok.mcp.protocol import build_toolset, definition_budget
from rypsok.mcp.protocol.tools import INSTRUCTIONS
from rypsok.shared.tooldefs import LIM_I1_CHARS, ToolSettings, definition_chars

TAGS: Final = [a + b for a, b in itertools.product(string.ascii_lowercase, repeat=2)]
CATEGORIES: Final = ("general", "news", "science", "code")


def _wire_size(toolset: object) -> int:
    # What a client receives in tools/list, measured as LIM-I1 counts it.
    definitions = toolset.definitions()  # type: ignore[attr-defined]
    return len(INSTRUCTIONS) + sum(
        len(d["name"])
        + len(d["description"])
        + len(json.dumps(d["inputSchema"], sort_keys=True, separators=(",", ":")))
        for d in definitions
    )


@settings(max_examples=200, deadline=None)
@given(
    categories=st.lists(st.sampled_from(CATEGORIES), unique=True),
    languages=st.lists(
        st.from_regex(r"[a-z]{2,3}(-[A-Za-z0-9]{1,8}){0,3}", fullmatch=True),
        min_size=1,
        max_size=40,
        unique=True,
    ),
    status_enabled=st.booleans(),
    ceiling=st.integers(1, 20),
    query_max_chars=st.integers(1, 600),
    data=st.data(),
)
def test_req_mcp_008_the_configuration_count_agrees_with_the_served_definitions(
    categories: list[str],
    languages: list[str],
    status_enabled: bool,
    ceiling: int,
    query_max_chars: int,
    data: st.DataObject,
) -> None:
    default = data.draw(st.integers(1, ceiling))
    settings_ = ToolSettings(
        served_categories=tuple(categories),
        languages=tuple(languages),
        status_enabled=status_enabled,
        max_results_default=default,
        max_results_ceiling=ceiling,
        query_max_chars=query_max_chars,
    )
    toolset = build_toolset(settings_)
    counted = definition_chars(settings_)
    assert counted == definition_budget(toolset) == _wire_size(toolset)


def _languages_text(count: int) -> str:
    tags = ", ".join(f'"{tag}"' for tag in TAGS[:count])
    return f"config_version = 1\n[search]\nlanguages = [{tags}]\n"


def _largest_fitting() -> int:
    # The most two-letter languages the default engines' definitions can carry.
    defaults = Config()
    count = 1
    while (
        definition_chars(
            ToolSettings(
                served_categories=tuple({str(c) for e in defaults.engines for c in e.categories}),
                languages=tuple(TAGS[: count + 1]),
                status_enabled=True,
                max_results_default=5,
                max_results_ceiling=20,
                query_max_chars=400,
            )
        )
        <= LIM_I1_CHARS
    ):
        count += 1
    return count


def test_req_mcp_008_the_last_language_that_fits_is_accepted_and_one_more_refused() -> None:
    fits = _largest_fitting()
    assert 50 < fits < 300
    config = load_config_text(_languages_text(fits), {}, source="t")
    assert len(config.search.languages) == fits
    with pytest.raises(ConfigError) as caught:
        load_config_text(_languages_text(fits + 1), {}, source="t")
    message = str(caught.value)
    assert message.startswith("search.languages: the tool definitions would be ")
    assert "more than the 2000 allowed (LIM-I1); list fewer languages" in message
    assert "(line 3, column 13)" in message


def test_req_mcp_008_fewer_served_tools_leave_room_for_more_languages() -> None:
    # Without engine_status the same list can fit: the count follows the tools served.
    fits = _largest_fitting()
    text = _languages_text(fits + 1) + "[status]\nenabled = false\n"
    assert len(load_config_text(text, {}, source="t").search.languages) == fits + 1


@pytest.mark.parametrize("command", ["check", "serve"])
def test_req_mcp_008_check_and_serve_refuse_300_languages(
    command: str, tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rypsok.toml"  # type: ignore[operator]
    path.write_text(_languages_text(300))
    code = cli.main([command, "--config", str(path)])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert err.startswith("rypsok: search.languages: the tool definitions would be ")
