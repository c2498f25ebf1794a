"""A web_search with [coordination]: the caller's limit and every engine's turn in one script.

Through the real facade (`Rypsok.search_as`) against a real redis-server, and the same cases
without the store, so that what a caller sees is shown to be the same either way: the
order of the checks (a caller over its limit is refused whatever else is wrong with its
call, and a refused parameter still counts), a cached answer that takes no turn but counts
against the caller's limit, an engine refused its turn skipped with the same notice, a
refused call that takes no engine's turn and hands back its circuit's probe. With the
store: one round trip per search, and the fallback of each decision when the store is away
or answers another shape.

Real clock throughout (the store decides on its own clock); the engines are in memory.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
from redis_server import RedisServer, free_port, running_redis
from search_fakes import RECORD, FakeEngine, capture_logs, engine_config, make_config, results
from test_coordination import _coordination, _OddClient, _OddConnection

from rypsok.config.schema import CacheConfig, Config, LimitsConfig
from rypsok.core import telemetry
from rypsok.core.coordination.gate import SearchGate
from rypsok.core.coordination.limits import SharedEngineLimiter, SharedToolLimiter
from rypsok.core.coordination.store import Store
from rypsok.core.model import (
    DetailReason,
    Notice,
    NoticeCode,
    Outcome,
    Reason,
    SearchRequest,
    SearchResponse,
    ToolError,
)
from rypsok.core.services import Rypsok

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from rypsok.core.engines.base import Engine

KINDS = pytest.mark.parametrize("kind", ["in-process", "shared"])
# One turn a minute, no burst: a second request would wait past any search's deadline.
SPARSE = attrs.evolve(RECORD, rate_per_minute=1, burst=1)


@asynccontextmanager
async def _facade(
    kind: str, config: Config, engines: list[Engine]
) -> AsyncIterator[tuple[Rypsok, RedisServer | None]]:
    """The facade alone, or with [coordination] over a fresh redis-server."""
    if kind == "in-process":
        async with Rypsok(config, env={}, engines=engines) as rypsok:
            yield rypsok, None
        return
    with running_redis() as server:
        shared = attrs.evolve(config, coordination=_coordination(server.url))
        async with Rypsok(shared, env={}, engines=engines) as rypsok:
            yield rypsok, server


def _config(*ids: str, per_minute: int = 60, cache: bool = False) -> Config:
    config = make_config(*(engine_config(i, preference=10 * n) for n, i in enumerate(ids, 1)))
    return attrs.evolve(
        config,
        limits=LimitsConfig(web_search_per_minute=per_minute),
        cache=CacheConfig(enabled=cache),
    )


async def _refusal(rypsok: Rypsok, caller: str, **params: Any) -> ToolError:
    params.setdefault("query", "rust")
    with pytest.raises(ToolError) as caught:
        await rypsok.search_as(caller, SearchRequest(**params))
    return caught.value


async def _search(rypsok: Rypsok, caller: str, **params: Any) -> SearchResponse:
    params.setdefault("query", "rust")
    return await rypsok.search_as(caller, SearchRequest(**params))


@asynccontextmanager
async def _peek(server: RedisServer) -> AsyncIterator[Any]:
    """A client of the test's own, to read what the store holds."""
    import coredis

    async with coredis.Redis(host="127.0.0.1", port=server.port, decode_responses=True) as client:
        yield client


async def _scripts_run(server: RedisServer) -> int:
    """How many scripts the store has run (EVALSHA and EVAL), from its own statistics."""
    async with _peek(server) as client:
        stats = await client.info("commandstats")
    return sum(
        int(stats[name]["calls"]) for name in ("cmdstat_evalsha", "cmdstat_eval") if name in stats
    )


# --- the order of the checks, the same with and without the store ----------------------------


@KINDS
@pytest.mark.parametrize(
    ("params", "alone"),
    [
        ({"max_results": 0}, "invalid_request"),
        ({"query": "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"}, "denied"),
        ({"query": "rust " * 4}, "unavailable"),  # too long for the engine: no engine asked
    ],
)
async def test_req_mcp_010_a_caller_over_its_limit_is_refused_whatever_else_is_wrong(
    kind: str, params: dict[str, Any], alone: str
) -> None:
    engine = FakeEngine("alpha", results("a", 1), record=attrs.evolve(RECORD, max_query_chars=12))
    async with _facade(kind, _config("alpha", per_minute=1), [engine]) as (rypsok, _):
        # Alone, the call has its own error, and it counts against the caller's limit...
        assert str((await _refusal(rypsok, "alice", **params)).kind) == alone
        refused = await _refusal(rypsok, "alice")
        # ...and once the limit is reached, the limit's refusal comes first.
        again = await _refusal(rypsok, "alice", **params)
        # Another caller's budget is untouched.
        assert (await _search(rypsok, "bob")).outcome is Outcome.OK
    assert refused.detail.reason is DetailReason.RATE_LIMITED
    assert again.detail.reason is DetailReason.RATE_LIMITED
    assert again.detail.retry_after_ms is not None
    assert again.message == "the web_search rate limit is reached; retry later"
    assert len(engine.queries) == 1  # bob's


