"""Who is calling over HTTP: the bearer token of each configured caller (REQ-SEC-018/019).

Tokens are read once, when the listener starts, by the same function `check` uses. A request
names its caller only by a token; the comparison takes the same time whichever caller, and
however much of a token, matches. A listener without callers (loopback only, the configuration
refuses anything else) serves every request as the caller `local`.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Final

import attrs

from rypsok.config.secrets import read_caller_tokens
from rypsok.core import telemetry

if TYPE_CHECKING:
    from collections.abc import Mapping

    from rypsok.config.schema import Config

__all__ = ["Callers", "bearer_token"]

_SCHEME: Final = b"bearer"


def bearer_token(header: bytes | None) -> bytes | None:
    """The credentials of an `Authorization: Bearer …` header; the scheme in any case."""
    if header is None:
        return None
    scheme, _, rest = header.strip().partition(b" ")
    if scheme.lower() != _SCHEME:
        return None
    token = rest.strip(b" \t")
    return token or None


@attrs.frozen(kw_only=True)
class Callers:
    """The token table; empty means every request is `local` (a loopback listener)."""

    tokens: tuple[tuple[str, bytes], ...] = ()

    @classmethod
    def from_config(cls, config: Config, env: Mapping[str, str]) -> Callers:
        read = read_caller_tokens(config, env)
        return cls(
            tokens=tuple(
                (caller, secret.reveal().encode("utf-8")) for caller, secret in read.items()
            )
        )

    @property
    def required(self) -> bool:
        return bool(self.tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def identify(self, authorization: bytes | None) -> str | None:
        """The caller a request's Authorization header names, or None (answer 401)."""
        if not self.tokens:
            return telemetry.LOCAL_CALLER
        offered = bearer_token(authorization)
        if offered is None:
            return None
        found: str | None = None
        # Every token is compared, to the end, whatever matched before: the time taken says
        # nothing about which caller, or how much of a token, was right.
        for caller, token in self.tokens:
            if hmac.compare_digest(offered, token):
                found = caller
        return found
