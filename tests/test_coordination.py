"""[coordination]: the shared store of several processes, against a real redis-server.

What is asserted: the configuration and `check` (no store needed); the shared limiters keep
the semantics of the in-process ones (the same cases run against both); two clients of one
store share every budget and two callers never do; and whenever the store cannot decide —
unreachable, stopped mid-run, a wrong password, an answer that is not Redis's, a store
that does not answer in time — no call fails, the process decides alone with its share of
every limit (divided by `replicas`), warns at most once a minute, counts the decisions, and
returns to the store when it answers again.

Time here is the real clock: the store decides on its own clock (`TIME`), which MockClock
cannot move. Intervals are long enough (0.5 s) that only a defect, never a slow machine,
turns an answer around; bounds are asserted as "never earlier than", not "at most".
"""

from __future__ import annotations

import stat
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
from coredis.exceptions import NoScriptError
from redis_server import RedisServer, free_port, redis_server, running_redis
from search_fakes import RECORD, FakeEngine, capture_logs, engine_config, make_config, results

from rypsok.config.check import run_check
from rypsok.config.coordination import describe_url, parse_store_url
from rypsok.config.load import load_config_text
from rypsok.config.messages import ConfigError
from rypsok.config.rules import RuleError
from rypsok.config.schema import Config, CoordinationConfig, LimitsConfig
from rypsok.core import telemetry
from rypsok.core.coordination.gate import SearchGate
from rypsok.core.coordination.limits import SharedEngineLimiter, SharedToolLimiter
from rypsok.core.coordination.store import RETRY_AFTER_S, Store
from rypsok.core.model import DetailReason, SearchRequest, ToolError
from rypsok.core.pacing import EngineLimiter
from rypsok.core.ratelimit import ToolRateLimiter
from rypsok.core.services import Rypsok
from rypsok.core.telemetry import Secret

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from pathlib import Path

# 120 a minute: one turn every 0.5 s.
SLOW = attrs.evolve(RECORD, rate_per_minute=120, burst=1, concurrency=2)
PASSWORD = "correct-horse-battery-staple-0123"


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    yield from redis_server()


@pytest.fixture
def locked_redis() -> Iterator[RedisServer]:
    yield from redis_server(PASSWORD)


def _coordination(url: str, **changes: Any) -> CoordinationConfig:
    values: dict[str, Any] = {"url": url, "replicas": 1, "timeout_ms": 200}
    values.update(changes)
    return CoordinationConfig(**values)


@asynccontextmanager
async def _store(config: CoordinationConfig, password: str | None = None) -> AsyncIterator[Store]:
    """One process's client of the store; entered and left in the test's own task."""
    async with Store(config, Secret(password) if password else None) as store:
        yield store


@asynccontextmanager
async def _limiter(kind: str, build: Callable[[Store | None, str], Any]) -> AsyncIterator[Any]:
    """The in-process limiter, or the shared one (alone or as a search asks it) over a fresh
    redis-server."""
    if kind == "in-process":
        yield build(None, kind)
        return
    with running_redis() as server:
        async with _store(_coordination(server.url)) as store:
            yield build(store, kind)


class _EngineThroughGate:
    """An engine's admission as a search makes it with [coordination]: in its call's one
    script (`SearchGate`), the turn then taken in the engine's own task."""

    def __init__(self, limiter: SharedEngineLimiter, store: Store) -> None:
        self._limiter = limiter
        self._calls = SharedToolLimiter("web_search", 6000, store)

    async def admit(self, deadline: float) -> bool:
        (turn,) = await SearchGate(self._calls, "tests").admit([self._limiter], deadline)
        return await turn.take()


class _ToolThroughGate:
    """A caller's web_search limit as a search decides it with [coordination]."""

    def __init__(self, limiter: SharedToolLimiter) -> None:
        self._limiter = limiter

    async def admit(self, caller: str, now: float) -> int | None:
        try:
            turns = await SearchGate(self._limiter, caller).admit([], float("inf"))
        except ToolError as exc:
            refusal = exc
        else:
            assert turns == []
            return None
        assert refusal.detail.reason is DetailReason.RATE_LIMITED
        return refusal.detail.retry_after_ms


