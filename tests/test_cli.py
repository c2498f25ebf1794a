"""The command line (REQ-OPS-001) and the Troubleshooting "At startup" table, row by row."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rypsok import cli

# cli.main installs the JSON exception hooks (see conftest.keep_exception_hooks).
pytestmark = pytest.mark.usefixtures("keep_exception_hooks")

TOKEN = "k" * 40
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("RYPSOK_CONFIG", "BRAVE_API_KEY", "RYPSOK_TOKEN_MIMLYS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def conf(tmp_path):
    def conf(text: str) -> str:
        path = tmp_path / "rypsok.toml"
        path.write_text(text)
        return str(path)

    return conf


def run(capsys, *argv: str) -> tuple[int, str, list[str]]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


def check_fails(capsys, path: str) -> str:
    code, out, err = run(capsys, "check", "--config", path)
    assert code == 1
    assert out == ""
    assert len(err) == 1
    assert err[0].startswith("rypsok: ")
    return err[0].removeprefix("rypsok: ")


# -- --version and usage -------------------------------------------------------------------


def test_req_ops_001_version_prints_the_version_on_stdout(capsys):
    code, out, err = run(capsys, "--version")
    assert (code, out, err) == (0, "rypsok 0.10.0\n", [])


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["serve", "--transport", "ftp"],
        ["check", "--config"],
        ["check", "--unknown"],
        ["--version", "check"],
        ["serve", "extra"],
    ],
)
def test_req_ops_001_usage_errors_exit_2_on_stderr(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert any(line.startswith("rypsok: error: ") for line in err)


@pytest.mark.parametrize(
    ("argv", "names"),
    [(["--help"], "serve"), (["serve", "--help"], "--transport"), (["check", "-h"], "--config")],
)
def test_req_ops_001_help_goes_to_stderr_and_exits_0(capsys, argv, names):
    code, out, err = run(capsys, *argv)
    assert code == 0
    assert out == ""
    assert any(names in line for line in err)


def test_req_ops_001_the_module_entry_point_exits_2_on_a_usage_error():
    proc = subprocess.run(
        [sys.executable, "-m", "rypsok", "nonsense"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "rypsok: error:" in proc.stderr


# -- check: exit codes and the first line --------------------------------------------------


def test_req_ops_001_check_exit_0_and_the_valid_line(capsys, conf):
    path = conf("config_version = 1\n")
    code, out, err = run(capsys, "check", "--config", path)
    assert code == 0
    assert out == ""
    assert err[0] == f"rypsok: configuration from --config {path} is valid"


def test_req_cfg_001_check_reads_rypsok_config(capsys, conf, monkeypatch):
    path = conf("config_version = 1\n")
    monkeypatch.setenv("RYPSOK_CONFIG", path)
    code, _, err = run(capsys, "check")
    assert code == 0
    assert err[0] == f"rypsok: configuration from RYPSOK_CONFIG {path} is valid"


def test_req_cfg_003_check_without_any_file_uses_the_defaults(capsys):
    code, _, err = run(capsys, "check")
    assert code == 0
    assert err[0] == "rypsok: no configuration file: defaults"
    assert (
        "rypsok: engine brave: type=brave enabled=true categories=general,news preference=100 "
        "endpoint=web inactive: environment variable BRAVE_API_KEY is unset or empty"
    ) in err


def test_req_ops_001_check_exit_1_on_a_missing_file(capsys, tmp_path):
    message = check_fails(capsys, str(tmp_path / "absent.toml"))
    assert message.endswith("absent.toml: no such file")


# -- the At startup table, one test per row ------------------------------------------------


def test_req_cfg_005_startup_row_check_exits_1_and_names_a_key(capsys, conf):
    message = check_fails(capsys, conf("config_version = 1\n[search]\ndeadline_ms = 100\n"))
    assert message == (
        "search.deadline_ms: expected an integer from 500 to 10000, found a number below 500 "
        "(line 3, column 15)"
    )


def test_req_cfg_005_startup_row_wrong_kind(capsys, conf):
    message = check_fails(capsys, conf('config_version = 1\n[search]\nmax_results = "five"\n'))
    assert message == (
        "search.max_results: expected an integer from 1 to 20, found text (line 3, column 15)"
    )


def test_req_cfg_005_startup_row_toml_syntax_error(capsys, conf):
    message = check_fails(capsys, conf("abcde\n"))
    assert message.startswith("TOML syntax error: ")
    assert message.endswith("(line 1, column 6)")


def test_req_cfg_005_startup_row_defined_more_than_once(capsys, conf):
    text = (
        'config_version = 1\n[engines.w]\ntype = "wikipedia"\ncategories = ["general"]\n'
        '[engines.w]\ntype = "brave"\n'
    )
    assert check_fails(capsys, conf(text)) == (
        "engines.w: defined more than once (line 5, column 10)"
    )


def test_req_cfg_005_startup_row_dependent_range(capsys, conf):
    text = "config_version = 1\n[search]\ndeadline_ms = 500\nengine_timeout_ms = 2000\n"
    assert check_fails(capsys, conf(text)) == (
        "search.engine_timeout_ms: must be between 100 and 300 "
        "(search.deadline_ms 500 minus search.reserve_ms 200)"
    )


def test_req_cfg_005_startup_row_host_pattern_with_a_trailing_dot(capsys, conf):
    text = 'config_version = 1\n[egress]\ndeny = ["blocked.invalid."]\n'
    message = check_fails(capsys, conf(text))
    assert message.startswith("egress.deny[0]: a host pattern must not end with a dot")


def test_req_cfg_004_startup_row_inline_api_key(capsys, conf):
    text = (
        'config_version = 1\n[engines.brave]\ntype = "brave"\ncategories = ["general"]\n'
        'api_key = "BSAinlinekey0000"\n'
    )
    message = check_fails(capsys, conf(text))
    assert message.startswith(
        "engines.brave.api_key: give the secret by api_key_env or api_key_file"
    )
    assert "BSAinlinekey0000" not in message


def test_req_eng_004_startup_row_no_such_driver(capsys, conf):
    text = 'config_version = 1\n[engines.x]\ntype = "bingo"\ncategories = ["general"]\n'
    assert check_fails(capsys, conf(text)).startswith("engines.x.type: no such driver")


def test_req_eng_013_startup_row_scraping_without_the_switch(capsys, conf):
    text = 'config_version = 1\n[engines.ddg]\ntype = "duckduckgo"\ncategories = ["general"]\n'
    message = check_fails(capsys, conf(text))
    assert "scrapes a human-facing interface; it runs only with [scraping] enabled = true" in (
        message
    )


def test_req_cfg_005_startup_row_non_loopback_bind_without_callers(capsys, conf):
    text = 'config_version = 1\n[service.http]\nbind = "10.1.2.3:8737"\n'
    assert check_fails(capsys, conf(text)) == (
        "service.http.bind: a non-loopback bind needs [service.http.auth] callers"
    )


def test_req_cfg_005_startup_row_unspecified_bind_without_allowed_hosts(capsys, conf, monkeypatch):
    monkeypatch.setenv("RYPSOK_TOKEN_MIMLYS", TOKEN)
    text = (
        'config_version = 1\n[service.http]\nbind = "0.0.0.0:8737"\n'
        '[[service.http.auth.callers]]\nid = "mimlys"\ntoken_env = "RYPSOK_TOKEN_MIMLYS"\n'
    )
    assert check_fails(capsys, conf(text)) == (
        "service.http.bind: a bind on an unspecified address (0.0.0.0, ::) needs "
        "service.http.allowed_hosts"
    )


def test_req_ops_003_startup_row_engine_inactive_for_an_unset_variable(capsys, conf):
    text = (
        'config_version = 1\n[engines.brave]\ntype = "brave"\ncategories = ["general"]\n'
        'api_key_env = "BRAVE_API_KEY"\n'
    )
    code, _, err = run(capsys, "check", "--config", conf(text))
    assert code == 0
    assert any(
        line.startswith("rypsok: engine brave: ")
        and line.endswith("inactive: environment variable BRAVE_API_KEY is unset or empty")
        for line in err
    )


def test_req_cfg_004_startup_row_env_value_is_not_a_variable_name(capsys, conf):
    secret = "BSA-pasted/secret+value"
    text = (
        'config_version = 1\n[engines.brave]\ntype = "brave"\ncategories = ["general"]\n'
        f'api_key_env = "{secret}"\n'
    )
    message = check_fails(capsys, conf(text))
    assert message.startswith(
        "engines.brave.api_key_env: the value is not the name of an environment variable "
        "(it is not shown)"
    )
    assert secret not in message


def test_req_ops_001_startup_row_exit_code_2_for_usage(capsys):
    code, _, err = run(capsys, "check", "--colour")
    assert code == 2
    assert err


# -- check and serve: one validation -------------------------------------------------------

REFUSED = [
    'config_version = 1\n[search]\nmax_results = "five"\n',
    "config_version = 1\n[search]\ndeadline_ms = 500\nengine_timeout_ms = 2000\n",
    'config_version = 1\n[engines.ddg]\ntype = "duckduckgo"\ncategories = ["general"]\n',
    'config_version = 1\n[[service.http.auth.callers]]\nid = "a"\ntoken_env = "UNSET_TOKEN"\n',
    "not toml at all [",
    "config_version = 3\n",
]


@pytest.mark.parametrize("text", REFUSED)
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_req_ops_001_check_and_serve_refuse_the_same_files_alike(capsys, conf, text, transport):
    path = conf(text)
    check_message = check_fails(capsys, path)
    code, out, err = run(capsys, "serve", "--transport", transport, "--config", path)
    assert code == 1
    assert out == ""
    assert err == ["rypsok: " + check_message]


def test_req_ops_001_check_and_serve_refuse_the_same_callers_alike(capsys, conf, monkeypatch):
    monkeypatch.setenv("RYPSOK_TOKEN_MIMLYS", "short")
    text = (
        'config_version = 1\n[[service.http.auth.callers]]\nid = "mimlys"\n'
        'token_env = "RYPSOK_TOKEN_MIMLYS"\n'
    )
    path = conf(text)
    message = check_fails(capsys, path)
    assert message == "service.http.auth.callers[0].token_env: the token is shorter than 32 bytes"
    code, out, err = run(capsys, "serve", "--transport", "http", "--config", path)
    assert (code, out, err) == (1, "", ["rypsok: " + message])


def test_req_priv_004_serve_warns_at_start_when_queries_are_logged(capsys, conf):
    path = conf('config_version = 1\n[logging]\nlevel = "debug"\nlog_queries = true\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RYPSOK_", "BRAVE_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "rypsok", "serve", "--config", path],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=env,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout == ""
    events = [json.loads(line) for line in proc.stderr.splitlines()]
    assert events[0]["level"] == "warn"
    assert events[0]["event"] == "log_queries_enabled"


def test_req_ops_001_serve_stdio_with_a_valid_file_serves_until_end_of_input(conf):
    path = conf('config_version = 1\n[engines.w]\ntype = "wikipedia"\ncategories = ["general"]\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RYPSOK_", "BRAVE_"))}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": "two", "method": "server/discover", "params": {"_meta": meta}},
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "rypsok", "serve", "--config", path],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=env,
        check=False,
    )
    assert proc.returncode == 0
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert answers[0] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert answers[1]["id"] == "two"
    assert answers[1]["result"]["supportedVersions"][0] == "2026-07-28"
    assert len(answers) == 2
    events = [json.loads(line)["event"] for line in proc.stderr.splitlines()]
    assert "serving" in events
    assert "stdio_end_of_input" in events


# -- the property: any bytes, exit 0 or 1, one line on failure, never a traceback ----------


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.one_of(
        st.binary(max_size=300),
        st.lists(
            st.sampled_from([*"[]{}=\".',#\n \t-_aeiz019", "\\u", '"""', "[[", "\x00", "é"]),
            max_size=60,
        ).map(lambda parts: "".join(parts).encode()),
        st.lists(
            st.sampled_from(
                [
                    "config_version = 1\n",
                    "[search]\n",
                    "max_results = 3\n",
                    "[engines.w]\n",
                    'type = "wikipedia"\n',
                    'categories = ["general"]\n',
                    "[[service.http.auth.callers]]\n",
                    'id = "a"\n',
                    "[engines.w]\n",
                    "deadline_ms = 500\n",
                    "x = 1\n",
                    "[fetch]\n",
                    "ports = [8080]\n",
                    "max_results = 1.5\n",
                    "[search]\n",
                    "a.b = 1\n",
                ]
            ),
            max_size=8,
        ).map(lambda parts: "".join(parts).encode()),
    )
)
def test_req_cfg_005_any_bytes_exit_0_or_1_with_one_line(capsys, data):
    with tempfile.NamedTemporaryFile("wb", suffix=".toml", delete=False) as handle:
        handle.write(data)
    try:
        code = cli.main(["check", "--config", handle.name])
    finally:
        os.unlink(handle.name)
    out, err = capsys.readouterr()
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert code in (0, 1)
    if code == 1:
        assert len(lines) == 1
        assert lines[0].startswith("rypsok: ")
    else:
        assert lines[0].endswith(" is valid")
