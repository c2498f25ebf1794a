"""`rypsok init` and `check`'s hints, through the real console script (REQ-OPS-001, REQ-CFG-005).

`init PATH` writes a commented starter that `check` accepts, never replaces a file, and
prints the host entry that uses it; the entry starts rypsok and it answers. `check` names the
nearest key for a mistyped one and the driver types for an unknown driver.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import trio
from mcp_helpers import modern
from stdio_process import ROOT, Child

from rypsok.config.load import load_config_text
from rypsok.shared.drivers import DRIVER_TYPES
from rypsok.shared.vocabulary import Category


def _console_script() -> str:
    found = shutil.which("rypsok", path=str(Path(sys.executable).parent))
    assert found is not None, "the package's console script is not installed beside Python"
    return found


def _rypsok(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RYPSOK_CONFIG"}
    return subprocess.run(
        [_console_script(), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_req_ops_001_init_writes_a_starter_that_check_accepts(tmp_path: Path) -> None:
    path = tmp_path / "rypsok.toml"
    done = _rypsok("init", str(path))
    assert done.returncode == 0, done.stderr
    text = path.read_text(encoding="utf-8")
    assert text.count("\n# ") > 5  # commented for the reader
    checked = _rypsok("check", "--config", str(path))
    assert checked.returncode == 0, checked.stderr
    assert "warning" not in checked.stderr.lower()
    config = load_config_text(text, {})
    # Every category served, by engines that need no key.
    served = {c for e in config.engines for c in e.categories}
    assert served == set(Category)
    assert all(e.api_key_env is None and e.api_key_file is None for e in config.engines)
    assert {e.type for e in config.engines} <= {
        "wikipedia", "hackernews", "arxiv", "crossref", "stackexchange"
    }  # fmt: skip
    assert "BRAVE_API_KEY" in text  # the keyed engine, commented out, with its variable
    entry = json.loads(done.stdout)
    assert entry == {
        "mcpServers": {"rypsok": {"command": "rypsok", "args": ["serve", "--config", str(path)]}}
    }


def test_req_ops_001_init_never_replaces_a_file(tmp_path: Path) -> None:
    path = tmp_path / "rypsok.toml"
    path.write_text("config_version = 1\n# mine\n", encoding="utf-8")
    done = _rypsok("init", str(path))
    assert done.returncode == 1
    assert done.stdout == ""
    assert "exists" in done.stderr
    assert path.read_text(encoding="utf-8") == "config_version = 1\n# mine\n"
    missing = _rypsok("init", str(tmp_path / "no-such-dir" / "rypsok.toml"))
    assert missing.returncode == 1
    assert "cannot be created" in missing.stderr


async def test_req_ops_001_the_printed_host_entry_starts_rypsok(tmp_path: Path) -> None:
    path = tmp_path / "rypsok.toml"
    done = _rypsok("init", str(path))
    server = json.loads(done.stdout)["mcpServers"]["rypsok"]
    async with trio.open_nursery() as nursery:
        child = await Child.start(nursery, [_console_script(), *server["args"]])
        await child.send(modern("tools/list", 1))
        await child.close_stdin()
        listed = await child.line()
        assert await child.wait() == 0
        nursery.cancel_scope.cancel()
    names = [tool["name"] for tool in listed["result"]["tools"]]
    assert names == ["web_search", "web_fetch", "engine_status"]
    categories = listed["result"]["tools"][0]["inputSchema"]["properties"]["category"]["enum"]
    assert set(categories) == {str(c) for c in Category}


def test_req_cfg_005_check_names_the_nearest_key(tmp_path: Path) -> None:
    path = tmp_path / "rypsok.toml"
    path.write_text("config_version = 1\n[search]\nmax_resluts = 5\n", encoding="utf-8")
    done = _rypsok("check", "--config", str(path))
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "rypsok: search.max_resluts: unknown key (line 3, column 15); did you mean max_results?"
    )
    path.write_text("config_version = 1\n[serch]\nmax_results = 5\n", encoding="utf-8")
    assert "did you mean search?" in _rypsok("check", "--config", str(path)).stderr
    # Nothing close: no guess.
    path.write_text("config_version = 1\n[search]\nzzzz = 5\n", encoding="utf-8")
    assert "did you mean" not in _rypsok("check", "--config", str(path)).stderr


def test_req_eng_004_check_lists_the_driver_types_for_an_unknown_driver(tmp_path: Path) -> None:
    path = tmp_path / "rypsok.toml"
    path.write_text(
        'config_version = 1\n[engines.x]\ntype = "bingo"\ncategories = ["general"]\n',
        encoding="utf-8",
    )
    done = _rypsok("check", "--config", str(path))
    assert done.returncode == 1
    message = done.stderr.strip()
    assert message.startswith("rypsok: engines.x.type: no such driver (line 3, column 8); ")
    assert message.endswith("the driver types are " + ", ".join(DRIVER_TYPES))
    for driver in ("wikipedia", "brave", "searxng", "arxiv", "stackexchange"):
        assert driver in message


def test_req_cfg_005_check_names_the_nearest_key_of_a_key_it_does_not_repeat(
    tmp_path: Path,
) -> None:
    # A key that is not a plain word is never repeated (it could be anything), but the known
    # key close to it is named: an accent, a zero-width space pasted with the name.
    path = tmp_path / "rypsok.toml"
    for written in ('"m\u00e1x_results"', '"max_results\u200b"', '"max\u2010results"'):
        path.write_text(f"config_version = 1\n[search]\n{written} = 5\n", encoding="utf-8")
        done = _rypsok("check", "--config", str(path))
        assert done.returncode == 1
        message = done.stderr.strip()
        assert message.startswith("rypsok: search: an unknown key (line 3, column ")
        assert message.endswith("); did you mean max_results?"), written
        assert written.strip('"') not in message
    # Nothing close, or a key past any name's length: no guess, and the key is not shown.
    for written in ('"\u00e9\u00e9\u00e9\u00e9"', '"' + "\u00e1" * 5000 + '"'):
        path.write_text(f"config_version = 1\n[search]\n{written} = 5\n", encoding="utf-8")
        done = _rypsok("check", "--config", str(path))
        assert done.returncode == 1
        assert "did you mean" not in done.stderr
        assert "\u00e9" not in done.stderr
        assert "\u00e1" not in done.stderr


def test_req_ops_001_init_refuses_a_directory_by_its_name(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    for given in (str(tmp_path / "conf"), str(tmp_path / "conf") + "/"):
        done = _rypsok("init", given)
        assert done.returncode == 1, given
        assert done.stdout == ""
        assert done.stderr.strip() == (
            "rypsok: init: PATH names a directory: name the file to create in it (PATH/rypsok.toml)"
        )
    assert list((tmp_path / "conf").iterdir()) == []


def test_req_ops_001_init_never_writes_beside_a_path_that_ends_in_a_separator(
    tmp_path: Path,
) -> None:
    # "new/" names a directory that is not there: no file "new" is made in its place.
    done = _rypsok("init", str(tmp_path / "new") + "/")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.strip() == (
        "rypsok: init: the file cannot be created (Is a directory); give a PATH in a directory"
        " that exists and that you can write"
    )
    assert list(tmp_path.iterdir()) == []


def test_req_ops_001_init_takes_no_dash_and_no_empty_path(tmp_path: Path) -> None:
    # "-" would be standard output to most commands: init writes a file, and says so.
    for given, said in (
        ("-", "init writes a file, not standard output: give its path (./- for a file named -)"),
        ("", "init needs the path of the file to create"),
    ):
        done = subprocess.run(
            [_console_script(), "init", given],
            cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 2, given
        assert done.stdout == ""
        assert done.stderr.splitlines()[-1] == "rypsok: error: " + said
        assert list(tmp_path.iterdir()) == []
    named = subprocess.run(
        [_console_script(), "init", "./-"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert named.returncode == 0
    assert (tmp_path / "-").read_text(encoding="utf-8").startswith("# rypsok's configuration")
