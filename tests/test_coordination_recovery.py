"""[coordination]: coming back to a store whose connections are slow to open.

Opening a connection to the store (TCP, then coredis's handshake) is not a decision's round
trip: `timeout_ms` bounds the round trips, and a store that answers them in time comes back
after a failure however long its connections take to open, without any call waiting on it
longer than `timeout_ms`. The connection is opened by the Store's own task; calls that come
meanwhile decide alone (and are counted so); a failed opening rests and tries again; leaving
the Store ends an opening in flight at once.

The first tests run a fake of coredis's surface on Trio's MockClock (times are exact there);
the last run a real redis-server behind a loopback proxy that holds every new connection for
longer than `timeout_ms` before passing anything on (the real clock, small limits).
"""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio
from coredis.exceptions import ConnectionError as StoreConnectionError
from redis_server import RedisServer, redis_server
from search_fakes import RECORD, capture_logs
from test_coordination import _coordination

from rypsok.core import telemetry
from rypsok.core.coordination.gate import SearchGate
from rypsok.core.coordination.limits import SharedEngineLimiter, SharedToolLimiter
from rypsok.core.coordination.store import RETRY_AFTER_S, Store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

TIMEOUT_MS = 20
TIMEOUT_S = TIMEOUT_MS / 1000


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    yield from redis_server()


class _Line:
    """One connection of the fake store."""

    def __init__(self) -> None:
        self.open = True

    @property
    def usable(self) -> bool:
        return self.open


class _SlowToOpen:
    """coredis's surface as the Store uses it (`evalsha`, `eval`, the pool's `acquire` and
    `disconnect`) over a store whose connections take `open_s` to open and whose round trips
    take a millisecond. As coredis's pool does, a round trip with no connection up opens one
    first. `failing` lists what the next openings do instead of opening: "refused" (coredis's
    ConnectionError at once) or "hangs" (never ends by itself)."""

    def __init__(self, open_s: float, failing: list[str] | None = None) -> None:
        self.connection_pool = self
        self.open_s = open_s
        self.failing = list(failing or [])
        self.line: _Line | None = None
        self.openings: list[float] = []  # when each opening began
        self.cancelled_openings = 0
        self.stall_next = 0.0  # the next round trip takes this long
        self.scripts = 0  # scripts the store ran
        self.entered = False

    async def __aenter__(self) -> _SlowToOpen:
        self.entered = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.entered = False

    async def _lease(self) -> _Line:
        if self.line is not None and self.line.open:
            return self.line
        self.openings.append(trio.current_time())
        try:
            mode = self.failing.pop(0) if self.failing else "opens"
            if mode == "refused":
                raise StoreConnectionError("refused")
            if mode == "hangs":
                await trio.sleep_forever()
            await trio.sleep(self.open_s)
        except trio.Cancelled:
            self.cancelled_openings += 1
            raise
        self.line = _Line()
        return self.line

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[_Line]:
        yield await self._lease()

    def disconnect(self) -> None:
        if self.line is not None:
            self.line.open = False
            self.line = None

    def drop(self) -> None:
        """The store closes the connection (a restart, a peer on the way)."""
        assert self.line is not None
        self.line.open = False

    async def script_load(self, script: str) -> str:
        """The scripts loaded at each opening, over the connection just opened."""
        await self._lease()
        return ""

    async def evalsha(self, sha: str, *, keys: list[str], args: list[str]) -> object:
        await self._lease()
        stall, self.stall_next = self.stall_next, 0.0
        await trio.sleep(stall or 0.001)
        self.scripts += 1
        return [b"1", b"0"]  # a caller's limit: admitted

    async def eval(self, script: str, *, keys: list[str], args: list[str]) -> object:
        return await self.evalsha("", keys=keys, args=args)


class _Calls:
    """A caller's web_search limits through one Store: records whether the store decided
    each call, and how long each call took."""

    def __init__(self, store: Store, fake: _SlowToOpen) -> None:
        self._tool = SharedToolLimiter("web_search", 100_000, store)
        self._fake = fake
        self.longest = 0.0

    async def in_store(self) -> bool:
        before = self._fake.scripts
        start = trio.current_time()
        assert await self._tool.admit("alice", start) is None
        self.longest = max(self.longest, trio.current_time() - start)
        return self._fake.scripts > before


