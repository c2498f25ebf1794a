"""The HTTP refusals of one listener, counted always and the logged reasons written in
aggregate: the first at once, those after it in one line with their count per interval.
"""

from __future__ import annotations

import errno
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
        "session_share",
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
    whatever its rate (never the address, never a header value). A connection ended by an
    error of its peer's socket is written the same way (`connection_failed`)."""

    def __init__(self) -> None:
        self._lines = telemetry.AggregatedLines(
            REFUSAL_LOG_INTERVAL_S, lambda fields: telemetry.info("http_refused", **fields)
        )
        self._failures = telemetry.AggregatedLines(
            REFUSAL_LOG_INTERVAL_S, lambda fields: telemetry.warn("connection_failed", **fields)
        )

    def refuse(self, reason: str, family: str) -> None:
        telemetry.COUNTERS.http_refused(reason)
        if reason not in LOGGED_REASONS:
            return
        fields = {"reason": reason, "family": family}
        self._lines.note((reason, family), trio.current_time(), fields)

    def connection_failed(self, exc: OSError, family: str) -> None:
        """A connection ended by an error of its socket (`EBADF`, `ENOTCONN` ...): that
        connection's end only, written in aggregate per error and family."""
        error = errno.errorcode.get(exc.errno or 0, "OSError")
        fields = {"error": error, "family": family}
        self._failures.note((error, family), trio.current_time(), fields)

    def flush(self, *, final: bool = False) -> None:
        """The line of each reason whose interval has ended with refusals not yet logged
        (`final`: all of them, at the shutdown)."""
        now = trio.current_time()
        self._lines.flush(now, final=final)
        self._failures.flush(now, final=final)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write the aggregated lines as their intervals end (beside the listener)."""
        task_status.started()
        while True:
            await trio.sleep(REFUSAL_LOG_INTERVAL_S)
            self.flush()
