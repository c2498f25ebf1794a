"""In-memory engines and configurations for the search tests (no socket, MockClock-safe)."""

from __future__ import annotations

import io
import json
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from rypsok.config.schema import (
    Config,
    EngineConfig,
    LimitsConfig,
    PrivacyConfig,
    ResilienceConfig,
    SearchConfig,
)
from rypsok.core import telemetry
from rypsok.core.engines.base import (
    AdmissionRecord,
    EngineAnswer,
    EngineFailure,
    EngineQuery,
    RawResult,
)
from rypsok.core.model import Category, Reason, TimeRange

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

RECORD = AdmissionRecord(
    rate_per_minute=6000,
    burst=100,
    concurrency=8,
    max_query_chars=600,
    max_query_words=None,
    languages_all=True,
    time_ranges=frozenset(TimeRange),
    cacheable=True,
    attribution_required=False,
    response_max_bytes=1 << 20,
    needs_credential=False,
    scrapes=False,
)


def results(prefix: str, count: int, *, host: str = "example.org") -> tuple[RawResult, ...]:
    return tuple(
        RawResult(
            title=f"{prefix} title {i}",
            url=f"https://{host}/{prefix}/{i}",
            snippet=f"{prefix} snippet {i}",
        )
        for i in range(1, count + 1)
    )


class FakeEngine:
    """An engine that answers after `delay_s` on the Trio clock, or fails as told."""

    def __init__(
        self,
        engine_id: str,
        answer: Sequence[RawResult] | Any = (),
        *,
        delay_s: float = 0.0,
        failure: Reason | None = None,
        retry_after_s: float | None = None,
        error: BaseException | None = None,
        record: AdmissionRecord = RECORD,
        raw_answer: bool = False,
    ) -> None:
        self._id = engine_id
        self._answer = answer
        self.delay_s = delay_s
        self.failure = failure
        self.retry_after_s = retry_after_s
        self.error = error
        self._record = record
        self._raw_answer = raw_answer
        self.queries: list[EngineQuery] = []
        self.active = 0
        self.max_active = 0
        self.cancelled = 0
        self.finished = 0

    @property
    def id(self) -> str:
        return self._id

    @property
    def record(self) -> AdmissionRecord:
        return self._record

    async def search(self, query: EngineQuery) -> EngineAnswer:
        self.queries.append(query)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await trio.sleep(self.delay_s)
        except trio.Cancelled:
            self.cancelled += 1
            raise
        finally:
            self.active -= 1
        self.finished += 1
        if self.error is not None:
            raise self.error
        if self.failure is not None:
            raise EngineFailure(failure_class=self.failure, retry_after_s=self.retry_after_s)
        if self._raw_answer:
            return self._answer  # type: ignore[no-any-return]
        return EngineAnswer(results=tuple(self._answer))


def engine_config(
    engine_id: str, *, preference: int = 100, categories: Sequence[Category] = (Category.GENERAL,)
) -> EngineConfig:
    return EngineConfig(
        id=engine_id, type="wikipedia", categories=tuple(categories), preference=preference
    )


def make_config(
    *engines: EngineConfig,
    search: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    privacy: str = "refuse",
    resilience: dict[str, Any] | None = None,
) -> Config:
    return Config(
        search=SearchConfig(**(search or {})),
        limits=LimitsConfig(**(limits or {})),
        privacy=PrivacyConfig(secret_detection=privacy),
        resilience=ResilienceConfig(**(resilience or {})),
        engines=engines,
    )


@attrs.define
class LogCapture:
    stream: io.StringIO

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stream.getvalue().splitlines() if line]

    def named(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events() if e.get("event") == event]

    @property
    def text(self) -> str:
        return self.stream.getvalue()


@contextmanager
def capture_logs(level: str = "info") -> Iterator[LogCapture]:
    stream = io.StringIO()
    telemetry.configure(level, stream=stream)
    try:
        yield LogCapture(stream)
    finally:
        telemetry.configure()


def live_tasks() -> int:
    """Tasks alive in this Trio run, the root's whole tree."""
    count = 0
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        count += 1
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return count
