"""The HTTP refusals of one listener, counted always and the logged reasons written in
aggregate: the first at once, those after it in one line with their count per interval.
"""

from __future__ import annotations

from typing import Final

import trio

from rypsok.core import telemetry

__all__ = ["LOGGED_REASONS", "REFUSAL_LOG_INTERVAL_S", "RefusalLog"]

# Reasons counted under `http` in the counters event; the logged ones also get lines, in
# aggregate (`refuse`).
LOGGED_REASONS: Final = frozenset(
    {
        "too_many_connections",
        "body_too_large",
        "unauthorized",
        "request_timeout",
        "session_limit",
        "sdk_forbidden",
        "caller_share",
    }
)
# One `http_refused` line per reason and address family per interval: the first
# refusal at once, those after it in one line with their count when the interval ends.
REFUSAL_LOG_INTERVAL_S: Final = 10.0


class RefusalLog:
    """The refusals of one listener: counted, always; the logged reasons written in
    aggregate, so that a flood writes two lines per reason and family per interval at most,
    whatever its rate (never the address, never a header value)."""

    def __init__(self) -> None:
        self._logged_at: dict[tuple[str, str], float] = {}
        self._pending: dict[tuple[str, str], int] = {}

    def refuse(self, reason: str, family: str) -> None:
        telemetry.COUNTERS.http_refused(reason)
        if reason not in LOGGED_REASONS:
            return
        key = (reason, family)
        now = trio.current_time()
        last = self._logged_at.get(key)
        if last is None or now - last >= REFUSAL_LOG_INTERVAL_S:
            self._logged_at[key] = now
            count = self._pending.pop(key, 0) + 1
            telemetry.info("http_refused", reason=reason, family=family, count=count)
        else:
            self._pending[key] = self._pending.get(key, 0) + 1

    def flush(self, *, final: bool = False) -> None:
        """The line of each reason whose interval has ended with refusals not yet logged
        (`final`: all of them, at the shutdown)."""
        now = trio.current_time()
        for key, count in list(self._pending.items()):
            if final or now - self._logged_at[key] >= REFUSAL_LOG_INTERVAL_S:
                del self._pending[key]
                self._logged_at[key] = now
                telemetry.info("http_refused", reason=key[0], family=key[1], count=count)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write the aggregated lines as their intervals end (beside the listener)."""
        task_status.started()
        while True:
            await trio.sleep(REFUSAL_LOG_INTERVAL_S)
            self.flush()
