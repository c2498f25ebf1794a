"""Reading the secrets the configuration names: caller tokens and engine keys.

A secret is read from the environment variable or the file the configuration names, trimmed,
and held as a `Secret` so that it can never reach a log line or a message. Caller tokens are
read by `check` exactly as `serve --transport http` reads them: one function for both.

Implements REQ-CFG-004.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Final

import attrs

from rypsok.config.messages import ConfigError
from rypsok.shared.drivers import DRIVER_TYPES
from rypsok.shared.secret import Secret

if TYPE_CHECKING:
    from collections.abc import Mapping

    from rypsok.config.schema import CallerConfig, Config, EngineConfig

__all__ = [
    "MIN_TOKEN_BYTES",
    "Credential",
    "caller_token",
    "engine_credential",
    "file_is_world_readable",
    "read_caller_tokens",
    "store_password",
]

MIN_TOKEN_BYTES: Final = 32
# A token or a key is a few hundred bytes; a larger file is the wrong file.
_MAX_SECRET_FILE_BYTES: Final = 16384


class _Unreadable(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _read_file(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_SECRET_FILE_BYTES + 1)
    except FileNotFoundError:
        raise _Unreadable("the file does not exist") from None
    except PermissionError:
        raise _Unreadable("the file cannot be read (permission denied)") from None
    except IsADirectoryError:
        raise _Unreadable("the path is a directory") from None
    except OSError:
        raise _Unreadable("the file cannot be read") from None
    if len(data) > _MAX_SECRET_FILE_BYTES:
        raise _Unreadable(f"the file is larger than {_MAX_SECRET_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise _Unreadable("the file is not UTF-8 text") from None


def file_is_world_readable(path: str) -> bool:
    try:
        return bool(os.stat(path).st_mode & stat.S_IROTH)
    except OSError:
        return False


def _caller_token(index: int, caller: CallerConfig, env: Mapping[str, str]) -> Secret:
    return caller_token(f"service.http.auth.callers[{index}]", caller, env)


def caller_token(key: str, caller: CallerConfig, env: Mapping[str, str]) -> Secret:
    """A token given as a caller's is (`token_env` or `token_file`, at least 32 bytes); the
    messages name `key`, the table that holds it. ConfigError for a token serve refuses."""
    source = f"{key}.token_env" if caller.token_env is not None else f"{key}.token_file"
    if caller.token_env is not None:
        value = env.get(caller.token_env, "").strip()
        if not value:
            raise ConfigError(
                f"{key}.token_env: environment variable {caller.token_env} is unset or empty"
            )
    else:
        assert caller.token_file is not None
        try:
            value = _read_file(caller.token_file)
        except _Unreadable as exc:
            raise ConfigError(f"{key}.token_file: {exc.reason}") from None
        if not value:
            raise ConfigError(f"{key}.token_file: the file is empty")
    if len(value.encode("utf-8")) < MIN_TOKEN_BYTES:
        raise ConfigError(f"{source}: the token is shorter than {MIN_TOKEN_BYTES} bytes")
    return Secret(value)


def read_caller_tokens(config: Config, env: Mapping[str, str]) -> dict[str, Secret]:
    """Each caller's token by caller id; ConfigError for a token serve would refuse."""
    tokens: dict[str, Secret] = {}
    for index, caller in enumerate(config.service.http.auth.callers):
        token = _caller_token(index, caller, env)
        for other_index, other in enumerate(config.service.http.auth.callers[:index]):
            if tokens[other.id] == token:
                held = "token_env" if caller.token_env is not None else "token_file"
                raise ConfigError(
                    f"service.http.auth.callers[{index}].{held}: the token is the same as the "
                    f"token of service.http.auth.callers[{other_index}]; give each caller its own"
                )
        tokens[caller.id] = token
    return tokens


@attrs.frozen(kw_only=True)
class Credential:
    """An engine's credential: the secret when resolved, and the words `check` prints."""

    needed: bool
    secret: Secret | None
    state: str  # "no credential needed", "credential resolved", "inactive: ..."

    @property
    def active(self) -> bool:
        return not self.needed or self.secret is not None


def engine_credential(engine: EngineConfig, env: Mapping[str, str]) -> Credential:
    """Resolve an engine's key; a missing key makes the engine inactive, never an error."""
    traits = DRIVER_TYPES[engine.type]
    if not traits.keyed:
        return Credential(needed=False, secret=None, state="no credential needed")
    if traits.credential_optional and engine.api_key_env is None and engine.api_key_file is None:
        # A key that only raises a quota or passes a proxy: without one the engine runs.
        return Credential(needed=False, secret=None, state="no credential configured")
    if engine.api_key_env is not None:
        value = env.get(engine.api_key_env, "").strip()
        if not value:
            return Credential(
                needed=True,
                secret=None,
                state=f"inactive: environment variable {engine.api_key_env} is unset or empty",
            )
        return Credential(needed=True, secret=Secret(value), state="credential resolved")
    if engine.api_key_file is not None:
        try:
            value = _read_file(engine.api_key_file)
        except _Unreadable as exc:
            return Credential(
                needed=True, secret=None, state=f"inactive: credential file: {exc.reason}"
            )
        if not value:
            return Credential(
                needed=True, secret=None, state="inactive: the credential file is empty"
            )
        return Credential(needed=True, secret=Secret(value), state="credential resolved")
    return Credential(
        needed=True, secret=None, state="inactive: neither api_key_env nor api_key_file is set"
    )


def store_password(config: Config, env: Mapping[str, str]) -> Secret | None:
    """The `[coordination]` store's password, or None when none is configured.

    Read once at start by `check` and `serve` alike; ConfigError when the variable or the
    file named cannot give one (the value is never part of a message).
    """
    coordination = config.coordination
    if coordination is None:
        return None
    if coordination.password_env is not None:
        value = env.get(coordination.password_env, "").strip()
        if not value:
            raise ConfigError(
                f"coordination.password_env: environment variable {coordination.password_env} "
                "is unset or empty"
            )
        return Secret(value)
    if coordination.password_file is not None:
        try:
            value = _read_file(coordination.password_file)
        except _Unreadable as exc:
            raise ConfigError(f"coordination.password_file: {exc.reason}") from None
        if not value:
            raise ConfigError("coordination.password_file: the file is empty")
        return Secret(value)
    return None
