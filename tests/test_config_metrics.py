"""`[service.metrics]` as `check` and `serve` read it, through the console script (REQ-OBS-008).

`check` refuses what `serve` would: a metrics bind that takes the MCP listener's port (a
wildcard address on the listener's port and family) fails at serve with EADDRINUSE, so check
refuses it with the reason. The operator's token is the operator's alone: a caller's token,
by the same variable, another variable or a file, would open /metrics to that caller and
/mcp to the operator, so the token must differ from every caller's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from redis_server import free_port
from stdio_process import ROOT

OPERATOR = "metrics-operator-token-0123456789abcdef"
CALLER = "caller-token-alpha-0123456789abcdef-xyz"
CALLERS = (
    '[[service.http.auth.callers]]\nid = "alpha"\ntoken_env = "RYPSOK_TOKEN_ALPHA"\n'
    '[[service.http.auth.callers]]\nid = "beta"\ntoken_env = "RYPSOK_TOKEN_BETA"\n'
)


def _console_script() -> str:
    found = shutil.which("rypsok", path=str(Path(sys.executable).parent))
    assert found is not None
    return found


def _rypsok(
    *args: str, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "RYPSOK_CONFIG"}
    full.update(env)
    return subprocess.run(
        [_console_script(), *args],
        cwd=ROOT, capture_output=True, text=True, env=full, timeout=timeout, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("metrics", "said"),
    [
        ('token_env = "RYPSOK_TOKEN_BETA"\n', "service.http.auth.callers[1]"),
        ('token_env = "RYPSOK_METRICS_TOKEN"\n', "service.http.auth.callers[0]"),
        ('token_file = "{file}"\n', "service.http.auth.callers[0]"),
    ],
    ids=["same-variable", "same-value", "file"],
)
def test_req_obs_008_the_operators_token_is_never_a_callers(
    tmp_path: Path, metrics: str, said: str
) -> None:
    token_file = tmp_path / "metrics-token"
    token_file.write_text(CALLER + "\n", encoding="utf-8")
    path = tmp_path / "rypsok.toml"
    path.write_text(
        "config_version = 1\n" + CALLERS + "[service.metrics]\n" + metrics.format(file=token_file),
        encoding="utf-8",
    )
    env = {
        "RYPSOK_TOKEN_ALPHA": CALLER,
        "RYPSOK_TOKEN_BETA": "caller-token-beta-0123456789abcdef-xyz",
        "RYPSOK_METRICS_TOKEN": CALLER,
    }
    held = "token_file" if "token_file" in metrics else "token_env"
    for command in (("check",), ("serve", "--transport", "http")):
        done = _rypsok(*command, "--config", str(path), env=env)
        assert done.returncode == 1, (command, done.stderr)
        assert done.stdout == ""
        assert done.stderr.strip().splitlines()[-1] == (
            f"rypsok: service.metrics.{held}: the token is the same as the token of {said}; "
            "give the operator a token of its own"
        )
        for secret in env.values():
            assert secret not in done.stderr


def test_req_obs_008_an_operators_own_token_beside_callers_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "rypsok.toml"
    path.write_text(
        "config_version = 1\n"
        + CALLERS
        + '[service.metrics]\ntoken_env = "RYPSOK_METRICS_TOKEN"\n',
        encoding="utf-8",
    )
    env = {
        "RYPSOK_TOKEN_ALPHA": CALLER,
        "RYPSOK_TOKEN_BETA": "caller-token-beta-0123456789abcdef-xyz",
        "RYPSOK_METRICS_TOKEN": OPERATOR,
    }
    done = _rypsok("check", "--config", str(path), env=env)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("http_bind", "metrics_bind", "refused"),
    [
        ("127.0.0.1:{port}", "0.0.0.0:{port}", True),
        ("0.0.0.0:{port}", "127.0.0.1:{port}", True),
        ("[::1]:{port}", "[::]:{port}", True),
        ("127.0.0.1:{port}", "[::]:{port}", False),  # another family: both bind
        ("127.0.0.1:{port}", "127.0.0.2:{port}", False),  # two addresses: both bind
    ],
)
def test_req_obs_008_check_refuses_a_metrics_bind_that_takes_the_listeners_port(
    tmp_path: Path, http_bind: str, metrics_bind: str, refused: bool
) -> None:
    port = free_port()
    path = tmp_path / "rypsok.toml"
    host = 'allowed_hosts = ["rypsok.example"]\n' if http_bind.startswith("0.0.0.0") else ""
    path.write_text(
        "config_version = 1\n"
        f'[service.http]\nbind = "{http_bind.format(port=port)}"\n{host}'
        f'[service.metrics]\nbind = "{metrics_bind.format(port=port)}"\n'
        'token_env = "RYPSOK_METRICS_TOKEN"\n'
        + ('[[service.http.auth.callers]]\nid = "alpha"\ntoken_env = "RYPSOK_TOKEN_ALPHA"\n'),
        encoding="utf-8",
    )
    env = {"RYPSOK_TOKEN_ALPHA": CALLER, "RYPSOK_METRICS_TOKEN": OPERATOR}
    checked = _rypsok("check", "--config", str(path), env=env)
    if refused:
        assert checked.returncode == 1, checked.stderr
        assert checked.stderr.strip().startswith(
            "rypsok: service.metrics.bind: must differ from service.http.bind: "
        )
        assert "another port" in checked.stderr
    else:
        assert checked.returncode == 0, checked.stderr
