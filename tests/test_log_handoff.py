"""A call's log lines reach the writer thread after its answer (issue 19): held on the loop's
thread while calls are answered, handed over in order, never lost; other threads' lines and
lines logged between calls go at once."""

from __future__ import annotations

import io
import json
import threading
from typing import TYPE_CHECKING, cast

import trio

from rypsok.core import telemetry
from rypsok.core.telemetry import _log
from rypsok.core.telemetry._writer import BackgroundWriter, HeldLines

if TYPE_CHECKING:
    from collections.abc import Iterator


class _Recorder:
    """Stands in for the writer thread: what was handed over, in order."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def put(self, line: str) -> None:
        self.lines.append(line)


def _held(max_lines: int = 64) -> tuple[HeldLines, _Recorder]:
    recorder = _Recorder()
    return HeldLines(cast("BackgroundWriter", recorder), max_lines=max_lines), recorder


def test_req_obs_005_a_calls_lines_wait_until_the_last_call_in_flight_is_answered() -> None:
    held, recorder = _held()
    assert held.hold("between calls\n") is False  # no call: the caller writes it at once
    held.call_started()
    held.call_started()
    assert held.hold("first\n")
    held.call_ended()  # another call is still being answered
    assert held.hold("second\n")
    assert recorder.lines == []
    held.call_ended()
    assert recorder.lines == ["first\n", "second\n"]
    assert held.hold("after\n") is False


def test_req_obs_005_a_loop_never_without_a_call_hands_its_lines_over_at_the_bound() -> None:
    held, recorder = _held(max_lines=3)
    held.call_started()
    held.hold("a\n")
    held.hold("b\n")
    assert recorder.lines == []
    held.hold("c\n")
    assert recorder.lines == ["a\n", "b\n", "c\n"]


async def test_req_obs_005_a_worker_threads_line_is_not_held() -> None:
    held, recorder = _held()
    held.call_started()
    kept = await trio.to_thread.run_sync(held.hold, "from a thread\n")
    assert kept is False
    assert recorder.lines == []  # the caller puts it on the writer itself


def _events(text: str) -> Iterator[object]:
    for raw in text.splitlines():
        yield json.loads(raw)["event"]


def test_req_obs_005_every_line_is_written_after_the_answers_and_none_is_lost() -> None:
    stream = io.StringIO()
    previous = _log._settings
    writer = BackgroundWriter(lambda: stream, lambda count, total: "", lambda count: None)
    _log._settings = _log._Settings(
        rank=_log._RANK["info"], log_queries=False, stream=stream, writer=writer
    )
    try:

        async def serve() -> None:
            with telemetry.lines_after_answers():
                telemetry.info("before_any_call")
                with telemetry.answering():
                    telemetry.info("during_a_call")
                    assert writer.flush(5)
                    # Only the line logged outside the call has reached the stream.
                    assert list(_events(stream.getvalue())) == ["before_any_call"]
                    with telemetry.answering():
                        telemetry.info("in_a_second_call")
                    telemetry.info("still_in_the_first")
                assert writer.flush(5)
                assert list(_events(stream.getvalue()))[1:] == [
                    "during_a_call",
                    "in_a_second_call",
                    "still_in_the_first",
                ]
                cut = telemetry.answering()
                cut.__enter__()
                telemetry.info("left_held_when_serving_ends")
            # Leaving hands over what is still kept.

        trio.run(serve)
        other = threading.Thread(target=telemetry.info, args=("from_a_thread",))
        other.start()
        other.join()
        assert writer.flush(5)
    finally:
        _log._settings = previous
    assert list(_events(stream.getvalue()))[-2:] == [
        "left_held_when_serving_ends",
        "from_a_thread",
    ]
