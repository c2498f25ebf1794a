"""The shared store of a deployment: one Redis or Valkey server, reached through coredis.

Every decision is one server-side script, so that two processes never interleave inside
one; the scripts read the server's own clock (`TIME`), the one clock all processes share.

The store is a help, never a dependency (issue "replicas"): every round trip is bounded by
`[coordination] timeout_ms`, and any failure — no connection, a slow answer, an error reply,
an answer of the wrong shape — makes the caller decide alone with its in-process limiter
(see `limits`), logs `coordination_unavailable` at most once a minute and counts the
decision. After a failure the store is left alone for a second, then asked again; the first
answer it gives brings every limiter back to it.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Final

import trio

from rypsok.config.coordination import describe_url, parse_store_url
from rypsok.core import telemetry

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType

    from rypsok.config.schema import CoordinationConfig
    from rypsok.core.telemetry import Secret

__all__ = ["RETRY_AFTER_S", "WARN_EVERY_S", "Store", "StoreUnavailable"]

RETRY_AFTER_S: Final = 1.0  # how long a failed store is left alone
WARN_EVERY_S: Final = 60.0


class StoreUnavailable(Exception):
    """The store could not decide; the caller decides alone. Carries the reason's word only."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Store:
    """One client of the shared store, entered for the life of the process (`async with`)."""

    def __init__(
        self,
        config: CoordinationConfig,
        password: Secret | None,
        *,
        client: Any | None = None,
    ) -> None:
        url = parse_store_url(config.url)
        self.prefix: Final = config.key_prefix
        self.replicas: Final = config.replicas
        self.description: Final = describe_url(url)
        self._timeout_s = config.timeout_ms / 1000
        self._down_until: float | None = None
        self._was_down = False
        self._last_warned: float | None = None
        self._entered = False
        if client is None:
            import coredis  # only a process with [coordination] pays for the import

            options: dict[str, Any] = {
                "db": url.db,
                "username": url.username,
                "password": password.reveal() if password is not None else None,
                # Our own scope bounds each round trip (and ends it as a timeout); these,
                # a little later, only end what would outlive it.
                "connect_timeout": self._timeout_s + 0.05,
                "stream_timeout": self._timeout_s + 0.05,
                "decode_responses": False,
                "verify_version": False,
            }
            if url.scheme == "unix":
                options["unix_socket_path"] = url.path
            else:
                options["host"] = url.host
                options["port"] = url.port
                options["ssl"] = url.scheme == "rediss"
            client = coredis.Redis(**options)
        from coredis.exceptions import NoScriptError

        self._no_script: type[Exception] = NoScriptError
        self._client = client
        self._shas: dict[str, str] = {}

    async def __aenter__(self) -> Store:
        try:
            await self._client.__aenter__()
            self._entered = True
        except Exception as exc:
            # A store that is down at start does not stop serve: the limiters decide alone
            # until it answers.
            self._failed("unreachable", exc)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._entered:
            return
        self._entered = False
        try:
            await self._client.__aexit__(exc_type, exc, tb)
        except Exception as close_exc:
            telemetry.log_exception("coordination_close_failed", close_exc, level="warn")

    def key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    async def run(self, script: str, keys: Sequence[str], args: Sequence[str]) -> Any:
        """Run one script; raises StoreUnavailable (after logging and counting it)."""
        now = trio.current_time()
        if not self._entered or (self._down_until is not None and now < self._down_until):
            raise StoreUnavailable("resting")
        scope = trio.move_on_after(self._timeout_s)
        try:
            with scope:
                result = await self._evaluate(script, keys, args)
            if scope.cancelled_caught:
                raise StoreUnavailable("timeout")
        except StoreUnavailable as exc:
            # No answer in time: the socket may be dead (a peer gone without a reset, a
            # failover), and a dead one would only time out again after each rest. A late
            # reply would not be mistaken for another's (a cancelled request keeps its place
            # in coredis's queue), but the pool's connections are closed, so that the next
            # round trip opens a fresh one. Round trips still waiting on them fail now and
            # decide alone, as they would have at their own timeout had the socket been dead.
            self._disconnect_pool()
            self._failed(exc.reason, exc)
            raise
        except Exception as exc:
            # coredis turns a connection attempt cut by our scope into its ConnectionError.
            reason = "timeout" if scope.cancel_called else _reason(exc)
            if scope.cancel_called:
                self._disconnect_pool()
            self._failed(reason, exc)
            raise StoreUnavailable(reason) from None
        if self._was_down:
            self._was_down = False
            telemetry.info("coordination_restored", store=self.description)
        self._down_until = None
        return result

    async def _evaluate(self, script: str, keys: Sequence[str], args: Sequence[str]) -> Any:
        # The script by its digest; sent whole once when the store does not know it (it
        # restarted, or this is the first call), which also makes the store keep it. Each
        # round trip goes through coredis's own client, which leases a connection from its
        # pool for the request and gives it back: nothing here holds a connection the pool
        # has handed to someone else.
        sha = self._shas.get(script)
        if sha is None:
            sha = self._shas[script] = hashlib.sha1(
                script.encode(), usedforsecurity=False
            ).hexdigest()
        try:
            return await self._client.evalsha(sha, keys=list(keys), args=list(args))
        except self._no_script:
            return await self._client.eval(script, keys=list(keys), args=list(args))

    def _disconnect_pool(self) -> None:
        """Close the pool's connections (coredis's `ConnectionPool.disconnect`): the next
        round trip opens a fresh one."""
        self._client.connection_pool.disconnect()

    def bad_answer(self) -> StoreUnavailable:
        """An answer of the wrong shape: the store is not the one rypsok expects."""
        exc = StoreUnavailable("bad_answer")
        self._failed("bad_answer", exc)
        return exc

    def _failed(self, reason: str, exc: BaseException) -> None:
        now = trio.current_time()
        self._down_until = now + RETRY_AFTER_S
        self._was_down = True
        if self._last_warned is not None and 0 <= now - self._last_warned < WARN_EVERY_S:
            return
        self._last_warned = now
        # The type and a fixed word only: an error's text could echo a key or the URL.
        telemetry.log_exception(
            "coordination_unavailable", exc, level="warn", reason=reason, store=self.description
        )


def _reason(exc: BaseException) -> str:
    """The fixed word of a failure, by coredis's exception classes: a refused password or a
    missing permission (NOAUTH, WRONGPASS, NOPERM), a store out of reach, or any other
    error reply."""
    from coredis.exceptions import AuthenticationError, AuthorizationError
    from coredis.exceptions import ConnectionError as StoreConnectionError

    if isinstance(exc, AuthenticationError | AuthorizationError):
        return "auth"
    if isinstance(exc, StoreConnectionError | TimeoutError | OSError):
        return "unreachable"
    return "error_reply"
