"""The handshake sessions over HTTP (LIM-H6) through the app, on Trio's MockClock: their
bound, each caller's share of it, their expiry without traffic and their renewal by it.

The app is driven as ASGI (`asgi_driver`): a session's lifetime is minutes, and only a clock
that jumps lets a test cross it exactly, with no margin a loaded machine could eat.
"""

from __future__ import annotations

import json

import pytest
import trio
from asgi_driver import app_of, post
from http_helpers import CALLERS, CALLERS_ENV, TOKEN_A, TOKEN_B, initialize_body, make_config
from search_fakes import capture_logs

from rypsok.core import telemetry
from rypsok.mcp.sessions import SESSION_TTL_S

INITIALIZE = json.dumps(initialize_body()).encode()
PING = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode()


@pytest.fixture(autouse=True)
def _fresh_counters() -> None:
    telemetry.COUNTERS.reset()


async def test_req_sec_024_one_callers_handshakes_leave_the_others_their_share_of_sessions(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Caller A's 300 initialize get A's share of LIM-H6 (256 / 2 callers); beyond it each is
    503 naming the share, with the wait until A's oldest session expires. Caller B still
    opens its sessions, and A opens one again once that wait has passed."""
    mock_clock.autojump_threshold = 0
    config = make_config(CALLERS, CALLERS_ENV)
    with capture_logs() as logs:
        async with app_of(config, CALLERS_ENV) as app:
            first_at = trio.current_time()
            answers = []
            sent_at = []
            for _ in range(300):
                sent_at.append(trio.current_time())
                answers.append(await post(app, INITIALIZE, TOKEN_A))
                await trio.sleep(0.01)
            assert [a.status for a in answers] == [200] * 128 + [503] * 172
            refused = answers[128]
            error = json.loads(refused.body)["error"]
            # A's oldest session, opened at `first_at`, expires SESSION_TTL_S after it.
            expected_ms = (first_at + SESSION_TTL_S - sent_at[128]) * 1000
            assert error["data"]["reason"] == "session_share"
            assert error["data"]["retry_after_ms"] == pytest.approx(expected_ms, abs=20)
            assert refused.headers["retry-after"] == str(round(expected_ms / 1000 + 0.5))
            assert "mcp-session-id" not in refused.headers
            for _ in range(5):
                opened = await post(app, INITIALIZE, TOKEN_B)
                assert opened.status == 200
                assert opened.headers["mcp-session-id"]
            # The wait the refusal named is the truth: A's oldest session is gone after it.
            last = json.loads(answers[-1].body)["error"]["data"]["retry_after_ms"]
            await trio.sleep_until(sent_at[-1] + last / 1000)
            assert (await post(app, INITIALIZE, TOKEN_A)).status == 200
            assert (await post(app, INITIALIZE, TOKEN_A)).status == 503
    shares = [e for e in logs.named("http_refused") if e["reason"] == "session_share"]
    assert sum(e["count"] for e in shares) >= 1
    assert telemetry.COUNTERS.snapshot()["http"] == {"session_share": 173}


async def test_req_sec_024_a_caller_at_its_share_and_the_bound_is_told_its_own_wait(
    mock_clock: trio.testing.MockClock,
) -> None:
    """max_sessions 4, two callers (a share of 2). A holds its two; B's two fill the table.
    B's third initialize is past its share and the bound together: it is told its share and
    the wait until its own oldest session expires, which opens it a session (no Retry-After
    of 30 that would leave it refused again)."""
    mock_clock.autojump_threshold = 0
    config = make_config(CALLERS + "[service.http]\nmax_sessions = 4\n", CALLERS_ENV)
    async with app_of(config, CALLERS_ENV) as app:
        alice = [(await post(app, INITIALIZE, TOKEN_A)).status for _ in range(4)]
        await trio.sleep(100)
        b_first_at = trio.current_time()
        bob = [(await post(app, INITIALIZE, TOKEN_B)).status]
        await trio.sleep(10)
        bob.append((await post(app, INITIALIZE, TOKEN_B)).status)
        await trio.sleep(10)
        sent_at = trio.current_time()
        refused = await post(app, INITIALIZE, TOKEN_B)
        assert (alice, bob, refused.status) == ([200, 200, 503, 503], [200, 200], 503)
        error = json.loads(refused.body)["error"]
        expected_ms = (b_first_at + SESSION_TTL_S - sent_at) * 1000
        assert error["data"]["reason"] == "session_share"
        assert error["data"]["retry_after_ms"] == pytest.approx(expected_ms, abs=1)
        assert refused.headers["retry-after"] == str(round(expected_ms / 1000 + 0.5))
        # The wait named is B's true one: A's sessions expire first, yet B still holds its
        # share until its own oldest expires, and then opens one.
        await trio.sleep_until(b_first_at + SESSION_TTL_S - 1)
        again = await post(app, INITIALIZE, TOKEN_B)
        assert json.loads(again.body)["error"]["data"]["reason"] == "session_share"
        await trio.sleep_until(sent_at + error["data"]["retry_after_ms"] / 1000)
        assert (await post(app, INITIALIZE, TOKEN_B)).status == 200
    assert telemetry.COUNTERS.snapshot()["http"] == {"session_share": 4}


async def test_req_sec_024_with_one_caller_the_bound_is_the_whole_table(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    config = make_config("[service.http]\nmax_sessions = 3\n")
    async with app_of(config) as app:
        statuses = [(await post(app, INITIALIZE)).status for _ in range(4)]
        refused = await post(app, INITIALIZE)
    assert statuses == [200, 200, 200, 503]
    assert refused.headers["retry-after"] == "30"
    assert "data" not in json.loads(refused.body)["error"]


async def test_req_sec_024_sessions_expire_without_traffic(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    config = make_config("[service.http]\nmax_sessions = 1\n")
    async with app_of(config, session_ttl_s=300) as app:
        first = await post(app, INITIALIZE)
        session = first.headers["mcp-session-id"]
        assert (await post(app, INITIALIZE)).status == 503
        await trio.sleep(299.9)
        assert (await post(app, INITIALIZE)).status == 503  # not yet
        await trio.sleep(0.1)
        renewed = await post(app, INITIALIZE)
        assert renewed.status == 200
        listed = await post(app, PING, **{"Mcp-Session-Id": session})
    assert listed.status == 404  # the expired session is gone: initialize again


async def test_req_sec_024_traffic_keeps_a_session_alive(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    config = make_config("[service.http]\nmax_sessions = 1\n")
    async with app_of(config, session_ttl_s=300) as app:
        session = (await post(app, INITIALIZE)).headers["mcp-session-id"]
        for _ in range(4):
            await trio.sleep(200)  # 800 s in all, each ping within the lifetime
            pinged = await post(app, PING, **{"Mcp-Session-Id": session})
            assert pinged.status == 200
        assert (await post(app, INITIALIZE)).status == 503
        await trio.sleep(300)
        assert (await post(app, PING, **{"Mcp-Session-Id": session})).status == 404