@KINDS
async def test_req_cache_001_a_cached_answer_takes_no_turn_but_counts_against_the_limit(
    kind: str,
) -> None:
    engine = FakeEngine("alpha", results("a", 1), record=SPARSE)
    config = _config("alpha", per_minute=3, cache=True)
    async with _facade(kind, config, [engine]) as (rypsok, _):
        await _search(rypsok, "alice")  # the engine's one turn of the minute
        hit = await _search(rypsok, "alice")  # needs no turn
        fresh = await _refusal(rypsok, "alice", query="other")  # needs one: none left
        over = await _refusal(rypsok, "alice")  # the hit and the refusal both counted
    assert hit.outcome is Outcome.OK
    assert [n.engine for n in hit.notices if n.code is NoticeCode.FROM_CACHE] == ["alpha"]
    assert fresh.detail.reason is DetailReason.NO_ENGINE
    assert over.detail.reason is DetailReason.RATE_LIMITED
    assert len(engine.queries) == 1


@KINDS
async def test_req_cmp_002_an_engine_refused_its_turn_is_skipped_with_its_notice(
    kind: str,
) -> None:
    sparse = FakeEngine("alpha", results("a", 1), record=SPARSE)
    free = FakeEngine("beta", results("b", 1))
    async with _facade(kind, _config("alpha", "beta"), [sparse, free]) as (rypsok, _):
        first = await _search(rypsok, "alice")
        second = await _search(rypsok, "alice", query="other")
    assert first.outcome is Outcome.OK
    assert [n for n in first.notices if n.code is NoticeCode.ENGINE_SKIPPED] == []
    assert second.outcome is Outcome.OK
    assert [n for n in second.notices if n.code is NoticeCode.ENGINE_SKIPPED] == [
        Notice(code=NoticeCode.ENGINE_SKIPPED, engine="alpha", reason=Reason.RATE_LIMITED)
    ]
    assert len(sparse.queries) == 1
    assert len(free.queries) == 2


@KINDS
async def test_req_mcp_010_a_refused_call_takes_no_engines_turn(kind: str) -> None:
    # One turn a minute with a burst of two: the refused call finds a turn free.
    record = attrs.evolve(SPARSE, burst=2)
    engine = FakeEngine("alpha", results("a", 1), record=record)
    async with _facade(kind, _config("alpha", per_minute=1), [engine]) as (rypsok, server):
        await _search(rypsok, "alice")
        turns = await _turns(server) if server is not None else None
        await _refusal(rypsok, "alice")
        if server is not None:  # the store's own count; in-process, bob's turn below shows it
            assert await _turns(server) == turns
        # The turn the refused call left is bob's; then none is left for a minute.
        assert (await _search(rypsok, "bob")).outcome is Outcome.OK
        skipped = await _refusal(rypsok, "carol")
    assert skipped.detail.reason is DetailReason.NO_ENGINE
    assert skipped.detail.retry_after_ms is not None
    assert 55_000 <= skipped.detail.retry_after_ms <= 60_000
    assert len(engine.queries) == 2


async def _turns(server: RedisServer) -> str:
    async with _peek(server) as client:
        value: str | None = await client.get("rypsok:engine:alpha:turns")
    assert value is not None
    return value


@KINDS
async def test_req_res_005_a_call_refused_by_its_limit_hands_the_probe_back(kind: str) -> None:
    engine = FakeEngine("alpha", results("a", 1))
    async with _facade(kind, _config("alpha", per_minute=1), [engine]) as (rypsok, _):
        await _search(rypsok, "alice")
        (entry,) = rypsok.registry.entries
        circuit = entry.circuit
        assert circuit is not None
        # Rest the engine as if it had failed long enough ago that its cooldown is over:
        # the next call that asks it is the probe.
        ticket = circuit.admit(trio.current_time())
        assert ticket is not None
        for _ in range(3):
            circuit.failed(ticket, Reason.TIMEOUT, trio.current_time() - 1000)
        assert str(circuit.state()) == "open"
        await _refusal(rypsok, "alice")  # over its limit: must not keep the probe
        probed = await _search(rypsok, "bob")
    assert probed.outcome is Outcome.OK
    assert str(circuit.state()) == "closed"
    assert len(engine.queries) == 2


# --- with the store: one round trip, and the fallback of each decision --------------------------