@pytest.mark.parametrize("failure", ["a slow answer", "the connection closed"])
async def test_coord_a_store_slow_to_open_but_quick_to_answer_comes_back_after_a_failure(
    autojump_clock: trio.testing.MockClock, failure: str
) -> None:
    fake = _SlowToOpen(open_s=0.2)  # ten times timeout_ms
    config = _coordination("redis://127.0.0.1:1", timeout_ms=TIMEOUT_MS, replicas=2)
    telemetry.COUNTERS.reset()
    with capture_logs() as logs:
        async with Store(config, None, client=fake) as store:
            calls = _Calls(store, fake)
            # The first connection opens meanwhile; and openings are at most a second apart.
            await trio.sleep(RETRY_AFTER_S + 0.5)
            assert await calls.in_store()
            restored_before = len(logs.named("coordination_restored"))
            if failure == "a slow answer":
                fake.stall_next = 1.0
            else:
                fake.drop()
            assert not await calls.in_store()  # decided alone
            failed_at = trio.current_time()
            alone_before = telemetry.COUNTERS.snapshot()["coordination_unavailable"]
            outcomes: list[tuple[float, bool]] = []
            while trio.current_time() < failed_at + 5:
                outcomes.append((trio.current_time(), await calls.in_store()))
                await trio.sleep(0.05)
            alone_during = telemetry.COUNTERS.snapshot()["coordination_unavailable"] - alone_before
    # No call waited on the store longer than timeout_ms: not for the opening either.
    assert calls.longest <= TIMEOUT_S + 1e-9  # the clock's float sums
    # One opening after the failure: at once for a closed connection, after the rest for a
    # slow answer; every call until it was open decided alone, every call after in the store.
    assert len(fake.openings) == 2
    reopened = fake.openings[1] - failed_at
    assert reopened == pytest.approx(RETRY_AFTER_S if failure == "a slow answer" else 0.0)
    back = [at for at, in_store in outcomes if in_store]
    assert back, "the store never decided again"
    assert back[0] >= fake.openings[1] + fake.open_s
    assert all(in_store for at, in_store in outcomes if at >= back[0])
    assert all(not in_store for at, in_store in outcomes if at < fake.openings[1] + fake.open_s)
    assert alone_during == sum(1 for _, in_store in outcomes if not in_store) > 0
    # Either failure is logged (a closed connection too), and coordination_restored follows
    # at the first answer.
    restored_after = len(logs.named("coordination_restored")) - restored_before
    assert restored_after == 1
    assert logs.named("coordination_unavailable")[-1]["reason"] == (
        "timeout" if failure == "a slow answer" else "closed"
    )


@pytest.mark.parametrize(
    ("mode", "reason", "period"), [("refused", "unreachable", 0.0), ("hangs", "timeout", 2.0)]
)
async def test_coord_a_failed_opening_rests_and_tries_again(
    autojump_clock: trio.testing.MockClock, mode: str, reason: str, period: float
) -> None:
    """An opening refused rests a second; one that hangs is ended at twice the opening's
    bound (`open_s`, one second at this timeout_ms), then rests a second."""
    fake = _SlowToOpen(open_s=0.2, failing=[mode, mode])
    config = _coordination("redis://127.0.0.1:1", timeout_ms=TIMEOUT_MS, replicas=2)
    with capture_logs() as logs:
        started = trio.current_time()
        async with Store(config, None, client=fake) as store:
            assert store.open_s == 1.0
            calls = _Calls(store, fake)
            outcomes: list[tuple[float, bool]] = []
            while trio.current_time() < started + 10:
                outcomes.append((trio.current_time(), await calls.in_store()))
                await trio.sleep(0.1)
    step = period + RETRY_AFTER_S
    assert [at - started for at in fake.openings] == pytest.approx([0.0, step, 2 * step])
    assert fake.cancelled_openings == (2 if mode == "hangs" else 0)
    open_at = fake.openings[2] + fake.open_s
    assert all(in_store == (at >= open_at) for at, in_store in outcomes)
    assert calls.longest <= TIMEOUT_S + 1e-9  # the clock's float sums
    (warning,) = logs.named("coordination_unavailable")  # at most once a minute
    assert warning["reason"] == reason
    assert len(logs.named("coordination_restored")) == 1


