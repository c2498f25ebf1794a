"""The `[coordination]` table: the shared store of several rypsok processes (optional).

Without the table nothing changes and no store is contacted. With it, the provider admission
limiters and the callers' tool limits are kept in a Redis or Valkey server that every
process of the deployment shares; see the configuration page, "[coordination]".

The store's password is a secret like any other: never in the URL, only by `password_env` or
`password_file`, read once at start, never printed. `describe_url` gives the URL as `check`
prints it: scheme, host, port, database or socket path, and nothing that could be a
credential.
"""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qs, urlsplit

import attrs

from rypsok.config.rules import RuleError
from rypsok.config.schema import CoordinationConfig

if TYPE_CHECKING:
    from collections.abc import Callable

    from rypsok.config.reader import Table

__all__ = [
    "StoreUrl",
    "describe_url",
    "parse_store_url",
    "read_coordination",
]

_KEY_PREFIX: Final = re.compile(r"[A-Za-z0-9_.:-]{1,64}\Z")
_SCHEMES: Final = ("redis", "rediss", "unix")
_MAX_DB: Final = 15  # Redis's default number of databases
_URL_MAX_CHARS: Final = 1024
_EXAMPLE: Final = "redis://127.0.0.1:6379/0, rediss://store.example:6380 or unix:///run/redis.sock"
_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.", "ip6-localhost"})


@attrs.frozen(kw_only=True)
class StoreUrl:
    """The store's address, parsed once; it carries no password (one is refused)."""

    scheme: str  # redis, rediss or unix
    host: str | None  # None for a unix socket
    port: int | None
    path: str | None  # the socket's path for unix
    db: int
    username: str | None  # an ACL user name is not a secret; its password is

    @property
    def loopback(self) -> bool:
        """Whether the store's traffic stays on this machine."""
        if self.scheme == "unix":
            return True
        assert self.host is not None
        if self.host.lower() in _LOOPBACK_NAMES:
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_store_url(text: str) -> StoreUrl:
    """The URL of `[coordination] url`; RuleError with what to change, never the URL."""
    if len(text) > _URL_MAX_CHARS or any(ord(c) < 0x21 or ord(c) == 0x7F for c in text):
        raise RuleError(f"expected a store URL ({_EXAMPLE})")
    try:
        parts = urlsplit(text)
        host = parts.hostname
        port = parts.port
        password = parts.password
        username = parts.username
    except ValueError:
        raise RuleError(f"expected a store URL ({_EXAMPLE})") from None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise RuleError(f"expected the scheme redis, rediss or unix ({_EXAMPLE})")
    if password is not None:
        raise RuleError(
            "the URL carries a password; give it by password_env or password_file, "
            "never in the URL (the value is not shown)"
        )
    if parts.fragment:
        raise RuleError(f"expected a store URL without a fragment ({_EXAMPLE})")
    if scheme == "unix":
        if host or port is not None or not parts.path.startswith("/"):
            raise RuleError("expected unix:///path/to/the.sock: an absolute socket path")
        db = _db_from_query(parts.query)
        return StoreUrl(
            scheme=scheme, host=None, port=None, path=parts.path, db=db, username=username or None
        )
    if not host:
        raise RuleError(f"expected a store URL with a host ({_EXAMPLE})")
    if parts.path not in ("", "/"):
        db_text = parts.path[1:]
        if not db_text.isdigit() or len(db_text) > 2 or int(db_text) > _MAX_DB:
            raise RuleError(f"expected a database number from 0 to {_MAX_DB} after the host")
        db = int(db_text)
        if parts.query:
            raise RuleError("give the database once, in the path")
    else:
        db = _db_from_query(parts.query)
    return StoreUrl(
        scheme=scheme,
        host=host,
        port=port if port is not None else 6379,
        path=None,
        db=db,
        username=username or None,
    )


def _db_from_query(query: str) -> int:
    if not query:
        return 0
    try:
        values = parse_qs(query, strict_parsing=True, max_num_fields=4)
    except ValueError:
        raise RuleError("expected at most the query db=N in the store URL") from None
    if set(values) != {"db"} or len(values["db"]) != 1:
        raise RuleError("expected at most the query db=N in the store URL")
    text = values["db"][0]
    if not text.isdigit() or len(text) > 2 or int(text) > _MAX_DB:
        raise RuleError(f"expected a database number from 0 to {_MAX_DB}")
    return int(text)


def describe_url(url: StoreUrl) -> str:
    """The URL as `check` and the logs show it: no user name, no password."""
    if url.scheme == "unix":
        return f"unix://{url.path}" + (f"?db={url.db}" if url.db else "")
    assert url.host is not None
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{url.scheme}://{host}:{url.port}/{url.db}"


def _key_prefix(text: str) -> None:
    if not _KEY_PREFIX.match(text):
        raise RuleError(
            "expected 1 to 64 letters, digits and the characters _ . : - "
            "(found text that is not that)"
        )


def _url(text: str) -> None:
    parse_store_url(text)


def read_coordination(
    t: Table, *, env_name: Callable[[str], object], path: Callable[[str], object]
) -> CoordinationConfig:
    """The values of a `[coordination]` table that is present in the file.

    `env_name` and `path` are the validator's checks for an environment variable's name and
    a file path, so the secret keys read as every other secret key does.
    """
    t.known(keys={"url", "password_env", "password_file", "key_prefix", "timeout_ms", "replicas"})
    if "url" not in t.data:
        raise t.v.fail(t.key("url"), f"required when [coordination] is present ({_EXAMPLE})")
    if "replicas" not in t.data:
        raise t.v.fail(
            t.key("replicas"),
            "required when [coordination] is present: the most processes that share the "
            "store, from 1 to 1024",
        )
    url = t.get_text("url", "", check=_url)
    password_env = t.get_text("password_env", check=env_name)
    password_file = t.get_text("password_file", check=path)
    if password_env is not None and password_file is not None:
        raise t.v.fail(t.path, "give at most one of password_env or password_file")
    return CoordinationConfig(
        url=url,
        password_env=password_env,
        password_file=password_file,
        key_prefix=t.get_text("key_prefix", check=_key_prefix),
        timeout_ms=t.get_ranged("timeout_ms"),
        replicas=t.get_int("replicas", 1, 1, 1024),
    )
