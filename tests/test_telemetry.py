"""Telemetry: log lines, call context, secrets, refusal counters (REQ-OBS-005/7, REQ-PRIV-004)."""

from __future__ import annotations

import functools
import io
import itertools
import json
import math
import re
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
import trio
import trio.lowlevel
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from rypsok.core import telemetry
from rypsok.core.model import Reason
from rypsok.core.telemetry import (
    COUNTERS,
    Counters,
    Secret,
    call_scope,
    current_caller,
    current_request_id,
    run_counters_reporter,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

HIDDEN = "sk-live-hidden-0123456789"  # stands for a credential or external text


class Capture(io.StringIO):
    """A stream that keeps every write call apart, to check that a line is one write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self.writes.append(text)
        return super().write(text)

    def records(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.getvalue().splitlines()]


@pytest.fixture
def capture() -> Iterator[Capture]:
    stream = Capture()
    telemetry.configure("debug", stream=stream)
    yield stream
    telemetry.configure()


def use(stream: Capture, level: str, log_queries: bool = False) -> None:
    stream.seek(0)
    stream.truncate()
    stream.writes.clear()
    telemetry.configure(level, log_queries=log_queries, stream=stream)


def test_req_obs_005_a_line_is_one_json_object_with_timestamp_level_event_then_fields(
    capture: Capture,
) -> None:
    telemetry.info("call", tool="web_search", outcome="ok", latency_ms=12, engines=["a", "b"])
    assert len(capture.writes) == 1
    line = capture.writes[0]
    assert line.endswith("\n")
    assert line.count("\n") == 1
    record = json.loads(line)
    assert list(record) == [
        "timestamp",
        "level",
        "event",
        "tool",
        "outcome",
        "latency_ms",
        "engines",
    ]
    assert record["level"] == "info"
    assert record["event"] == "call"
    assert record["engines"] == ["a", "b"]


def test_req_obs_005_timestamp_is_rfc3339_utc_with_milliseconds(capture: Capture) -> None:
    before = datetime.now(UTC)
    telemetry.warn("circuit_opened", engine="brave")
    after = datetime.now(UTC)
    stamp = capture.records()[0]["timestamp"]
    assert isinstance(stamp, str)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp)
    moment = datetime.fromisoformat(stamp)
    assert moment.utcoffset() == timedelta(0)
    assert before - timedelta(milliseconds=1) <= moment <= after


@pytest.mark.parametrize(
    ("configured", "written"),
    [
        ("error", ["error"]),
        ("warn", ["error", "warn"]),
        ("info", ["error", "warn", "info"]),
        ("debug", ["error", "warn", "info", "debug"]),
    ],
)
def test_req_obs_005_events_below_the_configured_level_are_dropped(
    capture: Capture, configured: str, written: list[str]
) -> None:
    use(capture, configured)
    telemetry.error("e")
    telemetry.warn("w")
    telemetry.info("i")
    telemetry.debug("d")
    for level in telemetry.LEVELS:
        telemetry.log(level, "via_log")
    records = capture.records()
    assert [r["level"] for r in records if r["event"] != "via_log"] == written
    assert [r["level"] for r in records if r["event"] == "via_log"] == written
    assert [telemetry.is_enabled(level) for level in telemetry.LEVELS] == [
        level in written for level in telemetry.LEVELS
    ]


def test_req_obs_005_an_unknown_level_is_refused(capture: Capture) -> None:
    with pytest.raises(ValueError, match="log level"):
        telemetry.configure("verbose", stream=capture)
    with pytest.raises(ValueError, match="log level"):
        telemetry.log("warning", "x")
    assert capture.getvalue() == ""


def test_req_obs_005_lines_go_to_the_stderr_of_the_moment_and_never_to_stdout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    telemetry.configure("info")
    try:
        telemetry.info("listening", family="ipv4", callers=2)
    finally:
        telemetry.configure()
    out, err = capsys.readouterr()
    assert out == ""
    assert json.loads(err)["event"] == "listening"


def test_req_obs_005_every_event_of_a_call_has_its_request_id_and_caller(
    capture: Capture,
) -> None:
    async def engine(name: str) -> None:
        await trio.lowlevel.checkpoint()
        telemetry.warn("engine_failed", engine=name, **{"class": "timeout"})

    async def main() -> str:
        with call_scope("ops") as request_id:
            assert current_request_id() == request_id
            assert current_caller() == "ops"
            telemetry.debug("engine_started", engine="wikipedia")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(engine, "brave")
                nursery.start_soon(engine, "wikipedia")
            telemetry.info("call", tool="web_search", outcome="partial")
        return request_id

    request_id = trio.run(main)
    records = capture.records()
    assert [r["event"] for r in records] == [
        "engine_started",
        "engine_failed",
        "engine_failed",
        "call",
    ]
    for record in records:
        assert record["request_id"] == request_id
        assert record["caller"] == "ops"
        # The call's fields come right after the header, before the event's own fields.
        assert list(record)[:5] == ["timestamp", "level", "event", "request_id", "caller"]
    assert {r["engine"] for r in records[1:3]} == {"brave", "wikipedia"}


def test_req_obs_005_events_outside_a_call_have_neither_field(capture: Capture) -> None:
    telemetry.info("listening", callers=0)
    with call_scope("local"):
        telemetry.info("call", tool="engine_status")
    telemetry.info("http_refused", reason="unauthorized")
    assert current_request_id() is None
    assert current_caller() is None
    first, inside, last = capture.records()
    assert "request_id" not in first
    assert "caller" not in first
    assert "request_id" not in last
    assert "caller" not in last
    assert inside["caller"] == "local"


def test_req_obs_005_request_ids_are_time_and_sequence_in_hex_and_differ_per_call() -> None:
    ids = []
    for _ in range(200):
        before = time.time_ns() // 1_000_000
        with call_scope("local") as request_id:
            ids.append(request_id)
        after = time.time_ns() // 1_000_000
        match = re.fullmatch(r"([0-9a-f]{11,})-([0-9a-f]{6,})", request_id)
        assert match is not None
        assert before <= int(match.group(1), 16) <= after
    assert len(set(ids)) == len(ids)
    sequences = [int(i.split("-")[1], 16) for i in ids]
    assert sequences == sorted(sequences)


def test_req_obs_005_a_nested_scope_is_a_call_of_its_own_and_restores_the_outer(
    capture: Capture,
) -> None:
    with call_scope("ops") as outer:
        with call_scope("mimlys") as inner:
            telemetry.info("inner")
        telemetry.info("outer")
    assert outer != inner
    inner_record, outer_record = capture.records()
    assert (inner_record["request_id"], inner_record["caller"]) == (inner, "mimlys")
    assert (outer_record["request_id"], outer_record["caller"]) == (outer, "ops")


async def test_req_obs_005_two_concurrent_calls_keep_their_own_ids(capture: Capture) -> None:
    ids: dict[str, str] = {}

    async def engine(caller: str, step: int) -> None:
        await trio.sleep(0.001 * step)
        telemetry.info("engine_answered", owner=caller, step=step)

    async def one_call(caller: str) -> None:
        with call_scope(caller) as request_id:
            ids[caller] = request_id
            async with trio.open_nursery() as nursery:
                for step in range(5):
                    nursery.start_soon(engine, caller, step)
            telemetry.info("call", owner=caller)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(one_call, "ops")
        nursery.start_soon(one_call, "mimlys")

    records = capture.records()
    owners = [str(r["owner"]) for r in records]
    # The two calls did run at the same time: their lines alternate more than once.
    assert sum(a != b for a, b in itertools.pairwise(owners)) > 1
    assert ids["ops"] != ids["mimlys"]
    for record in records:
        assert record["caller"] == record["owner"]
        assert record["request_id"] == ids[str(record["owner"])]
    for caller in ("ops", "mimlys"):
        mine = [r for r in records if r["request_id"] == ids[caller]]
        assert len(mine) == 6
        assert mine[-1]["event"] == "call"


def test_req_obs_005_a_field_cannot_overwrite_the_header_or_the_call(capture: Capture) -> None:
    fields: dict[str, object] = {
        "timestamp": "forged",
        "level": "error",
        "event": "forged",
        "request_id": "forged",
        "caller": "forged",
    }
    with call_scope("ops") as request_id:
        telemetry.info("call", **fields)
    record = capture.records()[0]
    assert record["level"] == "info"
    assert record["event"] == "call"
    assert record["request_id"] == request_id
    assert record["caller"] == "ops"
    assert record["timestamp"] != "forged"
    assert {record[f"field_{name}"] for name in fields} == {"forged", "error"}


class Chatty:
    """An object whose text is external content: it must never reach the log."""

    def __str__(self) -> str:
        return HIDDEN

    def __repr__(self) -> str:
        return HIDDEN


def test_req_obs_006_an_unserialisable_value_is_written_by_its_type_never_its_text(
    capture: Capture,
) -> None:
    cycle: list[object] = []
    cycle.append(cycle)
    telemetry.info(
        "values",
        chatty=Chatty(),
        body=HIDDEN.encode(),
        nested={"deep": [Chatty()]},
        nan=math.nan,
        cycle=cycle,
        huge=10**5000,
        error=RuntimeError(HIDDEN),
        weird_keys={Chatty(): 1},
        kept=3,
    )
    text = capture.getvalue()
    assert HIDDEN not in text
    record = capture.records()[0]
    assert record["chatty"] == "<Chatty>"
    assert record["body"] == "<bytes>"
    assert record["nested"] == {"deep": ["<Chatty>"]}
    assert record["error"] == {"exception": "RuntimeError"}
    assert record["nan"] == "<unserialisable float>"
    assert record["cycle"] == "<unserialisable list>"
    assert record["huge"] == "<unserialisable int>"
    assert record["weird_keys"] == "<unserialisable dict>"
    assert record["kept"] == 3


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(value=json_values | st.builds(Chatty) | st.binary())
def test_req_obs_005_any_value_gives_exactly_one_parseable_line(value: object) -> None:
    stream = Capture()
    telemetry.configure("info", stream=stream)
    try:
        telemetry.info("any", value=value)
    finally:
        telemetry.configure()
    assert len(stream.writes) == 1
    assert stream.writes[0].endswith("\n")
    assert stream.writes[0].count("\n") == 1
    assert json.loads(stream.writes[0])["event"] == "any"
    assert HIDDEN not in stream.writes[0]


def test_req_obs_005_lines_from_concurrent_threads_are_whole(capture: Capture) -> None:
    def worker(number: int) -> None:
        for index in range(200):
            telemetry.info("tick", worker=number, index=index, padding="x" * 500)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(capture.writes) == 800
    for write in capture.writes:
        assert write.endswith("\n")
        assert write.count("\n") == 1
        json.loads(write)
    records = capture.records()
    for number in range(4):
        assert [r["index"] for r in records if r["worker"] == number] == list(range(200))


class Broken(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.attempts = 0

    def write(self, text: str) -> int:
        self.attempts += 1
        raise BrokenPipeError


def test_req_obs_005_a_closed_or_broken_stderr_does_not_fail_the_caller() -> None:
    closed = io.StringIO()
    closed.close()
    broken = Broken()
    for stream in (broken, closed):
        telemetry.configure("info", stream=stream)
        try:
            telemetry.info("call", outcome="ok")  # returns: the caller's work goes on
            telemetry.info("call", outcome="ok")
        finally:
            telemetry.configure()
    assert broken.attempts >= 1  # the line was really written to the broken stream


def test_req_priv_004_log_query_writes_nothing_at_info(capture: Capture) -> None:
    use(capture, "info", log_queries=True)
    telemetry.log_query("engine_query", "rust borrow checker", engine="wikipedia")
    assert all(r["event"] == "log_queries_enabled" for r in capture.records())
    assert "borrow" not in capture.getvalue()


def test_req_priv_004_log_query_writes_nothing_at_debug_without_log_queries(
    capture: Capture,
) -> None:
    use(capture, "debug", log_queries=False)
    telemetry.log_query("engine_query", "rust borrow checker", engine="wikipedia")
    assert capture.getvalue() == ""


def test_req_priv_004_log_query_writes_the_query_at_debug_with_log_queries(
    capture: Capture,
) -> None:
    use(capture, "debug", log_queries=True)
    with call_scope("local") as request_id:
        telemetry.log_query("engine_query", "rust borrow checker", engine="wikipedia")
    record = capture.records()[-1]
    assert record["event"] == "engine_query"
    assert record["level"] == "debug"
    assert record["query"] == "rust borrow checker"
    assert record["engine"] == "wikipedia"
    assert record["request_id"] == request_id


@pytest.mark.parametrize("level", ["info", "debug"])
def test_req_priv_004_turning_log_queries_on_warns_at_start(capture: Capture, level: str) -> None:
    use(capture, level, log_queries=True)
    (record,) = capture.records()
    assert record["level"] == "warn"
    assert record["event"] == "log_queries_enabled"
    assert record["effective"] is (level == "debug")
    use(capture, level, log_queries=False)
    assert capture.getvalue() == ""


def test_req_obs_005_log_exception_below_the_level_writes_nothing(capture: Capture) -> None:
    use(capture, "error")
    telemetry.log_exception("engine_failed", RuntimeError(HIDDEN), level="warn")
    assert capture.getvalue() == ""
    telemetry.log_exception("engine_failed", RuntimeError(HIDDEN))
    assert [r["exception"] for r in capture.records()] == ["RuntimeError"]


def test_req_priv_004_log_exception_writes_the_type_and_never_the_message(
    capture: Capture,
) -> None:
    try:
        raise ValueError(f"upstream said: {HIDDEN}")
    except ValueError as exc:
        telemetry.log_exception("engine_failed", exc, engine="brave")
    group = ExceptionGroup(
        HIDDEN, [KeyError(HIDDEN), ExceptionGroup("inner", [trio.TooSlowError(HIDDEN)])]
    )
    telemetry.log_exception("aggregate_failed", group, level="warn")
    text = capture.getvalue()
    assert HIDDEN not in text
    assert "Traceback" not in text
    assert "upstream" not in text
    single, grouped = capture.records()
    assert single["level"] == "error"
    assert single["exception"] == "ValueError"
    assert single["engine"] == "brave"
    assert grouped["level"] == "warn"
    assert grouped["exception"] == "ExceptionGroup"
    assert grouped["inner"] == ["KeyError", "trio.TooSlowError"]


def test_req_priv_004_uncaught_exceptions_become_one_line_without_message(
    capture: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    telemetry.install_excepthook()

    try:
        raise RuntimeError(HIDDEN)
    except RuntimeError as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)

    def fails() -> None:
        raise LookupError(HIDDEN)

    thread = threading.Thread(target=fails)
    thread.start()
    thread.join()
    quiet = threading.Thread(target=sys.exit)
    quiet.start()
    quiet.join()

    class Finaliser:
        def __del__(self) -> None:
            raise OSError(HIDDEN)

    Finaliser()

    text = capture.getvalue()
    assert HIDDEN not in text
    assert "Traceback" not in text
    records = capture.records()
    assert [(r["event"], r["where"], r["exception"]) for r in records] == [
        ("uncaught_exception", "main", "RuntimeError"),
        ("uncaught_exception", "thread", "LookupError"),
        ("uncaught_exception", "unraisable", "OSError"),
    ]
    assert all(r["level"] == "error" for r in records)


def test_req_sec_020_a_secret_prints_as_redacted_everywhere(capture: Capture) -> None:
    secret = Secret(HIDDEN)
    assert repr(secret) == "[redacted]"
    assert str(secret) == "[redacted]"
    assert f"{secret}" == "[redacted]"
    assert f"{secret!r:>12}" == "  [redacted]"
    assert "%s %r" % (secret, secret) == "[redacted] [redacted]"  # noqa: UP031
    assert HIDDEN not in repr({"token": secret, "list": [secret]})
    assert secret.reveal() == HIDDEN
    with pytest.raises(TypeError):
        json.dumps({"token": secret})
    telemetry.info("configured", token=secret, nested={"tokens": [secret]})
    record = capture.records()[0]
    assert record["token"] == "[redacted]"
    assert record["nested"] == {"tokens": ["[redacted]"]}
    assert HIDDEN not in capture.getvalue()


def test_req_sec_020_a_secret_compares_by_value_and_cannot_change() -> None:
    secret = Secret(HIDDEN)
    assert secret == Secret(HIDDEN)
    assert secret != Secret(HIDDEN + "x")
    assert secret != HIDDEN
    assert hash(secret) == hash(Secret(HIDDEN))
    assert len({secret, Secret(HIDDEN)}) == 1
    with pytest.raises(AttributeError):
        secret._value = "other"
    with pytest.raises(TypeError):
        Secret(b"bytes")  # type: ignore[arg-type]
    assert secret.reveal() == HIDDEN


def test_req_obs_007_refused_calls_are_counted_per_tool_and_reason() -> None:
    counters = Counters()
    counters.refused("web_search", "invalid_request")
    counters.refused("web_search", "invalid_request")
    counters.refused("web_search", Reason.RATE_LIMITED)
    counters.refused("web_fetch", "denied")
    counters.http_refused("unauthorized")
    snapshot = counters.snapshot()
    assert snapshot == {
        "tools": {
            "web_fetch": {"denied": 1},
            "web_search": {"invalid_request": 2, "rate_limited": 1},
        },
        "http": {"unauthorized": 1},
        "engines": {},
        "errors": {},
        "coordination_unavailable": 0,
        "log_lines_dropped": 0,
    }
    # A copy: changing it leaves the counts alone.
    snapshot["tools"]["web_search"]["invalid_request"] = 99
    snapshot["http"].clear()
    assert counters.snapshot()["tools"]["web_search"]["invalid_request"] == 2
    assert counters.snapshot()["http"] == {"unauthorized": 1}


def test_req_obs_003_engine_failures_by_class_and_call_errors_by_kind_are_counted() -> None:
    counters = Counters()
    counters.engine_failed("wikipedia", Reason.BLOCKED)
    counters.engine_failed("wikipedia", Reason.BLOCKED)
    counters.engine_failed("wikipedia", Reason.TIMEOUT)
    counters.engine_failed("brave", "auth_failure")
    counters.call_error("web_search", "unavailable")
    counters.call_error("web_search", "invalid_request")
    counters.call_error("engine_status", "unavailable")
    counters.refused("web_search", "invalid_request")
    snapshot = counters.snapshot()
    assert snapshot["engines"] == {
        "brave": {"auth_failure": 1},
        "wikipedia": {"blocked": 2, "timeout": 1},
    }
    assert snapshot["errors"] == {
        "engine_status": {"unavailable": 1},
        "web_search": {"invalid_request": 1, "unavailable": 1},
    }
    # Refusals are counted apart: an error count does not change them.
    assert snapshot["tools"] == {"web_search": {"invalid_request": 1}}
    # A copy: changing it leaves the counts alone.
    snapshot["engines"]["wikipedia"]["blocked"] = 99
    snapshot["errors"].clear()
    again = counters.snapshot()
    assert again["engines"]["wikipedia"]["blocked"] == 2
    assert again["errors"]["web_search"] == {"invalid_request": 1, "unavailable": 1}
    counters.reset()
    assert counters.snapshot() == {
        "tools": {},
        "http": {},
        "engines": {},
        "errors": {},
        "coordination_unavailable": 0,
        "log_lines_dropped": 0,
    }


async def test_req_obs_003_the_minute_event_carries_engine_failures_and_call_errors(
    capture: Capture, autojump_clock: trio.testing.MockClock
) -> None:
    use(capture, "info")
    counters = Counters()
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(run_counters_reporter, 60.0, counters=counters))
        counters.engine_failed("brave", "rate_limited")
        counters.call_error("web_search", "unavailable")
        await trio.sleep(60.001)
        counters.engine_failed("brave", "rate_limited")
        await trio.sleep(60)
        nursery.cancel_scope.cancel()
    first, second = capture.records()
    assert first["engine_failures"] == {"brave": {"rate_limited": 1}}
    assert first["call_errors"] == {"web_search": {"unavailable": 1}}
    assert first["refusals"] == {"tools": {}, "http": {}}
    assert second["engine_failures"] == {"brave": {"rate_limited": 2}}


def test_req_obs_007_the_process_counters_count_from_any_thread() -> None:
    COUNTERS.reset()
    try:

        def refuse() -> None:
            for _ in range(1000):
                COUNTERS.refused("engine_status", "rate_limited")

        threads = [threading.Thread(target=refuse) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert COUNTERS.snapshot()["tools"] == {"engine_status": {"rate_limited": 4000}}
    finally:
        COUNTERS.reset()


async def test_req_obs_007_the_reporter_logs_the_counts_every_interval(
    capture: Capture, autojump_clock: trio.testing.MockClock
) -> None:
    use(capture, "info")
    counters = Counters()
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(run_counters_reporter, 60.0, counters=counters))
        start = trio.current_time()
        counters.refused("web_search", "invalid_request")
        await trio.sleep(59.999)
        assert capture.getvalue() == ""
        await trio.sleep(0.002)
        first = capture.records()
        assert len(first) == 1
        assert first[0]["event"] == "counters"
        assert first[0]["level"] == "info"
        assert first[0]["refusals"] == {"tools": {"web_search": {"invalid_request": 1}}, "http": {}}
        counters.http_refused("body_too_large")
        await trio.sleep_until(start + 180.001)
        records = capture.records()
        assert len(records) == 3
        assert records[2]["refusals"] == {
            "tools": {"web_search": {"invalid_request": 1}},
            "http": {"body_too_large": 1},
        }
        nursery.cancel_scope.cancel()
    assert len(capture.records()) == 3
    assert "request_id" not in capture.records()[0]


async def test_req_obs_007_the_reporter_refuses_a_non_positive_interval() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        await run_counters_reporter(0)


_PLAIN_VALUES = st.one_of(
    st.text(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)


@given(fields=st.dictionaries(st.text(min_size=1), _PLAIN_VALUES, max_size=8))
@settings(max_examples=300, deadline=None)
def test_req_obs_005_a_line_of_plain_values_is_the_json_encoders_line(
    fields: dict[str, object],
) -> None:
    """Strings (any code point, lone surrogates included), integers, finite floats, booleans
    and null: one ASCII line, exactly as the standard encoder writes the same object."""
    stream = io.StringIO()
    telemetry.configure("info", stream=stream)
    try:
        with telemetry.call_scope("ops"):
            telemetry.info("plain", **fields)
    finally:
        telemetry.configure()
    line = stream.getvalue()
    assert line.endswith("\n")
    assert line.count("\n") == 1
    assert line.isascii()
    record = json.loads(line)
    assert line[:-1] == json.dumps(record, ensure_ascii=True)
    assert record["event"] == "plain"
    assert record["caller"] == "ops"
    for name, value in fields.items():
        key = (
            f"field_{name}"
            if name in {"timestamp", "level", "event", "request_id", "caller"}
            else name
        )
        assert record[key] == value


@pytest.mark.parametrize(
    "value", [math.nan, math.inf, -math.inf, 10**5000], ids=["nan", "inf", "-inf", "huge"]
)
def test_req_obs_005_a_value_json_cannot_carry_costs_its_field_only(value: object) -> None:
    stream = io.StringIO()
    telemetry.configure("info", stream=stream)
    try:
        telemetry.info("odd", bad=value, good="kept")
    finally:
        telemetry.configure()
    record = json.loads(stream.getvalue())
    assert record["good"] == "kept"
    assert record["bad"] == f"<unserialisable {type(value).__name__}>"
