"""The loopback guard of conftest.py is in force (REQ-MAIN-005: testable without a network)."""

from __future__ import annotations

import socket

import httpx
import pytest
from conftest import NetworkRefused


def test_req_main_005_a_name_lookup_off_loopback_is_refused() -> None:
    with pytest.raises(NetworkRefused):
        socket.getaddrinfo("api.search.brave.com", 443)


def test_req_main_005_a_connection_off_loopback_is_refused() -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(NetworkRefused):
            s.connect(("192.0.2.1", 443))
    finally:
        s.close()


async def test_req_main_005_a_trio_http_client_cannot_leave_loopback() -> None:
    async with httpx.AsyncClient(trust_env=False) as client:
        with pytest.raises((httpx.ConnectError, NetworkRefused)):
            await client.get("https://en.wikipedia.org/")