async def test_coord_leaving_the_store_ends_an_opening_in_flight(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = _SlowToOpen(open_s=0.2)
    config = _coordination("redis://127.0.0.1:1", timeout_ms=TIMEOUT_MS)
    with capture_logs() as logs:
        async with Store(config, None, client=fake) as store:
            calls = _Calls(store, fake)
            await trio.sleep(0.5)
            assert await calls.in_store()
            fake.stall_next = 1.0
            fake.failing = ["hangs"]
            assert not await calls.in_store()
            await trio.sleep(RETRY_AFTER_S + 0.1)  # the opening after the rest is in flight
            assert len(fake.openings) == 2
            leaving = trio.current_time()
        left = trio.current_time()
    assert left == leaving  # not at the opening's bound
    assert fake.cancelled_openings == 1
    # Leaving is not a failure: the only warnings are the start's (the first connection
    # slower than timeout_ms) and the slow answer's, each a loss of its own after an answer.
    assert [w["reason"] for w in logs.named("coordination_unavailable")] == ["timeout", "timeout"]
    assert len(logs.named("coordination_restored")) == 1


async def test_coord_a_start_cancelled_while_the_first_connection_opens_leaves_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A signal during start-up's wait for the first connection: the opening ends, the
    client is left, and nothing of the Store outlives the cancelled start."""
    fake = _SlowToOpen(open_s=0.2, failing=["hangs"])
    config = _coordination("redis://127.0.0.1:1", timeout_ms=1000)
    with capture_logs(), trio.move_on_after(0.1) as start:
        async with Store(config, None, client=fake):
            pytest.fail("start-up was cancelled before the body")
    assert start.cancelled_caught
    assert trio.current_time() == pytest.approx(0.1)
    assert fake.cancelled_openings == 1
    assert not fake.entered
    await trio.sleep(10)  # no task of the Store's opens anything later
    assert len(fake.openings) == 1


# --- a real redis-server behind a proxy slow to open connections ------------------------------


class _SlowOpeningProxy:
    """A loopback TCP proxy in front of a redis-server that holds every new connection for
    `delay` before passing anything on (a loaded host's slow handshake, as the client sees
    it); `drop()` closes every connection it carries."""

    def __init__(self, target_port: int, delay: float) -> None:
        self._target = target_port
        self._delay = delay
        self._carried: set[trio.CancelScope] = set()

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(self._carry, listeners)

    async def _carry(self, downstream: trio.SocketStream) -> None:
        with trio.CancelScope() as scope:
            self._carried.add(scope)
            try:
                async with downstream:
                    await trio.sleep(self._delay)
                    upstream = await trio.open_tcp_stream("127.0.0.1", self._target)
                    async with upstream, trio.open_nursery() as nursery:
                        nursery.start_soon(self._pipe, downstream, upstream, nursery.cancel_scope)
                        nursery.start_soon(self._pipe, upstream, downstream, nursery.cancel_scope)
            finally:
                self._carried.discard(scope)

    @staticmethod
    async def _pipe(
        source: trio.SocketStream, sink: trio.SocketStream, pair: trio.CancelScope
    ) -> None:
        try:
            async for chunk in source:
                await sink.send_all(chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        pair.cancel()  # one side ended: close both

    def drop(self) -> None:
        for scope in self._carried:
            scope.cancel()


@asynccontextmanager
async def _peek(server: RedisServer) -> AsyncIterator[Any]:
    """A client of the test's own, straight to the store, to read what it holds."""
    import coredis

    async with coredis.Redis(host="127.0.0.1", port=server.port) as client:
        yield client


@pytest.mark.parametrize("how", ["the proxy drops the connections", "the store restarts"])
async def test_coord_searches_come_back_to_a_real_store_slow_to_open_connections(
    redis: RedisServer, how: str
) -> None:
    """timeout_ms 20 and every new connection held 100 ms: searches still come back to the
    shared store, within seconds, after the connection is lost."""
    async with trio.open_nursery() as nursery:
        proxy = _SlowOpeningProxy(redis.port, delay=0.1)
        port = await nursery.start(proxy.serve)
        config = _coordination(f"redis://127.0.0.1:{port}/0", timeout_ms=TIMEOUT_MS, replicas=2)
        with capture_logs() as logs:
            async with Store(config, None) as store:
                tool = SharedToolLimiter("web_search", 100_000, store)
                engine = SharedEngineLimiter("alpha", RECORD, store, per_engine_in_flight=4)

                async def back_in_store() -> float:
                    """Searches' admissions every 20 ms until one is counted in the store;
                    how long that took (real seconds)."""
                    started = time.monotonic()
                    with trio.fail_after(5):
                        while True:
                            async with _peek(redis) as peek:
                                before = await peek.zcard(tool.key("alice"))
                            (turn,) = await SearchGate(tool, "alice").admit([engine], float("inf"))
                            assert await turn.take()
                            async with _peek(redis) as peek:
                                if await peek.zcard(tool.key("alice")) > before:
                                    return time.monotonic() - started
                            await trio.sleep(0.02)

                await back_in_store()  # the first connection, opened in the background
                if how == "the store restarts":
                    redis.stop()
                    redis.start()
                else:
                    proxy.drop()
                await back_in_store()
                async with _peek(redis) as peek:
                    assert await peek.exists([engine.key]) == 1  # the engine's turns too
        nursery.cancel_scope.cancel()
    assert logs.named("coordination_restored")
    assert "Traceback" not in logs.text


async def test_coord_leaving_does_not_wait_for_a_real_connection_being_opened(
    redis: RedisServer,
) -> None:
    """A connection held far longer than the opening's bound: leaving the Store during its
    handshake takes no part of that bound."""
    async with trio.open_nursery() as nursery:
        proxy = _SlowOpeningProxy(redis.port, delay=30)
        port = await nursery.start(proxy.serve)
        config = _coordination(f"redis://127.0.0.1:{port}/0", timeout_ms=TIMEOUT_MS)
        with capture_logs():
            async with Store(config, None) as store:
                await trio.sleep(0.1)  # the handshake is waiting for the proxy
                leaving = time.monotonic()
            left = time.monotonic()
        assert store.open_s == 1.0
        assert left - leaving < 0.5  # the handshake's own bound is a second
        nursery.cancel_scope.cancel()
