"""The systemd notification protocol (sd_notify): one datagram to `$NOTIFY_SOCKET`.

`READY=1` once the listener accepts, `WATCHDOG=1` from the event loop at a third of the
unit's `WatchdogSec` (a loop that stops turning stops sending, and systemd restarts the
service), `STOPPING=1` when the graceful stop begins. Without `NOTIFY_SOCKET` nothing is
sent: a process outside systemd (a terminal, a container) is not affected. The socket is a
path or, written with a leading "@", an abstract name; any other address (vsock) is not
used. A send that fails is logged once and never stops serving.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Final

import trio

from rypsok.core import telemetry

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["READY", "STOPPING", "WATCHDOG", "Notifier"]

READY: Final = b"READY=1"
WATCHDOG: Final = b"WATCHDOG=1"
STOPPING: Final = b"STOPPING=1"
_UINT64_DIGITS: Final = 20


class Notifier:
    """The service manager's socket as the environment names it, or nothing to notify."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._address = _address(env.get("NOTIFY_SOCKET", ""))
        self._interval_s = _watchdog_interval(env)
        self._failed = False

    @property
    def active(self) -> bool:
        return self._address is not None

    def notify(self, state: bytes) -> bool:
        """Send one datagram; True when it left. Non-blocking: a full queue drops it."""
        if self._address is None:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.setblocking(False)
                sock.sendto(state, self._address)
        except OSError as exc:
            if not self._failed:
                self._failed = True
                telemetry.log_exception("notify_failed", exc, level="warn")
            return False
        return True

    async def run_watchdog(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Send WATCHDOG=1 at a third of `WATCHDOG_USEC` until cancelled; returns at once
        when the unit asks for no watchdog."""
        task_status.started()
        if self._address is None or self._interval_s is None:
            return
        while True:
            self.notify(WATCHDOG)
            await trio.sleep(self._interval_s)


def _address(value: str) -> str | bytes | None:
    if value.startswith("/"):
        return value
    if value.startswith("@") and len(value) > 1:
        return b"\0" + value[1:].encode("utf-8", "surrogateescape")
    return None


def _watchdog_interval(env: Mapping[str, str]) -> float | None:
    """A third of WATCHDOG_USEC in seconds, when it is set for this process."""
    usec = _decimal(env.get("WATCHDOG_USEC", ""))
    pid = env.get("WATCHDOG_PID", "")
    if not usec:
        return None
    if pid and _decimal(pid) != os.getpid():
        return None  # meant for another process (the one that started this one)
    return usec / 1_000_000 / 3


def _decimal(value: str) -> int | None:
    """`value` as the manager writes a number: ASCII digits, within a uint64 (20 digits).
    Anything else (a digit of another script, which `int` reads or refuses, or a number no
    manager writes) is None, so that a stray variable never stops the process."""
    if not value.isascii() or not value.isdigit() or len(value) > _UINT64_DIGITS:
        return None
    return int(value)