async def test_coord_a_search_asks_the_store_once_for_its_caller_and_every_engine() -> None:
    engines = [FakeEngine(e, results(e, 2)) for e in ("alpha", "beta", "gamma")]
    async with _facade("shared", _config("alpha", "beta", "gamma"), list(engines)) as (
        rypsok,
        server,
    ):
        assert server is not None
        await _search(rypsok, "alice")  # the first search also opens the connection
        before = await _scripts_run(server)
        response = await _search(rypsok, "alice", query="other")
        after = await _scripts_run(server)
        async with _peek(server) as client:
            window = await client.zcard("rypsok:tool:web_search:caller:alice")
            keys = sorted(await client.keys("rypsok:engine:*"))
    assert response.outcome is Outcome.OK
    assert after - before == 1
    assert window == 2
    assert keys == [f"rypsok:engine:{e}:turns" for e in ("alpha", "beta", "gamma")]
    assert all(len(e.queries) == 2 for e in engines)


async def test_coord_a_search_without_its_store_decides_each_limit_alone() -> None:
    telemetry.COUNTERS.reset()
    engines = [FakeEngine(e, results(e, 1)) for e in ("alpha", "beta", "gamma")]
    config = attrs.evolve(
        _config("alpha", "beta", "gamma", per_minute=4),
        coordination=_coordination(f"redis://127.0.0.1:{free_port()}", replicas=2),
    )
    with capture_logs() as logs:
        async with Rypsok(config, env={}, engines=list(engines)) as rypsok:
            answers = [await _search(rypsok, "alice") for _ in range(2)]
            # 4 a minute shared by 2 processes: this one alone admits 2.
            refused = await _refusal(rypsok, "alice")
    assert [a.outcome for a in answers] == [Outcome.OK, Outcome.OK]
    assert refused.detail.reason is DetailReason.RATE_LIMITED
    # Each decision made alone is counted: the caller's limit of three calls, and the
    # three engines' turns of the two that were admitted.
    assert telemetry.COUNTERS.snapshot()["coordination_unavailable"] == 3 + 2 * 3
    (warning,) = logs.named("coordination_unavailable")  # at most one a minute
    assert warning["reason"] == "unreachable"
    assert all(len(e.queries) == 2 for e in engines)


@pytest.mark.parametrize(
    "answer",
    [
        [b"1", b"0"],  # no engine's answer
        [b"1", b"0", b"0", b"1000"],  # a short engine's answer
        [b"1", b"0", b"0", b"1000", b"", b"0"],  # a long one
        [b"1", b"0", b"soon", b"1000", b""],
        [b"1", b"0", b"0", b"1" * 40, b""],
        [b"2", b"0", b"0", b"1000", b""],
        (b"1", b"0", b"0", b"1000", b""),  # not a list
        b"1",
    ],
)
async def test_coord_a_search_answer_of_the_wrong_shape_is_a_fallback(answer: object) -> None:
    telemetry.COUNTERS.reset()
    # The fake answers at once; a wide bound keeps a loaded machine from turning the wrong
    # shape into a timeout, which is another reason.
    config = _coordination("redis://127.0.0.1:1", timeout_ms=2000)
    store = Store(config, None, client=_OddClient(answer))
    with capture_logs() as logs:
        async with store:
            calls = SharedToolLimiter("web_search", 5, store)
            engine = SharedEngineLimiter("alpha", RECORD, store, per_engine_in_flight=1)
            (turn,) = await SearchGate(calls, "alice").admit([engine], float("inf"))
            assert await turn.take()
    assert logs.named("coordination_unavailable")[0]["reason"] == "bad_answer"
    assert telemetry.COUNTERS.snapshot()["coordination_unavailable"] == 2


class _SilentConnection(_OddConnection):
    """A store's connection that never answers."""

    async def create_request(self, command: bytes, *args: object) -> object:
        self.commands.append(command)
        await trio.sleep_forever()


async def test_req_mcp_010_a_call_whose_admission_the_deadline_cut_still_counts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The deadline ends the call during the round trip of its admission: its caller's limit
    is still decided (here alone, the store not answering) and counts the call."""
    connection = _SilentConnection(None)
    config = _coordination("redis://127.0.0.1:1", timeout_ms=200)
    store = Store(config, None, client=_OddClient(None, connection))
    async with store:
        calls = SharedToolLimiter("web_search", 1, store)
        gate = SearchGate(calls, "alice")
        with trio.move_on_after(0.1) as deadline:  # before the store's own timeout
            await gate.admit([], float("inf"))
        assert deadline.cancelled_caught
        assert await gate.decide_limit_only() is None  # the one call a minute: admitted
        assert await gate.decide_limit_only() is None  # decided once
        refusal = await SearchGate(calls, "alice").decide_limit_only()
    assert refusal is not None
    assert refusal.detail.reason is DetailReason.RATE_LIMITED
    assert connection.commands == [b"EVALSHA", b"EVALSHA"]  # then the store rests
    assert connection.invalidated  # the second round trip timed out
