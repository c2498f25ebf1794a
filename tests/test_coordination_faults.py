"""[coordination]: replicas hold the provider's shared rate through the store's faults.

Several replicas (each a whole `Rypsok` facade) share one in-memory provider whose limit is
10 requests a second with a burst of 10, through a real redis-server; each replica runs more
searches than the provider allows. What is asserted is what the provider sees and what the
operator is told:

- a store that answers every round trip 200 ms late (a loopback proxy), with timeout_ms 250,
  still passes at least 80 % of the provider's rate, to calls that succeed;
- connections killed once a second (`CLIENT KILL TYPE normal`) keep the provider within
  1.2 times its rate, with a log line for each loss;
- no change of the store's state (stopped and started again, paused, scripts refused by an
  ACL, read-only) grants an extra burst: the seconds after it stay within the bucket
  (burst + rate × seconds) plus 10 %;
- every change of the store's state is one log line, and `rypsok check` says that it did
  not contact the store.

Real clock for everything the store decides (it decides on its own clock), with small
windows; the share following the shared schedule is shown on MockClock.
"""

from __future__ import annotations

import collections
import math
import random
import subprocess
import sys
import time
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
from coredis.tokens import PureToken
from redis_server import LateRepliesProxy, RedisServer, free_port, redis_server
from search_fakes import RECORD, FakeEngine, capture_logs, engine_config, make_config, results
from test_coordination import _coordination

from rypsok.config.schema import CacheConfig, Config, LimitsConfig
from rypsok.core import telemetry
from rypsok.core.coordination.limits import SharedEngineLimiter, SharedToolLimiter
from rypsok.core.coordination.store import RETRY_AFTER_S, Store
from rypsok.core.model import SearchRequest, SearchResponse, ToolError
from rypsok.core.pacing import EngineLimiter
from rypsok.core.services import Rypsok

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
    from pathlib import Path

    from rypsok.core.engines.base import AdmissionRecord, EngineAnswer, EngineQuery

RATE = 10.0  # the provider's requests a second
BURST = 10
PACE = attrs.evolve(RECORD, rate_per_minute=int(RATE * 60), burst=BURST, concurrency=8)
REPLICAS = 3
WORKERS = 4  # concurrent searches per replica: far more than the provider allows


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    yield from redis_server()


@pytest.fixture
def locked_redis() -> Iterator[RedisServer]:
    yield from redis_server("correct-horse-battery-staple-0123")


@asynccontextmanager
async def _control(server: RedisServer) -> AsyncIterator[Any]:
    """The test's own client, straight to the store, to inject its faults."""
    import coredis

    async with coredis.Redis(host="127.0.0.1", port=server.port) as client:
        yield client


