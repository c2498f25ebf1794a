"""Locating, parsing and validating the configuration file (REQ-CFG-001, -003, -004, -005).

One function validates for `check` and for `serve`: `load_config`. It refuses the first
problem it meets with a `ConfigError` naming the key, what was expected, the kind of value
found (never the value) and, where the file has one, the line and column.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from rypsok.config.messages import ConfigError, Place, with_place
from rypsok.config.metrics import metrics_token
from rypsok.config.secrets import read_caller_tokens, store_password
from rypsok.config.toml import parse_toml
from rypsok.config.validate import Validator

if TYPE_CHECKING:
    from collections.abc import Mapping

    from rypsok.config.schema import Config

__all__ = [
    "ConfigError",
    "ConfigSource",
    "load_config",
    "load_config_bytes",
    "load_config_text",
    "load_source",
    "locate_config",
]


@attrs.frozen(kw_only=True)
class ConfigSource:
    """Where the file came from, in the words of `check`'s first line."""

    path: str | None
    origin: str  # "--config", "RYPSOK_CONFIG" or "defaults"

    def describe(self) -> str:
        if self.path is None:
            return "no configuration file: defaults"
        return f"configuration from {self.origin} {self.path}"


def locate_config(path: str | None, env: Mapping[str, str]) -> ConfigSource:
    if path is not None:
        return ConfigSource(path=path, origin="--config")
    from_env = env.get("RYPSOK_CONFIG", "")
    if from_env:
        return ConfigSource(path=from_env, origin="RYPSOK_CONFIG")
    return ConfigSource(path=None, origin="defaults")


def load_config(path: str | None, env: Mapping[str, str]) -> Config:
    """The validated configuration from --config, else RYPSOK_CONFIG, else the defaults."""
    return load_source(locate_config(path, env), env)


def load_source(source: ConfigSource, env: Mapping[str, str]) -> Config:
    if source.path is None:
        return load_config_text("config_version = 1\n", env, source="defaults")
    try:
        with open(source.path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise ConfigError(f"{source.describe()}: no such file") from None
    except PermissionError:
        raise ConfigError(f"{source.describe()}: permission denied") from None
    except IsADirectoryError:
        raise ConfigError(f"{source.describe()}: is a directory") from None
    except OSError:
        raise ConfigError(f"{source.describe()}: the file cannot be read") from None
    return load_config_bytes(data, env, source=source.describe())


def load_config_bytes(data: bytes, env: Mapping[str, str], source: str) -> Config:
    try:
        # A byte order mark is what some editors write first; it is not part of the text.
        text = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError as exc:
        good = data.removeprefix(b"\xef\xbb\xbf")[: exc.start].decode("utf-8")
        line = good.count("\n") + 1
        column = len(good) - (good.rfind("\n") + 1) + 1
        raise ConfigError(
            with_place(
                "TOML syntax error: the file is not UTF-8 text", Place(line=line, column=column)
            )
        ) from None
    return load_config_text(text, env, source=source)


def load_config_text(text: str, env: Mapping[str, str], source: str = "text") -> Config:
    """Validate `text`; a ConfigError raised carries `source` (the file's description).

    With callers configured, their tokens are read as `serve --transport http` reads them,
    so that `check` refuses what `serve` would (book, "What rypsok check says").
    """
    try:
        data, positions = parse_toml(text)
        config = Validator(positions).config(data)
        if config.service.http.auth.callers:
            read_caller_tokens(config, env)
        # The store's password, like the tokens: what serve would refuse, check refuses.
        store_password(config, env)
        metrics_token(config, env)
    except ConfigError as exc:
        exc.source = source
        raise
    return config