def _engine(store: Store | None, kind: str = "shared") -> Any:
    if store is None:
        return EngineLimiter(SLOW, per_engine_in_flight=2)
    limiter = SharedEngineLimiter("alpha", SLOW, store, per_engine_in_flight=2)
    return _EngineThroughGate(limiter, store) if kind == "shared-search" else limiter


def _tool(store: Store | None, kind: str = "shared") -> Any:
    if store is None:
        return ToolRateLimiter(3)
    limiter = SharedToolLimiter("web_search", 3, store)
    return _ToolThroughGate(limiter) if kind == "shared-search" else limiter


# The in-process limiters, the shared ones, and the shared ones as a search asks them.
KINDS = pytest.mark.parametrize("kind", ["in-process", "shared", "shared-search"])


# --- configuration and check (no store) ------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1", "redis://127.0.0.1:6379/0"),
        ("redis://127.0.0.1:7000/3", "redis://127.0.0.1:7000/3"),
        ("redis://store.example:6379?db=15", "redis://store.example:6379/15"),
        ("rediss://store.example:6380", "rediss://store.example:6380/0"),
        ("redis://rypsok@store.example/1", "redis://store.example:6379/1"),
        ("redis://[::1]:6379", "redis://[::1]:6379/0"),
        ("unix:///run/redis/redis.sock", "unix:///run/redis/redis.sock"),
        ("unix:///run/redis/redis.sock?db=2", "unix:///run/redis/redis.sock?db=2"),
    ],
)
def test_coord_url_forms_are_accepted_and_shown_without_credentials(url: str, shown: str) -> None:
    assert describe_url(parse_store_url(url)) == shown


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("redis://:hunter2hunter2@store.example/0", "password_env or password_file"),
        ("redis://user:hunter2hunter2@store.example/0", "password_env or password_file"),
        ("http://store.example/", "scheme redis, rediss or unix"),
        ("redis:///0", "with a host"),
        ("redis://store.example/16", "from 0 to 15"),
        ("redis://store.example/x", "from 0 to 15"),
        ("redis://store.example/1?db=2", "once"),
        ("redis://store.example?ssl=true", "db=N"),
        ("redis://store.example#frag", "fragment"),
        ("unix://relative/path.sock", "absolute socket path"),
        ("redis://store.example:99999", "store URL"),
        ("redis://store example", "store URL"),
        ("redis://store.example/\x00", "store URL"),
    ],
)
def test_coord_bad_urls_are_refused_without_repeating_them(url: str, words: str) -> None:
    with pytest.raises(RuleError) as caught:
        parse_store_url(url)
    assert words in str(caught.value)
    assert "hunter2" not in str(caught.value)


def _toml(body: str) -> str:
    return "config_version = 1\n[coordination]\n" + body


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("replicas = 2\n", "coordination.url: required"),
        ('url = "redis://127.0.0.1"\n', "coordination.replicas: required"),
        (
            'url = "redis://127.0.0.1"\nreplicas = 0\n',
            "coordination.replicas: expected an integer from 1 to 1024",
        ),
        (
            'url = "redis://127.0.0.1"\nreplicas = 1025\n',
            "coordination.replicas: expected an integer from 1 to 1024",
        ),
        (
            'url = "redis://127.0.0.1"\nreplicas = 2\ntimeout_ms = 0\n',
            "coordination.timeout_ms: expected an integer from 1 to 5000",
        ),
        (
            'url = "redis://127.0.0.1"\nreplicas = 2\ntimeout_ms = 5001\n',
            "coordination.timeout_ms: expected an integer from 1 to 5000",
        ),
        (
            'url = "redis://127.0.0.1"\nreplicas = 2\nkey_prefix = ""\n',
            "coordination.key_prefix: expected 1 to 64",
        ),
        (
            'url = "redis://127.0.0.1"\nreplicas = 2\nkey_prefix = "a b"\n',
            "coordination.key_prefix: expected 1 to 64",
        ),
        (
            'url = "redis://127.0.0.1"\nreplicas = 2\nkey_prefix = "' + "x" * 65 + '"\n',
            "coordination.key_prefix: expected 1 to 64",
        ),
        (
            'url = "redis://127.0.0.1"\nreplicas = 2\nsecret = "x"\n',
            "coordination.secret: unknown key",
        ),
        (
            'url = "redis://127.0.0.1"\nreplicas = 2\npassword_env = "A"\npassword_file = "/x"\n',
            "give at most one of password_env or password_file",
        ),
        (
            'url = "redis://127.0.0.1"\nreplicas = 2\npassword_env = "not a name"\n',
            "coordination.password_env: the value is not the name",
        ),
    ],
)
def test_coord_table_errors_name_the_key(body: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config_text(_toml(body), {})
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("key", "value"), [("replicas", 1), ("replicas", 1024), ("timeout_ms", 1), ("timeout_ms", 5000)]
)
def test_coord_range_ends_are_accepted(key: str, value: int) -> None:
    body = 'url = "redis://127.0.0.1"\nreplicas = 2\ntimeout_ms = 50\n'
    body = body.replace(f"{key} = {2 if key == 'replicas' else 50}", f"{key} = {value}")
    config = load_config_text(_toml(body), {})
    assert config.coordination is not None
    assert getattr(config.coordination, key) == value