class _Provider:
    """The provider behind every replica's engine: when each request arrived (monotonic)."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []

    def between(self, start: float, end: float) -> int:
        return sum(1 for at in self.arrivals if start <= at < end)


class _ProviderEngine(FakeEngine):
    def __init__(self, provider: _Provider, record: AdmissionRecord = PACE) -> None:
        super().__init__("alpha", results("a", 1), record=record)
        self._provider = provider

    async def search(self, query: EngineQuery) -> EngineAnswer:
        self._provider.arrivals.append(time.monotonic())
        return await super().search(query)


@attrs.define
class _Calls:
    """What the replicas' calls ended with: answered with results, or the error's reason."""

    answered: list[float] = attrs.Factory(list)  # when each answered call ended
    errors: collections.Counter[str] = attrs.Factory(collections.Counter)


def _config(url: str, *, timeout_ms: int, deadline_ms: int, replicas: int = REPLICAS) -> Config:
    return attrs.evolve(
        make_config(engine_config("alpha"), search={"deadline_ms": deadline_ms}),
        limits=LimitsConfig(web_search_per_minute=6000),
        cache=CacheConfig(enabled=False),
        coordination=_coordination(url, replicas=replicas, timeout_ms=timeout_ms),
    )


async def _searching(rypsok: Rypsok, caller: str, until: float, calls: _Calls) -> None:
    """Searches back to back until `until`; a call the provider's rate refused waits a
    little before the next, as a client would (a random 30 to 70 ms, so that the callers
    do not all come back in the same instant)."""
    pause = random.Random(caller)
    n = 0
    while time.monotonic() < until:
        n += 1
        try:
            response = await rypsok.search_as(caller, SearchRequest(query=f"rust {caller} {n}"))
        except ToolError as exc:
            calls.errors[f"{exc.kind}/{exc.detail.reason}"] += 1
            await trio.sleep(pause.uniform(0.03, 0.07))
            continue
        assert isinstance(response, SearchResponse)
        if response.results:
            calls.answered.append(time.monotonic())
        else:
            calls.errors["no results"] += 1
            await trio.sleep(pause.uniform(0.03, 0.07))


async def _paced_searches(
    rypsok: Rypsok, caller: str, per_second: float, until: float, calls: _Calls
) -> None:
    """A client that starts `per_second` searches a second until `until`, each in a task of
    its own, whether the earlier ones have ended or not (as the callers of a service do)."""

    async def one(n: int) -> None:
        try:
            response = await rypsok.search_as(caller, SearchRequest(query=f"rust {caller} {n}"))
        except ToolError as exc:
            calls.errors[f"{exc.kind}/{exc.detail.reason}"] += 1
            return
        if response.results:
            calls.answered.append(time.monotonic())
        else:
            calls.errors["no results"] += 1

    async with trio.open_nursery() as nursery:
        n = 0
        start = time.monotonic()
        while (at := start + n / per_second) < until:
            await _sleep_until(at)
            nursery.start_soon(one, n)
            n += 1


async def _replicas_under_load(
    config: Config,
    provider: _Provider,
    seconds: float,
    faults: Callable[[float], Awaitable[None]],
    *,
    replicas: int = REPLICAS,
    workers: int = WORKERS,
) -> tuple[float, _Calls]:
    """`replicas` facades searching for `seconds`, `faults(start)` run beside them; returns
    when they started and what their calls ended with."""
    calls = _Calls()
    async with AsyncExitStack() as stack:
        facades = [
            await stack.enter_async_context(
                Rypsok(config, env={}, engines=[_ProviderEngine(provider)])
            )
            for _ in range(replicas)
        ]
        start = time.monotonic()
        async with trio.open_nursery() as nursery:
            for r, rypsok in enumerate(facades):
                for w in range(workers):
                    nursery.start_soon(_searching, rypsok, f"c{r}-{w}", start + seconds, calls)
            await faults(start)
    # Only the errors of a call the provider's rate or the deadline ended; never another.
    assert set(calls.errors) <= {"unavailable/no_engine", "unavailable/deadline"}, calls.errors
    return start, calls


async def _sleep_until(at: float) -> None:
    await trio.sleep(max(0.0, at - time.monotonic()))


# --- a slow store ------------------------------------------------------------------------------


async def test_req_cmp_002_a_store_answering_200_ms_late_still_passes_the_providers_rate(
    redis: RedisServer,
) -> None:
    """Three replicas, each asked for 5 searches a second (the provider allows 200 a minute,
    3.3 a second, burst 5), every reply of the store 200 ms late, timeout_ms 250: from the
    third second on the provider gets at least 80 % of its rate, and the calls its requests
    answer succeed. (A turn judged without the round trip lands after the call's deadline,
    and one that cannot be given back pins the schedule: the provider starves.)"""
    record = attrs.evolve(RECORD, rate_per_minute=200, burst=5, concurrency=8)
    rate = 200 / 60
    provider = _Provider()
    calls = _Calls()
    async with trio.open_nursery() as nursery:
        port = await nursery.start(LateRepliesProxy(redis.port, 0.2).serve)
        config = _config(f"redis://127.0.0.1:{port}/0", timeout_ms=250, deadline_ms=1500)
        with capture_logs():
            async with AsyncExitStack() as stack:
                facades = [
                    await stack.enter_async_context(
                        Rypsok(config, env={}, engines=[_ProviderEngine(provider, record)])
                    )
                    for _ in range(REPLICAS)
                ]
                start = time.monotonic()
                async with trio.open_nursery() as clients:
                    for r, rypsok in enumerate(facades):
                        clients.start_soon(
                            _paced_searches, rypsok, f"c{r}", 5.0, start + 8.0, calls
                        )
        nursery.cancel_scope.cancel()
    assert set(calls.errors) <= {"unavailable/no_engine", "unavailable/deadline"}, calls.errors
    window = (start + 3.0, start + 8.0)
    seen = provider.between(*window)
    answered = sum(1 for at in calls.answered if window[0] <= at < window[1])
    assert seen >= 0.8 * rate * 5.0, (seen, calls.errors)
    assert answered >= 0.8 * rate * 5.0, (answered, calls.errors)


# --- connections killed -----------------------------------------------------------------------


async def test_req_cmp_002_connections_killed_once_a_second_keep_the_provider_within_its_rate(
    redis: RedisServer,
) -> None:
    """Three replicas; every connection to the store killed once a second for four seconds:
    the provider sees at most 1.2 times its rate meanwhile, and each loss is logged."""
    provider = _Provider()
    config = _config(redis.url, timeout_ms=250, deadline_ms=1000)
    killed = 0

    async def kills(start: float) -> None:
        nonlocal killed
        async with _control(redis) as control:
            for k in range(4):
                await _sleep_until(start + 1.5 + k)
                killed += await control.client_kill(type_=PureToken.NORMAL, skipme=True)

    with capture_logs() as logs:
        start, _ = await _replicas_under_load(config, provider, 5.5, kills)
    seen = provider.between(start + 1.5, start + 5.5)
    assert seen <= 1.2 * RATE * 4.0, seen
    assert killed >= 4  # every kill found connections of the replicas
    lost = logs.named("coordination_unavailable")
    assert len(lost) >= 4  # the losses are logged (each, as the test with one store shows)
    assert {line["reason"] for line in lost} <= {"closed", "unreachable", "timeout"}
    assert len(logs.named("coordination_restored")) >= len(lost) - REPLICAS


# --- every change of the store's state --------------------------------------------------------


FAULT_S = 2.0  # how long each change of the store's state lasts


async def _stop_and_start(redis: RedisServer, control: Any) -> None:
    redis.stop()
    await trio.sleep(FAULT_S)
    redis.start()


async def _pause(redis: RedisServer, control: Any) -> None:
    await control.client_pause(int(FAULT_S * 1000), PureToken.ALL)
    await trio.sleep(FAULT_S)


async def _refuse_scripts(redis: RedisServer, control: Any) -> None:
    await control.acl_setuser("default", "-@scripting")
    await trio.sleep(FAULT_S)
    await control.acl_setuser("default", "+@all")


async def _read_only(redis: RedisServer, control: Any) -> None:
    await control.replicaof("127.0.0.1", free_port())  # a primary that is not there
    await trio.sleep(FAULT_S)
    await control.replicaof(PureToken.NO, PureToken.ONE)


FAULTS = {
    "stopped and started": _stop_and_start,
    "paused": _pause,
    "scripts refused (ACL)": _refuse_scripts,
    "read-only": _read_only,
}


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_req_cmp_002_a_change_of_the_stores_state_grants_no_extra_burst(
    redis: RedisServer, fault: str
) -> None:
    """Three replicas at more than the provider's rate; two seconds of the fault: the three
    seconds from its start carry at most the bucket (burst + 3 s of rate) plus 10 %, while
    the replicas decide alone (each with its share) and when they come back."""
    provider = _Provider()
    config = _config(redis.url, timeout_ms=100, deadline_ms=1000)
    at: list[float] = []

    async def inject(start: float) -> None:
        async with _control(redis) as control:
            await _sleep_until(start + 1.5)  # the burst spent, the bucket empty
            at.append(time.monotonic())
            await FAULTS[fault](redis, control)

    with capture_logs() as logs:
        await _replicas_under_load(config, provider, 5.0, inject)
    seen = provider.between(at[0], at[0] + 3.0)
    assert seen <= 1.1 * (BURST + RATE * 3.0), seen
    assert logs.named("coordination_unavailable")  # the replicas did decide alone


async def test_coord_a_process_alone_starts_from_the_shared_schedule_not_a_full_bucket(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The share (a third of burst 9 and of the rate, here) follows the schedule the store
    last showed: after an answer that showed it 2 s ahead, a call alone waits until the
    share's own tolerance is reached, and takes no burst."""
    record = attrs.evolve(PACE, rate_per_minute=540, burst=9)  # 9/s shared; 3/s each
    share = EngineLimiter(record, per_engine_in_flight=2, share=3)
    share.follow(trio.current_time() + 2.0)
    assert share.ahead(trio.current_time()) == pytest.approx(2.0)
    start = trio.current_time()
    admitted = []
    for _ in range(3):
        assert await share.admit(math.inf)
        admitted.append(trio.current_time() - start)
    # The share's tolerance is (3 − 1) × 1/3 s: the first turn 2 − 2/3 s on, then one a
    # third of a second apart, no two at once.
    assert admitted == pytest.approx([2 - 2 / 3, 2 - 1 / 3, 2.0])
    # A share that never saw the store (or saw it with a full bucket) keeps its burst.
    fresh = EngineLimiter(record, per_engine_in_flight=2, share=3)
    fresh.follow(trio.current_time() - 5.0)
    now = trio.current_time()
    assert [await fresh.admit(now) for _ in range(4)] == [True, True, True, False]


