"""The shared store of a deployment: one Redis or Valkey server, reached through coredis.

Every decision is one server-side script, so that two processes never interleave inside
one; the scripts read the server's own clock (`TIME`), the one clock all processes share.

The store is a help, never a dependency: every round trip is bounded by
`[coordination] timeout_ms`, and any failure — no connection, a slow answer, an error reply,
an answer of the wrong shape, a connection found closed — makes the caller decide alone
with its in-process limiter (see `limits`) and counts the decision. After a failure the
store is left alone for a second, then asked again; the first answer it gives brings every
limiter back to it.

Every change of the store's state is one log line, whatever came before it: the store lost
(`coordination_unavailable`, with the reason's word), another reason while it is still lost
(the same event with the new word), and its first answer after (`coordination_restored`).
Failures with the reason already logged write nothing more. A store that flaps writes two
lines a flap, at most about one flap a second: a connection is opened at most once a
second, and each loss needs an answer before it.

Each answer's round trip is measured (`round_trip_s`): a call asks for a turn no later than
its deadline less the round trip the asking costs, since the turn starts only once the
answer is back. Each connection opened counts (`epoch`): a limiter whose last answer came
over an earlier one cannot tell whether the store kept its schedule (a restart empties it).

A call never opens a connection. Opening one (TCP, then coredis's handshake: HELLO with the
password, SELECT) is not a decision's round trip, and on a loaded host it can take longer
than a small `timeout_ms` every time: a call that had to open one inside its own bound would
fail, rest, and fail again, and the process would never come back to a store that answers
its round trips in time. So the connection is opened by the Store's own task (`_keep`), in
the Store's lifetime, under a bound of its own (`open_s`: the longer of one second and
timeout_ms, for the TCP connection and as much again for the handshake); calls that come
meanwhile decide alone, as during the rest. The task opens one when the Store is entered,
when the rest after a failure is over, and when a call finds the connection closed.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from typing import TYPE_CHECKING, Any, Final

import trio

from rypsok.config.coordination import describe_url, parse_store_url
from rypsok.core import telemetry
from rypsok.core.coordination.scripts import SCRIPTS

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType

    from rypsok.config.schema import CoordinationConfig
    from rypsok.core.telemetry import Secret

__all__ = ["OPEN_FLOOR_S", "RETRY_AFTER_S", "Store", "StoreUnavailable"]

RETRY_AFTER_S: Final = 1.0  # how long a failed store is left alone
# The least time a connection may take to open (the TCP connection; the handshake has as
# much again): a loopback store opens one in about a millisecond, a loaded host in tens.
OPEN_FLOOR_S: Final = 1.0


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
        # How long opening a connection may take: the TCP connection, then as long again
        # for the handshake's replies (`_open`).
        self.open_s: Final = max(OPEN_FLOOR_S, self._timeout_s)
        self._down_until: float | None = None
        self._lost_reason: str | None = None  # the reason last logged while the store is lost
        # The round trip of recent answers: the longest, decaying toward newer ones.
        self.round_trip_s = 0.0
        self.epoch = 0  # connections opened so far
        self._entered = False
        self._closing = False
        # The connection `_open` made (None: none open): read for `usable` only, coredis's
        # own word on whether it is still up; calls lease it from the pool as before.
        self._connection: Any | None = None
        self._lost = trio.Event()  # set when `_connection` is given up: `_keep` opens another
        self._opened_at = -math.inf  # when the last opening began
        self._first_open = trio.Event()
        self._nursery_manager: Any | None = None
        self._nursery: trio.Nursery | None = None
        if client is None:
            import coredis  # only a process with [coordination] pays for the import
            from coredis.retry import NoRetryPolicy

            options: dict[str, Any] = {
                "db": url.db,
                "username": url.username,
                "password": password.reveal() if password is not None else None,
                # The TCP connection and each reply of the handshake (`_open`). A call's
                # round trip is ended earlier, by our own scope of timeout_ms.
                "connect_timeout": self.open_s,
                "stream_timeout": self.open_s,
                "decode_responses": False,
                "verify_version": False,
                # coredis would retry a command whose connection failed on a new one,
                # opened inside the call: a call never opens a connection (above).
                "retry_policy": NoRetryPolicy(),
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
        # The opening task lives in a nursery of the Store's own, entered here after the
        # client and left in __aexit__ before it: the task cannot outlive the pool it
        # leases from, and leaving the Store cancels it (no system task to track).
        manager = trio.open_nursery()
        self._nursery = await manager.__aenter__()
        self._nursery_manager = manager
        self._nursery.start_soon(self._keep)
        # Start-up waits for the first connection as long as one round trip may take,
        # never longer: a store that opens as fast as it answers is in use from the first
        # call; one that does not decides alone until it is open, as after a failure.
        try:
            with trio.move_on_after(self._timeout_s):
                await self._first_open.wait()
        except BaseException as exc:
            # Start-up cancelled meanwhile (a signal): `async with` will not leave what was
            # entered, so leave it here, the nursery first.
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        if self._connection is None and self._lost_reason is None:
            self._warn("timeout", StoreUnavailable("timeout"))
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
        self._closing = True
        manager, self._nursery_manager = self._nursery_manager, None
        try:
            if manager is not None and self._nursery is not None:
                # An opening in flight ends now, not at its bound: shutdown never waits.
                self._nursery.cancel_scope.cancel()
                await manager.__aexit__(None, None, None)
        finally:
            try:
                await self._client.__aexit__(exc_type, exc, tb)
            except Exception as close_exc:
                telemetry.log_exception("coordination_close_failed", close_exc, level="warn")

    def key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    def reachable(self) -> bool:
        """Whether the store decides now: a connection open and usable, and no failure's
        wait running (the limiters then decide alone). It asks nothing of the store."""
        if not self._entered or self._connection is None:
            return False
        if self._down_until is not None and trio.current_time() < self._down_until:
            return False
        return bool(self._connection.usable)

    async def run(self, script: str, keys: Sequence[str], args: Sequence[str]) -> Any:
        """Run one script; raises StoreUnavailable (after logging and counting it)."""
        now = trio.current_time()
        if not self._entered or (self._down_until is not None and now < self._down_until):
            raise StoreUnavailable("resting")
        connection = self._connection
        if connection is None:
            raise StoreUnavailable("opening")  # `_keep` is opening one: decide alone
        if not connection.usable:
            # Closed since (the store restarted, a client killed it, a peer on the way
            # dropped it): opened again in the background at once, with no rest; this call
            # decides alone meanwhile.
            self._give_up(connection)
            exc = StoreUnavailable("closed")
            self._warn("closed", exc)
            raise exc
        scope = trio.move_on_after(self._timeout_s)
        sent = trio.current_time()
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
            # round trip has a fresh one, opened in the background once the rest is over.
            # Round trips still waiting on them fail now and decide alone, as they would
            # have at their own timeout had the socket been dead.
            self._give_up(connection)
            self._failed(exc.reason, exc)
            raise
        except Exception as exc:
            if connection is not self._connection and not scope.cancel_called:
                # The connection was given up meanwhile (another round trip's timeout): this
                # one ends with it, for the reason already logged.
                raise StoreUnavailable(self._lost_reason or "closed") from None
            reason = "timeout" if scope.cancel_called else _reason(exc)
            if scope.cancel_called or not connection.usable:
                self._give_up(connection)
            self._failed(reason, exc)
            raise StoreUnavailable(reason) from None
        elapsed = trio.current_time() - sent
        self.round_trip_s = max(elapsed, 0.75 * self.round_trip_s + 0.25 * elapsed)
        if self._lost_reason is not None:
            self._lost_reason = None
            telemetry.info("coordination_restored", store=self.description)
        self._down_until = None
        return result

    def soon(self, script: str, keys: Sequence[str], args: Sequence[str]) -> None:
        """Run one script in the Store's own task, for a caller that does not wait for it
        (a turn given back); its failure is logged and counted as any round trip's."""
        if not self._entered or self._closing or self._nursery is None:
            return

        async def run() -> None:
            # When it fails, what it would have changed stays as it was (a turn stays
            # taken: one unused turn, never one too many).
            with contextlib.suppress(StoreUnavailable):
                await self.run(script, keys, args)

        self._nursery.start_soon(run)

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
        """Close the pool's connections (coredis's `ConnectionPool.disconnect`)."""
        self._client.connection_pool.disconnect()

    def _give_up(self, connection: Any) -> None:
        """Close the pool's connections; `_keep` opens a fresh one when its time comes.
        Nothing when `connection` was given up already and another opened since (a round
        trip on the old one ending late): the fresh one stays."""
        if connection is not self._connection:
            return
        self._disconnect_pool()
        self._connection = None
        self._lost.set()

    async def _keep(self) -> None:
        """The Store's own task: opens a connection whenever there is none, never sooner
        than the rest after a failure allows, nor more than once a second."""
        while True:
            if self._connection is not None:
                self._lost = trio.Event()
                await self._lost.wait()
                continue
            not_before = self._opened_at + RETRY_AFTER_S
            if self._down_until is not None:
                not_before = max(not_before, self._down_until)
            await trio.sleep_until(not_before)
            await self._open()

    async def _open(self) -> None:
        """One opening: the pool's own lease (`acquire`) makes a connection and runs the
        handshake, whose reply is the store's first answer; it is then given back to the
        pool, where the calls' round trips lease it. A failure rests as a call's does."""
        self._opened_at = trio.current_time()
        pool = self._client.connection_pool
        pool.disconnect()  # what is left of the last one: the lease makes a fresh one
        # coredis ends the TCP connection itself at open_s (its `connect_timeout`), which
        # also hands the pool's place back; a cut of ours there would keep that place from
        # the pool for good. Ours ends the handshake, which coredis hands back either way.
        scope = trio.move_on_after(2 * self.open_s)
        try:
            try:
                with scope:
                    async with pool.acquire() as connection:
                        usable = bool(connection.usable)
                    if usable:
                        await self._load_scripts()
                if scope.cancelled_caught:
                    raise StoreUnavailable("timeout")
                if not usable:
                    raise StoreUnavailable("unreachable")
            except Exception as exc:
                if self._closing:
                    return  # cancelled by __aexit__: nothing failed
                pool.disconnect()
                if isinstance(exc, StoreUnavailable):
                    reason = exc.reason
                else:
                    reason = "timeout" if scope.cancel_called else _reason(exc)
                self._failed(reason, exc)
                return
        finally:
            self._first_open.set()
        self._connection = connection
        self.epoch += 1

    async def _load_scripts(self) -> None:
        """Every script the limiters run, sent whole once per connection opened (SCRIPT
        LOAD), so that a call's round trip is always one EVALSHA: a script the store did
        not know would cost a call two round trips, the second past a timeout_ms set near
        the store's round trip. A store that lost them since (SCRIPT FLUSH) is still asked
        by EVAL when it answers NOSCRIPT."""
        for script in SCRIPTS:
            await self._client.script_load(script)

    def bad_answer(self) -> StoreUnavailable:
        """An answer of the wrong shape: the store is not the one rypsok expects."""
        exc = StoreUnavailable("bad_answer")
        self._failed("bad_answer", exc)
        return exc

    def _failed(self, reason: str, exc: BaseException) -> None:
        self._down_until = trio.current_time() + RETRY_AFTER_S
        self._warn(reason, exc)

    def _warn(self, reason: str, exc: BaseException) -> None:
        """One line per change: the store lost, or lost for another reason than the one
        logged; nothing for a failure whose reason is logged already."""
        if reason == self._lost_reason:
            return
        self._lost_reason = reason
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
