"""The circuit of an engine: opening, cooldown growth, probe, closing, Retry-After."""

from __future__ import annotations

import io
import json

import pytest
import trio
import trio.testing

from rypsok.core import telemetry
from rypsok.core.engines.circuit import Circuit, CircuitTicket
from rypsok.core.model import EngineState, Reason


def _circuit() -> Circuit:
    return Circuit("wiki", failures_to_open=3, first_cooldown_s=60, max_cooldown_s=900)


def _fail(c: Circuit, now: float, cls: Reason = Reason.TIMEOUT, wait: float | None = None) -> None:
    ticket = c.admit(now)
    assert ticket is not None
    c.failed(ticket, cls, now, retry_after_s=wait)


def _open_with_failures(c: Circuit, now: float, n: int = 3) -> None:
    for _ in range(n):
        _fail(c, now)


@pytest.mark.parametrize(
    "cls", [Reason.TIMEOUT, Reason.RATE_LIMITED, Reason.BLOCKED, Reason.PARSE_FAILURE]
)
def test_req_res_004_three_consecutive_counted_failures_open_the_circuit(cls: Reason) -> None:
    c = _circuit()
    _fail(c, 0, cls)
    _fail(c, 1, cls)
    assert c.state() is EngineState.CLOSED
    _fail(c, 2, cls)
    assert c.state() is EngineState.OPEN
    assert c.admit(3) is None
    assert c.admit(61.999) is None


def test_req_test_017_a_success_resets_the_count() -> None:
    c = _circuit()
    _fail(c, 0)
    _fail(c, 0)
    ticket = c.admit(0)
    assert ticket is not None
    c.succeeded(ticket, 0)
    _fail(c, 0)
    _fail(c, 0)
    assert c.state() is EngineState.CLOSED
    _fail(c, 0)
    assert c.state() is EngineState.OPEN


@pytest.mark.parametrize("cls", [Reason.AUTH_FAILURE, Reason.REQUEST_FAILURE])
def test_req_res_004_auth_and_request_failures_never_open_it(cls: Reason) -> None:
    c = _circuit()
    for now in range(20):
        _fail(c, now, cls)
    assert c.state() is EngineState.CLOSED
    # They are neutral: two counted failures around them still add up to three.
    _fail(c, 30)
    _fail(c, 31)
    _fail(c, 32, cls)
    _fail(c, 33)
    assert c.state() is EngineState.OPEN


def test_req_res_005_after_the_cooldown_one_call_probes_half_open() -> None:
    c = _circuit()
    _open_with_failures(c, 0)
    assert c.state() is EngineState.OPEN
    assert c.admit(59) is None
    # The cooldown is over but nothing was asked: the circuit is still open.
    assert c.state() is EngineState.OPEN
    probe = c.admit(60)
    assert probe is not None
    assert probe.probe
    assert c.state() is EngineState.HALF_OPEN
    assert c.admit(60) is None  # a concurrent call is skipped while the probe is out
    c.succeeded(probe, 61)
    assert c.state() is EngineState.CLOSED
    again = c.admit(61)
    assert again is not None
    assert not again.probe


def test_req_res_005_a_failed_probe_reopens_with_doubling_up_to_the_maximum() -> None:
    c = _circuit()
    now = 0.0
    _open_with_failures(c, now)
    cooldowns = []
    opened_at = now
    for _ in range(6):
        # Find the end of the cooldown exactly: closed to calls before, a probe at it.
        cooldown = c.statistics().open_until - opened_at  # type: ignore[operator]
        cooldowns.append(cooldown)
        assert c.admit(opened_at + cooldown - 0.001) is None
        now = opened_at + cooldown
        probe = c.admit(now)
        assert probe is not None
        assert probe.probe
        c.failed(probe, Reason.BLOCKED, now)
        opened_at = now
    assert cooldowns == [60, 120, 240, 480, 900, 900]


def test_req_res_005_success_resets_the_cooldown_to_the_first() -> None:
    c = _circuit()
    _open_with_failures(c, 0)
    probe = c.admit(60)
    assert probe is not None
    c.failed(probe, Reason.TIMEOUT, 60)  # reopened for 120 s
    probe = c.admit(180)
    assert probe is not None
    c.succeeded(probe, 180)
    _open_with_failures(c, 200)
    assert c.statistics().open_until == 260


@pytest.mark.parametrize("cls", [Reason.AUTH_FAILURE, Reason.REQUEST_FAILURE])
def test_req_res_005_a_probe_without_verdict_leaves_the_next_call_to_probe(cls: Reason) -> None:
    c = _circuit()
    _open_with_failures(c, 0)
    probe = c.admit(60)
    assert probe is not None
    c.failed(probe, cls, 60)
    assert c.state() is EngineState.OPEN
    again = c.admit(60.5)
    assert again is not None
    assert again.probe


def test_req_res_005_a_released_probe_is_given_back() -> None:
    c = _circuit()
    _open_with_failures(c, 0)
    probe = c.admit(60)
    assert probe is not None
    c.released(probe)
    assert c.state() is EngineState.OPEN
    assert c.admit(60) is not None