# --- a turn given back -------------------------------------------------------------------------


async def test_req_cmp_002_a_turn_given_back_behind_a_later_one_goes_to_the_next_call(
    redis: RedisServer,
) -> None:
    """Burst 2, a turn every 0.5 s: the third call's turn (0.5 s on) is given back after a
    fourth took the turn behind it (1 s on); the next call gets the returned turn, once."""
    record = attrs.evolve(RECORD, rate_per_minute=120, burst=2, concurrency=4)
    async with Store(_coordination(redis.url), None) as store:
        limiter = SharedEngineLimiter("alpha", record, store, per_engine_in_flight=4)
        start = trio.current_time()
        assert await limiter.admit(math.inf)
        assert await limiter.admit(math.inf)  # the burst
        async with trio.open_nursery() as nursery:
            cancelled = trio.CancelScope()

            async def third() -> None:
                with cancelled:
                    await limiter.admit(math.inf)  # waits for the turn 0.5 s on

            nursery.start_soon(third)
            await trio.sleep(0.05)
            fourth = trio.current_time()
            # The fourth's turn is 1 s on: it may wait 1.2 s.
            nursery.start_soon(limiter.admit, fourth + 1.2)
            await trio.sleep(0.05)
            cancelled.cancel()  # the third gives its turn back, with the fourth behind it
            await trio.sleep(0.05)
            # The returned turn, 0.5 s on: a call that may wait until 0.8 s gets it...
            assert await limiter.admit(start + 0.8)
            assert trio.current_time() - start >= 0.5 - 0.01
            # ...once: the next regular turn is 1.5 s on.
            assert not await limiter.admit(start + 1.3)