def test_coord_absent_table_is_none_and_check_prints_no_line(tmp_path: Path) -> None:
    assert Config().coordination is None
    path = tmp_path / "c.toml"
    path.write_text("config_version = 1\n")
    report = run_check(str(path), {})
    assert report.exit_code == 0
    assert not any("coordination" in line for line in report.lines)


def test_coord_check_prints_the_store_without_credentials(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        _toml(
            'url = "redis://ops@127.0.0.1:6390/2"\nreplicas = 4\npassword_env = "STORE_PASSWORD"\n'
        )
    )
    report = run_check(str(path), {"STORE_PASSWORD": "hunter2hunter2"})
    assert report.exit_code == 0
    assert (
        "rypsok: coordination: url=redis://127.0.0.1:6390/2 key_prefix=rypsok: timeout_ms=50 "
        "replicas=4 password=env"
    ) in report.lines
    assert not any("hunter2" in line or "ops@" in line for line in report.lines)


def test_coord_check_refuses_an_unset_password_variable(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(_toml('url = "redis://127.0.0.1"\nreplicas = 2\npassword_env = "STORE_PW"\n'))
    report = run_check(str(path), {})
    assert report.exit_code == 1
    assert report.lines == (
        "rypsok: coordination.password_env: environment variable STORE_PW is unset or empty",
    )


def test_coord_check_refuses_an_unreadable_password_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    missing = tmp_path / "nope"
    path.write_text(
        _toml(f'url = "redis://127.0.0.1"\nreplicas = 2\npassword_file = "{missing}"\n')
    )
    report = run_check(str(path), {})
    assert report.exit_code == 1
    assert report.lines == ("rypsok: coordination.password_file: the file does not exist",)


def test_coord_check_warns_of_a_readable_password_file_and_plain_remote_traffic(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "pw"
    secret.write_text("hunter2hunter2\n")
    secret.chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IROTH)
    path = tmp_path / "c.toml"
    path.write_text(
        _toml(f'url = "redis://store.example"\nreplicas = 2\npassword_file = "{secret}"\n')
    )
    report = run_check(str(path), {})
    assert report.exit_code == 0
    warnings = [line for line in report.lines if line.startswith("rypsok: warning: coordination")]
    assert warnings == [
        "rypsok: warning: coordination.url: the store's traffic (callers' ids, engines' turns, "
        "the password) crosses the network unencrypted; rediss://, or a store on loopback or "
        "a unix socket",
        "rypsok: warning: coordination.password_file: the password file is readable by "
        "everyone; chmod 600",
    ]
    assert not any("hunter2" in line for line in report.lines)
    secret.chmod(stat.S_IRUSR | stat.S_IWUSR)
    for url in ("rediss://store.example", "redis://127.0.0.1", "unix:///run/r.sock"):
        path.write_text(_toml(f'url = "{url}"\nreplicas = 2\npassword_file = "{secret}"\n'))
        assert not any("warning: coordination" in line for line in run_check(str(path), {}).lines)


# --- the same semantics as the in-process limiters -----------------------------------------


@KINDS
async def test_req_cmp_002_both_limiters_admit_the_burst_then_one_a_turn(kind: str) -> None:
    async with _limiter(kind, _engine) as limiter:
        start = time.monotonic()
        assert await limiter.admit(float("inf"))
        first = time.monotonic()
        assert await limiter.admit(float("inf"))
        second = time.monotonic()
    # Never before the next turn (burst 1). The first turn was granted at some moment between
    # `start` and `first` (the store's reply takes a while under load), so the next one is
    # measured from `start`, the earliest the grant can have been.
    assert second - start >= 0.5 - 0.01
    assert first - start < 0.5  # the first turn was free


@KINDS
async def test_req_cmp_002_both_limiters_refuse_a_turn_past_the_deadline_and_take_none(
    kind: str,
) -> None:
    async with _limiter(kind, _engine) as limiter:
        assert await limiter.admit(float("inf"))
        # The next turn is 0.5 s away: a deadline 0.1 s away is refused at once...
        assert not await limiter.admit(trio.current_time() + 0.1)
        # ...and took no turn: a call that can wait 0.7 s gets the very next one.
        assert await limiter.admit(trio.current_time() + 0.7)


@KINDS
async def test_req_cmp_002_both_limiters_give_back_a_turn_cancelled_while_waiting(
    kind: str,
) -> None:
    async with _limiter(kind, _engine) as limiter:
        assert await limiter.admit(float("inf"))
        with trio.move_on_after(0.05):
            await limiter.admit(float("inf"))  # waits for the turn 0.5 s away; cancelled
        # Had the cancelled call kept its turn, the next would be 1 s away, past this one.
        assert await limiter.admit(trio.current_time() + 0.8)


@KINDS
async def test_req_mcp_010_both_tool_limiters_admit_the_limit_then_say_when(kind: str) -> None:
    async with _limiter(kind, _tool) as limiter:
        now = trio.current_time()
        assert [await limiter.admit("alice", now) for _ in range(3)] == [None, None, None]
        wait = await limiter.admit("alice", now)
        # Another caller has its own budget (REQ-SEC-019).
        other = await limiter.admit("bob", now)
    assert wait is not None
    assert 59_000 <= wait <= 60_000
    assert other is None


# --- one store, several processes -------------------------------------------------------------


async def test_req_cmp_002_two_processes_share_an_engines_turns(redis: RedisServer) -> None:
    async with _store(_coordination(redis.url)) as a, _store(_coordination(redis.url)) as b:
        one = SharedEngineLimiter("alpha", SLOW, a, per_engine_in_flight=2)
        two = SharedEngineLimiter("alpha", SLOW, b, per_engine_in_flight=2)
        assert await one.admit(float("inf"))
        # The turn the other process took is the one this process would have had.
        assert not await two.admit(trio.current_time() + 0.2)
        assert await two.admit(trio.current_time() + 0.7)


async def test_req_sec_019_one_callers_limit_spent_through_one_process_is_spent_for_all(
    redis: RedisServer,
) -> None:
    async with _store(_coordination(redis.url)) as a, _store(_coordination(redis.url)) as b:
        one = SharedToolLimiter("web_search", 2, a)
        two = SharedToolLimiter("web_search", 2, b)
        now = trio.current_time()
        assert await one.admit("alice", now) is None
        assert await two.admit("alice", now) is None
        assert await one.admit("alice", now) is not None
        assert await two.admit("alice", now) is not None
        # Two callers never share a budget.
        assert await two.admit("bob", now) is None


async def test_req_sec_019_concurrent_round_trips_each_get_their_own_answer(
    redis: RedisServer,
) -> None:
    """Hundreds of round trips at once, from two clients of one store, each caller with a
    limit of its own: every caller is admitted exactly its limit. A reply handed to another
    round trip (a connection shared while the pool lends it out) would show as a caller
    admitted more or fewer times than its limit."""
    limits = {f"caller-{n}": 1 + n % 5 for n in range(40)}
    admitted = dict.fromkeys(limits, 0)
    async with (
        _store(_coordination(redis.url, timeout_ms=2000)) as a,
        _store(_coordination(redis.url, timeout_ms=2000)) as b,
    ):

        async def ask(store: Store, caller: str) -> None:
            limiter = SharedToolLimiter("web_search", limits[caller], store)
            if await limiter.admit(caller, trio.current_time()) is None:
                admitted[caller] += 1

        with capture_logs() as logs:
            async with trio.open_nursery() as nursery:
                for round_ in range(7):
                    for caller in limits:
                        nursery.start_soon(ask, a if round_ % 2 else b, caller)
    assert logs.named("coordination_unavailable") == []
    assert admitted == limits


async def test_coord_keys_are_namespaced_and_expire_by_themselves(redis: RedisServer) -> None:
    import coredis

    async with _store(_coordination(redis.url, key_prefix="prod-a:")) as store:
        await SharedToolLimiter("web_fetch", 5, store).admit("alice", trio.current_time())
        await SharedEngineLimiter("brave", SLOW, store, per_engine_in_flight=1).admit(float("inf"))
    async with coredis.Redis(host="127.0.0.1", port=redis.port) as client:
        keys = sorted(k.decode() for k in await client.keys("*"))
        ttls = [await client.pttl(key) for key in keys]
    assert keys == ["prod-a:engine:brave:turns", "prod-a:tool:web_fetch:caller:alice"]
    assert all(0 < ttl <= 62_000 for ttl in ttls)


async def test_coord_the_facade_shares_a_callers_limit_between_two_processes(
    redis: RedisServer,
) -> None:
    config = attrs.evolve(
        make_config(engine_config("alpha")),
        limits=LimitsConfig(web_search_per_minute=2),
        coordination=_coordination(redis.url, replicas=2),
    )
    async with (
        Rypsok(config, env={}, engines=[FakeEngine("alpha", results("a", 1))]) as one,
        Rypsok(config, env={}, engines=[FakeEngine("alpha", results("a", 1))]) as two,
    ):
        await one.search_as("alice", SearchRequest(query="rust"))
        await two.search_as("alice", SearchRequest(query="rust"))
        with pytest.raises(ToolError) as caught:
            await one.search_as("alice", SearchRequest(query="rust"))
        await two.search_as("bob", SearchRequest(query="rust"))
    assert str(caught.value.detail.reason) == "rate_limited"


# --- when the store cannot decide ---------------------------------------------------------


async def test_coord_an_unreachable_store_falls_back_to_a_share_of_each_limit() -> None:
    telemetry.COUNTERS.reset()
    with capture_logs() as logs:
        config = _coordination(f"redis://127.0.0.1:{free_port()}", replicas=2)
        async with _store(config) as store:
            tool = SharedToolLimiter("web_search", 4, store)
            now = trio.current_time()
            answers = [await tool.admit("alice", now) for _ in range(3)]
    # 4 a minute shared by 2 processes: this one alone takes 2.
    assert answers[:2] == [None, None]
    assert answers[2] is not None
    warnings = logs.named("coordination_unavailable")
    assert len(warnings) == 1  # at most one a minute
    assert warnings[0]["reason"] == "unreachable"
    assert warnings[0]["level"] == "warn"
    assert telemetry.COUNTERS.snapshot()["coordination_unavailable"] == 3


async def test_coord_fallback_divides_an_engines_rate_and_burst() -> None:
    record = attrs.evolve(RECORD, rate_per_minute=240, burst=4)  # 0.25 s a turn, burst 4
    with capture_logs():
        config = _coordination(f"redis://127.0.0.1:{free_port()}", replicas=4)
        async with _store(config) as store:
            limiter = SharedEngineLimiter("alpha", record, store, per_engine_in_flight=2)
            assert await limiter.admit(float("inf"))
            # Alone, this process has a quarter: burst 1 and one turn a second.
            assert not await limiter.admit(trio.current_time() + 0.5)


async def test_coord_a_store_down_at_start_does_not_stop_a_search() -> None:
    config = attrs.evolve(
        make_config(engine_config("alpha")),
        coordination=_coordination(f"redis://127.0.0.1:{free_port()}", replicas=3),
    )
    engine = FakeEngine("alpha", results("a", 2))
    with capture_logs():
        async with Rypsok(config, env={}, engines=[engine]) as rypsok:
            response = await rypsok.search(SearchRequest(query="rust"))
    assert len(response.results) == 2


async def test_coord_the_store_stopped_mid_run_then_back(redis: RedisServer) -> None:
    import coredis

    telemetry.COUNTERS.reset()
    with capture_logs() as logs:
        async with _store(_coordination(redis.url, replicas=2)) as store:
            tool = SharedToolLimiter("web_search", 100, store)
            assert await tool.admit("alice", trio.current_time()) is None  # in the store
            redis.stop()
            assert await tool.admit("alice", trio.current_time()) is None  # decided alone
            assert telemetry.COUNTERS.snapshot()["coordination_unavailable"] == 1
            redis.start()
            await trio.sleep(RETRY_AFTER_S + 0.1)
            assert await tool.admit("alice", trio.current_time()) is None
            assert await tool.admit("alice", trio.current_time()) is None
    assert telemetry.COUNTERS.snapshot()["coordination_unavailable"] == 1  # back in the store
    assert len(logs.named("coordination_unavailable")) == 1
    assert len(logs.named("coordination_restored")) == 1
    async with coredis.Redis(host="127.0.0.1", port=redis.port) as client:
        # The restarted store (no persistence) holds the two calls made after it came back.
        assert await client.zcard("rypsok:tool:web_search:caller:alice") == 2


async def test_coord_a_wrong_password_falls_back_and_never_shows_it(
    locked_redis: RedisServer,
) -> None:
    config = _coordination(locked_redis.url)
    with capture_logs() as logs:
        async with _store(config, "wrong-password-wrong-password") as wrong:
            tool = SharedToolLimiter("web_search", 1, wrong)
            assert await tool.admit("a", trio.current_time()) is None
        async with _store(config, PASSWORD) as right:
            tool = SharedToolLimiter("web_search", 1, right)
            assert await tool.admit("a", trio.current_time()) is None
            assert await tool.admit("a", trio.current_time()) is not None
    (warning,) = logs.named("coordination_unavailable")
    assert warning["reason"] == "auth"
    assert "wrong-password" not in logs.text
    assert PASSWORD not in logs.text


async def _not_redis(reply: bytes | None, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """A TCP peer that is not Redis: it answers `reply` to anything, or never answers."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def handler(stream: trio.SocketStream) -> None:
        try:
            while await stream.receive_some(4096):
                if reply is not None:
                    await stream.send_all(reply)
        except trio.BrokenResourceError:
            pass

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handler, listeners)
        task_status.started(port)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", None),
        (b"\x00\xff garbage \r\n", None),
        (b"+OK\r\n", None),  # a well-formed reply of the wrong kind
        (None, "timeout"),  # a peer that never answers
    ],
)
async def test_coord_a_store_that_is_not_redis_falls_back(
    reply: bytes | None, reason: str | None
) -> None:
    async with trio.open_nursery() as nursery:
        port = await nursery.start(_not_redis, reply)
        with capture_logs() as logs:
            config = _coordination(f"redis://127.0.0.1:{port}", timeout_ms=100)
            async with _store(config) as store:
                limiter = SharedToolLimiter("web_search", 5, store)
                with trio.fail_after(10):
                    assert await limiter.admit("alice", trio.current_time()) is None
        nursery.cancel_scope.cancel()
    (warning,) = logs.named("coordination_unavailable")
    if reason is not None:
        assert warning["reason"] == reason


class _OddConnection:
    """A connection whose every script answers `answer` (a shape no rypsok script returns,
    in the tests of the wrong shape); `unknown` scripts are refused NOSCRIPT once by EVALSHA."""

    def __init__(self, answer: object, *, unknown: bool = False) -> None:
        self.answer = answer
        self.unknown = unknown
        self.commands: list[bytes] = []
        self.invalidated = False

    async def create_request(self, command: bytes, *args: object) -> object:
        self.commands.append(command)
        if command == b"EVALSHA" and self.unknown:
            self.unknown = False
            raise NoScriptError("NOSCRIPT No matching script.")
        return self.answer

    def invalidate(self) -> None:
        self.invalidated = True

    @property
    def usable(self) -> bool:
        """coredis's word on whether the connection is up: this one never drops."""
        return True


class _OddClient:
    """coredis's public surface as the store uses it: `evalsha`, `eval`, and the pool's
    `acquire` (which opens the connection) and `disconnect`, all over one recorded
    connection."""

    def __init__(self, answer: object, connection: _OddConnection | None = None) -> None:
        self.connection_pool = self
        self.connection = connection if connection is not None else _OddConnection(answer)

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[_OddConnection]:
        yield self.connection

    async def __aenter__(self) -> _OddClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def script_load(self, script: str) -> str:
        """The scripts loaded at each opening: this store keeps none (`unknown`)."""
        return ""

    async def evalsha(self, sha: str, *, keys: list[str], args: list[str]) -> object:
        return await self.connection.create_request(b"EVALSHA", sha, len(keys), *keys, *args)

    async def eval(self, script: str, *, keys: list[str], args: list[str]) -> object:
        return await self.connection.create_request(b"EVAL", script, len(keys), *keys, *args)

    def disconnect(self) -> None:
        self.connection.invalidate()


@pytest.mark.parametrize(
    "answer",
    [None, [], [b"x", b"y"], [b"1"], [b"2", b"0"], [b"0", b"-5"], "text", [b"1" * 40, b"0"]],
)
async def test_coord_an_answer_of_the_wrong_shape_is_a_fallback(answer: object) -> None:
    client = _OddClient(answer)
    store = Store(_coordination("redis://127.0.0.1:1"), None, client=client)
    with capture_logs() as logs:
        async with store:
            tool = SharedToolLimiter("web_search", 5, store)
            assert await tool.admit("a", trio.current_time()) is None
    assert logs.named("coordination_unavailable")[0]["reason"] == "bad_answer"
    assert client.connection.commands == [b"EVALSHA"]  # asked once, by the script's digest


async def test_coord_a_script_the_store_does_not_know_is_sent_whole_once() -> None:
    """The store restarted (or never ran the script): EVALSHA is refused NOSCRIPT, the script
    is sent whole (EVAL, which also makes the store keep it); then the digest again."""
    connection = _OddConnection([b"1", b"0"], unknown=True)
    store = Store(_coordination("redis://127.0.0.1:1"), None, client=_OddClient(None, connection))
    with capture_logs() as logs:
        async with store:
            tool = SharedToolLimiter("web_search", 5, store)
            assert await tool.admit("a", trio.current_time()) is None
            assert connection.commands == [b"EVALSHA", b"EVAL"]
            assert await tool.admit("a", trio.current_time()) is None
    assert connection.commands == [b"EVALSHA", b"EVAL", b"EVALSHA"]
    assert logs.named("coordination_unavailable") == []


async def test_req_obs_003_the_counters_event_carries_the_fallback_count() -> None:
    counters = telemetry.Counters()
    counters.coordination_unavailable()
    counters.coordination_unavailable()
    assert counters.snapshot()["coordination_unavailable"] == 2
    with capture_logs() as logs, trio.move_on_after(0.15):
        await telemetry.run_counters_reporter(0.1, counters=counters)
    (event,) = logs.named("counters")
    assert event["coordination_unavailable"] == 2


def test_coord_the_password_is_read_from_its_file_or_its_variable(tmp_path: Path) -> None:
    from rypsok.config.secrets import store_password

    secret = tmp_path / "pw"
    secret.write_text("  hunter2hunter2\n")
    by_file = load_config_text(
        _toml(f'url = "redis://127.0.0.1"\nreplicas = 2\npassword_file = "{secret}"\n'), {}
    )
    password = store_password(by_file, {})
    assert password is not None
    assert password.reveal() == "hunter2hunter2"
    by_env = load_config_text(
        _toml('url = "redis://127.0.0.1"\nreplicas = 2\npassword_env = "PW"\n'), {"PW": " pw "}
    )
    password = store_password(by_env, {"PW": " pw "})
    assert password is not None
    assert password.reveal() == "pw"
    none = load_config_text(_toml('url = "redis://127.0.0.1"\nreplicas = 2\n'), {})
    assert store_password(none, {}) is None
    assert store_password(Config(), {}) is None


def test_coord_an_empty_password_file_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text(" \n")
    with pytest.raises(ConfigError) as caught:
        load_config_text(
            _toml(f'url = "redis://127.0.0.1"\nreplicas = 2\npassword_file = "{secret}"\n'), {}
        )
    assert str(caught.value) == "coordination.password_file: the file is empty"