def test_req_res_004_outcomes_from_before_an_opening_are_ignored() -> None:
    c = _circuit()
    slow = c.admit(0)
    assert slow is not None
    _open_with_failures(c, 1)
    c.succeeded(slow, 2)  # a late answer of a call made while the circuit was closed
    assert c.state() is EngineState.OPEN
    probe = c.admit(61)
    assert probe is not None
    c.failed(slow, Reason.TIMEOUT, 62)
    assert c.state() is EngineState.HALF_OPEN


def test_req_cmp_002_retry_after_opens_at_once_for_the_providers_wait() -> None:
    c = _circuit()
    _fail(c, 0, Reason.RATE_LIMITED, wait=30)
    assert c.state() is EngineState.OPEN
    assert c.admit(29.9) is None
    probe = c.admit(30)
    assert probe is not None
    assert probe.probe
    c.succeeded(probe, 30)
    assert c.state() is EngineState.CLOSED


def test_req_cmp_002_retry_after_is_capped_at_the_maximum_cooldown() -> None:
    c = _circuit()
    _fail(c, 0, Reason.RATE_LIMITED, wait=86400)
    assert c.statistics().open_until == 900


def test_req_cmp_002_retry_after_longer_than_the_cooldown_wins_when_the_circuit_opens() -> None:
    c = _circuit()
    _fail(c, 0)
    _fail(c, 0)
    _fail(c, 0, Reason.RATE_LIMITED, wait=200)  # the third counted failure
    assert c.statistics().open_until == 200
    c2 = _circuit()
    _fail(c2, 0)
    _fail(c2, 0)
    _fail(c2, 0, Reason.RATE_LIMITED, wait=5)  # shorter than the cooldown: the cooldown holds
    assert c2.statistics().open_until == 60


def test_req_cmp_002_a_wait_on_another_class_is_not_a_rate_limit() -> None:
    c = _circuit()
    _fail(c, 0, Reason.TIMEOUT, wait=30)
    assert c.state() is EngineState.CLOSED


def test_req_obs_004_opened_and_closed_events_carry_engine_class_and_cooldown() -> None:
    stream = io.StringIO()
    telemetry.configure("debug", stream=stream)
    try:
        c = Circuit("brave_news", failures_to_open=1, first_cooldown_s=10, max_cooldown_s=40)
        _fail(c, 0, Reason.PARSE_FAILURE)
        probe = c.admit(10)
        assert probe is not None
        c.failed(probe, Reason.RATE_LIMITED, 10, retry_after_s=25.5)  # above the 20 s cooldown
        probe = c.admit(35.5)
        assert probe is not None
        c.succeeded(probe, 26)
    finally:
        telemetry.configure()
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    picked = [
        {k: r[k] for k in ("event", "engine", "class", "cooldown_s") if k in r} for r in records
    ]
    assert picked == [
        {
            "event": "circuit_opened",
            "engine": "brave_news",
            "class": "parse_failure",
            "cooldown_s": 10,
        },
        {
            "event": "circuit_opened",
            "engine": "brave_news",
            "class": "rate_limited",
            "cooldown_s": 25.5,
        },
        {"event": "circuit_closed", "engine": "brave_news"},
    ]


def test_req_res_004_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="resilience"):
        Circuit("x", failures_to_open=0)
    with pytest.raises(ValueError, match="resilience"):
        Circuit("x", first_cooldown_s=100, max_cooldown_s=50)


async def test_req_test_017_a_fake_engine_through_the_circuit_on_the_mock_clock(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Calls at a steady pace: three timeouts open it, a minute later one call probes."""
    c = _circuit()
    healthy = False
    asked: list[float] = []
    skipped: list[float] = []

    async def call() -> None:
        now = trio.current_time()
        ticket: CircuitTicket | None = c.admit(now)
        if ticket is None:
            skipped.append(now)
            return
        asked.append(now)
        await trio.sleep(1)
        if healthy:
            c.succeeded(ticket, trio.current_time())
        else:
            c.failed(ticket, Reason.TIMEOUT, trio.current_time())

    start = trio.current_time()
    for second in range(0, 70, 10):
        await trio.sleep_until(start + second)
        if second == 60:
            healthy = True
        await call()
    asked_at = [round(t - start) for t in asked]
    skipped_at = [round(t - start) for t in skipped]
    # Failures end at 1, 11, 21: open from 21 to 81. 30..60 are skipped.
    assert asked_at == [0, 10, 20]
    assert skipped_at == [30, 40, 50, 60]
    await trio.sleep_until(start + 81)
    healthy = True
    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        await trio.sleep(0.1)
        assert c.state() is EngineState.HALF_OPEN
        nursery.start_soon(call)  # skipped: the probe is in flight
    assert c.state() is EngineState.CLOSED
    assert [round(t - start) for t in asked] == [0, 10, 20, 81]