# --- what an operator is told -------------------------------------------------------------------


async def test_req_obs_005_every_change_of_the_stores_state_is_one_log_line(
    redis: RedisServer,
) -> None:
    """An ACL refusal, then a read-only store within the same minute, then back; then two
    connections killed, each after an answer: each loss, each new reason and each return is
    one line, in order."""

    async with Store(_coordination(redis.url), None) as store, _control(redis) as control:
        tool = SharedToolLimiter("web_search", 100_000, store)

        async def in_store() -> bool:
            before = telemetry.COUNTERS.snapshot()["coordination_unavailable"]
            assert await tool.admit("alice", trio.current_time()) is None
            return telemetry.COUNTERS.snapshot()["coordination_unavailable"] == before

        async def until(in_store_now: bool) -> None:
            with trio.fail_after(10):
                while True:
                    if await in_store() == in_store_now:
                        return
                    await trio.sleep(0.05)

        with capture_logs() as logs:
            await until(True)
            await control.acl_setuser("default", "-@scripting")
            await until(False)
            await control.acl_setuser("default", "+@all")
            await control.replicaof("127.0.0.1", free_port())
            await trio.sleep(RETRY_AFTER_S + 0.1)
            await in_store()  # refused READONLY: another reason
            await control.replicaof(PureToken.NO, PureToken.ONE)
            await until(True)
            for _ in range(2):
                assert await control.client_kill(type_=PureToken.NORMAL, skipme=True) >= 1
                await until(False)
                await until(True)
    lines = [
        (line["event"], line.get("reason"))
        for line in logs.events()
        if line["event"].startswith("coordination_")
    ]
    assert lines == [
        ("coordination_unavailable", "auth"),
        ("coordination_unavailable", "error_reply"),
        ("coordination_restored", None),
        ("coordination_unavailable", "closed"),
        ("coordination_restored", None),
        ("coordination_unavailable", "closed"),
        ("coordination_restored", None),
    ]


def test_req_cfg_005_check_says_it_did_not_contact_the_store(
    locked_redis: RedisServer, tmp_path: Path
) -> None:
    """A wrong password: `rypsok check` (the console script) does not find it out, and says
    so: its report names the store as not contacted, and the store saw no connection."""
    before = _connections(locked_redis)
    path = tmp_path / "c.toml"
    path.write_text(
        "config_version = 1\n[coordination]\n"
        f'url = "{locked_redis.url}"\nreplicas = 2\npassword_env = "STORE_PW"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "rypsok", "check", "--config", str(path)],
        env={"STORE_PW": "a-wrong-password-a-wrong-password", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert _connections(locked_redis) == before + 1  # the count's own connection only
    assert done.returncode == 0, done.stderr
    report = done.stdout + done.stderr
    assert "coordination: store not contacted by check" in report
    assert "a-wrong-password" not in report


def _connections(server: RedisServer) -> int:
    """The connections the store has accepted so far (INFO stats), this one included."""
    import socket

    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(f"AUTH {server.password}\r\nINFO stats\r\n".encode())
        data = b""
        while b"total_connections_received:" not in data or not data.endswith(b"\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    line = next(
        x for x in data.decode().splitlines() if x.startswith("total_connections_received:")
    )
    return int(line.split(":", 1)[1])
