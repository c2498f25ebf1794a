"""Secret files (REQ-CFG-004): every way a `token_file` or an `api_key_file` can be wrong, and
both sides of the 16 KiB size limit, through the loader that `serve` and `check` use.

Written against the survivors of tools/mutation.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from rypsok.config import secrets
from rypsok.config.load import ConfigError, load_config_text
from rypsok.config.secrets import engine_credential, file_is_world_readable

if TYPE_CHECKING:
    from pathlib import Path

LIMIT = 16384


def _caller_config(path: Path | str) -> str:
    return (
        'config_version = 1\n[service.http]\nbind = "127.0.0.1:8737"\n'
        'allowed_hosts = ["h.example"]\n[[service.http.auth.callers]]\n'
        f'id = "ops"\ntoken_file = "{path}"\n'
    )


def _engine_state(path: Path | str) -> tuple[str, str | None]:
    text = (
        'config_version = 1\n[engines.b]\ntype = "brave"\ncategories = ["general"]\n'
        f'api_key_file = "{path}"\n'
    )
    config = load_config_text(text, {}, source="t")
    credential = engine_credential(config.engines[0], {})
    assert credential.needed
    assert credential.active == (credential.secret is not None)
    return credential.state, None if credential.secret is None else credential.secret.reveal()


def _caller_error(path: Path | str) -> str:
    with pytest.raises(ConfigError) as info:
        load_config_text(_caller_config(path), {}, source="t")
    return str(info.value)


def test_req_cfg_004_a_secret_file_of_exactly_16_kib_is_read_whole(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_bytes(b"k" * LIMIT)
    config = load_config_text(_caller_config(token), {}, source="t")
    assert config.service.http.auth.callers[0].id == "ops"
    state, secret = _engine_state(token)
    assert state == "credential resolved"
    assert secret == "k" * LIMIT


def test_req_cfg_004_a_secret_file_one_byte_over_16_kib_is_refused_not_cut(
    tmp_path: Path,
) -> None:
    token = tmp_path / "token"
    token.write_bytes(b"k" * (LIMIT + 1))
    assert _caller_error(token) == (
        "service.http.auth.callers[0].token_file: the file is larger than 16384 bytes"
    )
    assert _engine_state(token) == (
        "inactive: credential file: the file is larger than 16384 bytes",
        None,
    )
    token.write_bytes(b"k" * (4 * LIMIT))
    assert _engine_state(token)[1] is None


def test_req_cfg_004_a_secret_file_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    assert _caller_error(tmp_path) == (
        "service.http.auth.callers[0].token_file: the path is a directory"
    )
    assert _engine_state(tmp_path) == ("inactive: credential file: the path is a directory", None)


def test_req_cfg_004_a_secret_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_bytes(b"\xff\xfe" + b"k" * 40)
    message = _caller_error(token)
    assert message == "service.http.auth.callers[0].token_file: the file is not UTF-8 text"
    assert _engine_state(token) == ("inactive: credential file: the file is not UTF-8 text", None)


def test_req_cfg_004_a_missing_secret_file_is_named_as_missing(tmp_path: Path) -> None:
    assert _engine_state(tmp_path / "absent") == (
        "inactive: credential file: the file does not exist",
        None,
    )


def test_req_cfg_004_an_empty_key_file_leaves_the_engine_inactive(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text(" \n\t")
    assert _engine_state(key) == ("inactive: the credential file is empty", None)


def test_req_cfg_004_a_secret_file_that_cannot_be_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = tmp_path / "token"
    token.write_text("k" * 40)
    if os.geteuid() == 0:
        # root reads any file: the refusal the kernel would give is made here instead.
        def denied(*_args: object, **_kwargs: object) -> None:
            raise PermissionError(13, "Permission denied")

        monkeypatch.setattr(secrets, "open", denied, raising=False)
    else:
        token.chmod(0o000)
    assert _caller_error(token) == (
        "service.http.auth.callers[0].token_file: the file cannot be read (permission denied)"
    )
    assert _engine_state(token) == (
        "inactive: credential file: the file cannot be read (permission denied)",
        None,
    )


def test_req_cfg_004_a_secret_file_with_an_input_output_error_is_refused() -> None:
    # Reading a process's own memory from offset 0 fails with EIO: an OSError that is
    # neither a missing file, a directory nor a permission problem.
    assert _caller_error("/proc/self/mem") == (
        "service.http.auth.callers[0].token_file: the file cannot be read"
    )
    assert _engine_state("/proc/self/mem") == (
        "inactive: credential file: the file cannot be read",
        None,
    )


def test_req_cfg_004_a_refusal_never_shows_the_file_content(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_bytes(b"\xffsecret-value-" + b"z" * 30)
    assert "secret-value" not in _caller_error(token)
    token.write_bytes(b"secret-value-" + b"z" * LIMIT)
    assert "secret-value" not in _caller_error(token)


@pytest.mark.parametrize(
    ("mode", "world"),
    [(0o600, False), (0o640, False), (0o604, True), (0o644, True), (0o004, True)],
)
def test_req_ops_001_a_world_readable_secret_file_is_recognized(
    tmp_path: Path, mode: int, world: bool
) -> None:
    token = tmp_path / "token"
    token.write_text("k" * 40)
    token.chmod(mode)
    assert file_is_world_readable(str(token)) is world


def test_req_ops_001_a_missing_file_is_not_world_readable(tmp_path: Path) -> None:
    assert file_is_world_readable(str(tmp_path / "absent")) is False


def _credential(engine_table: str, env: dict[str, str]) -> secrets.Credential:
    config = load_config_text("config_version = 1\n" + engine_table, env, source="t")
    return engine_credential(config.engines[0], env)


def test_req_cfg_004_every_credential_state_says_whether_a_key_is_needed() -> None:
    brave = '[engines.b]\ntype = "brave"\ncategories = ["general"]\n'
    assert _credential(brave, {}) == secrets.Credential(
        needed=True, secret=None, state="inactive: neither api_key_env nor api_key_file is set"
    )
    assert not _credential(brave, {}).active
    unset = _credential(brave + 'api_key_env = "K"\n', {})
    assert (unset.needed, unset.secret, unset.active) == (True, None, False)
    blank = _credential(brave + 'api_key_env = "K"\n', {"K": "  "})
    assert (blank.needed, blank.secret, blank.active) == (True, None, False)
    resolved = _credential(brave + 'api_key_env = "K"\n', {"K": " key "})
    assert (resolved.needed, resolved.state, resolved.active) == (
        True, "credential resolved", True
    )  # fmt: skip
    assert resolved.secret is not None
    assert resolved.secret.reveal() == "key"
    wiki = _credential('[engines.w]\ntype = "wikipedia"\ncategories = ["general"]\n', {})
    assert wiki == secrets.Credential(needed=False, secret=None, state="no credential needed")
    assert wiki.active


def test_req_cfg_004_a_key_file_states_needed_and_its_reason(tmp_path: Path) -> None:
    brave = '[engines.b]\ntype = "brave"\ncategories = ["general"]\n'
    key = tmp_path / "key"
    key.write_text("\n")
    empty = _credential(brave + f'api_key_file = "{key}"\n', {})
    assert empty == secrets.Credential(
        needed=True, secret=None, state="inactive: the credential file is empty"
    )
    missing = _credential(brave + f'api_key_file = "{tmp_path / "none"}"\n', {})
    assert (missing.needed, missing.secret) == (True, None)
    key.write_text(" filekey \n")
    found = _credential(brave + f'api_key_file = "{key}"\n', {})
    assert (found.needed, found.state) == (True, "credential resolved")
