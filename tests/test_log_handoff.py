"""The loop's log lines reach the writer thread when the loop waits (issue 19): a call's
line is handed over after its answer, never lost, and other threads' lines go at once."""

from __future__ import annotations

import io
import json
import threading
from typing import TYPE_CHECKING, cast

import trio

from rypsok.core import telemetry
from rypsok.core.telemetry import _log
from rypsok.core.telemetry._writer import BackgroundWriter, LoopHandoff

if TYPE_CHECKING:
    from collections.abc import Iterator


class _Recorder:
    """Stands in for the writer thread: what was handed over, in order."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def put(self, line: str) -> None:
        self.lines.append(line)


def _handoff(max_lines: int = 64) -> tuple[LoopHandoff, _Recorder]:
    recorder = _Recorder()
    return LoopHandoff(cast("BackgroundWriter", recorder), max_lines=max_lines), recorder


async def test_req_obs_005_a_line_logged_while_the_loop_is_busy_waits_until_it_idles() -> None:
    handoff, recorder = _handoff()
    trio.lowlevel.add_instrument(handoff)
    try:
        assert handoff.hold("first\n")
        # Runnable work left: the loop polls without waiting, and the line stays.
        await trio.lowlevel.checkpoint()
        await trio.lowlevel.checkpoint()
        assert recorder.lines == []
        assert handoff.hold("second\n")
        # Nothing runnable: the loop waits for the deadline, and both go, in order.
        await trio.sleep(0.01)
        assert recorder.lines == ["first\n", "second\n"]
    finally:
        trio.lowlevel.remove_instrument(handoff)


async def test_req_obs_005_a_busy_loop_hands_its_lines_over_at_the_bound() -> None:
    handoff, recorder = _handoff(max_lines=3)
    handoff.hold("a\n")
    handoff.hold("b\n")
    assert recorder.lines == []
    handoff.hold("c\n")
    assert recorder.lines == ["a\n", "b\n", "c\n"]


async def test_req_obs_005_a_worker_threads_line_is_not_held() -> None:
    handoff, recorder = _handoff()
    held = await trio.to_thread.run_sync(handoff.hold, "from a thread\n")
    assert held is False
    assert recorder.lines == []  # the caller puts it on the writer itself


def _lines(text: str) -> Iterator[dict[str, object]]:
    for raw in text.splitlines():
        yield json.loads(raw)


def test_req_obs_005_every_line_of_the_loop_is_written_with_the_hand_over() -> None:
    stream = io.StringIO()
    previous = _log._settings
    writer = BackgroundWriter(lambda: stream, lambda count, total: "", lambda count: None)
    _log._settings = _log._Settings(
        rank=_log._RANK["info"], log_queries=False, stream=stream, writer=writer
    )
    try:

        async def serve() -> None:
            with telemetry.lines_when_idle():
                telemetry.info("during_a_call", n=1)
                await trio.sleep(0.01)  # the loop waits: handed over
                assert writer.flush(5)
                assert [x["event"] for x in _lines(stream.getvalue())] == ["during_a_call"]
                telemetry.info("just_before_the_end", n=2)
            # Leaving hands over what is still kept.

        trio.run(serve)
        other = threading.Thread(target=telemetry.info, args=("after_the_run",))
        other.start()
        other.join()
        assert writer.flush(5)
    finally:
        _log._settings = previous
    events = [x["event"] for x in _lines(stream.getvalue())]
    assert events == ["during_a_call", "just_before_the_end", "after_the_run"]
