"""Test-wide guard: tests may reach loopback only (127.0.0.0/8 and ::1).

Every engine and site in a test is a local server the test starts. This guard turns an
accidental connection or name lookup towards anything else into an immediate failure, so a
test that forgot to replace a real driver fails loudly instead of contacting a provider.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import threading
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


class NetworkRefused(OSError):
    """Raised when a test tries to leave the machine."""


def _is_loopback_host(host: object) -> bool:
    if host is None:
        return True  # a passive lookup for a listener
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.strip("[]").split("%", 1)[0]
    if name.lower() in _LOOPBACK_NAMES or name == "":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _check_address(family: int, address: Any) -> None:
    if family in (socket.AF_INET, socket.AF_INET6):
        host = address[0] if isinstance(address, tuple) else address
        if not _is_loopback_host(host):
            raise NetworkRefused(f"test tried to connect off loopback (family {family})")


@pytest.fixture(autouse=True)
def _fresh_tool_refusals() -> None:
    """The aggregation of tool refusals is process-wide: each test starts it afresh (its
    trio run's clock is not the last test's). Nothing is imported for a test that has not
    loaded rypsok yet."""
    log = sys.modules.get("rypsok.core.telemetry._log")
    if log is not None:
        log.TOOL_REFUSALS.reset()


@pytest.fixture(autouse=True, scope="session")
def _loopback_only() -> Iterator[None]:
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex
    original_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> None:
        _check_address(self.family, address)
        original_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _check_address(self.family, address)
        return original_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_loopback_host(host):
            raise NetworkRefused("test tried to resolve a name that is not loopback")
        return original_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = getaddrinfo
    try:
        yield
    finally:
        socket.socket.connect = original_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = original_connect_ex  # type: ignore[method-assign]
        socket.getaddrinfo = original_getaddrinfo


@pytest.fixture
def keep_exception_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Puts back the process's exception hooks after a test that runs cli.main.

    cli.main installs the JSON hooks for the process it starts; in a test that process is
    pytest's own, whose later failures must still be reported the usual way.
    """
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
