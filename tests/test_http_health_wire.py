"""The health probes at the wire, as an outside prober sends them (REQ-DEP-002).

A `HEAD` is answered with the head a `GET` would have (RFC 9110 §9.3.2): the same
`Content-Length` (§8.6: a HEAD answer MUST NOT send another) and `Content-Type`, and no body
on the wire, over HTTP/1.1 and h2c alike.
"""

from __future__ import annotations

from typing import Any

import httpx
import trio
from http_helpers import CALLERS, CALLERS_ENV, serving

from rypsok.config.load import load_config_text

GUARDED = (
    'config_version = 1\n[service.http]\nallowed_hosts = ["rypsok.example"]\n'
    + CALLERS
    + '[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general"]\n'
)


def _config() -> Any:
    return load_config_text(GUARDED, CALLERS_ENV)


async def _exchange(port: int, request: bytes) -> bytes:
    """Everything the listener sends for `request` (which asks it to close) until it closes."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(request)
        received = bytearray()
        with trio.fail_after(10):
            while chunk := await stream.receive_some(65536):
                received += chunk
    return bytes(received)


def _head_and_body(answer: bytes) -> tuple[dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return fields, body


async def test_req_dep_002_a_head_probe_gets_the_head_a_get_would_have() -> None:
    async with serving(_config(), CALLERS_ENV) as server:
        for path in (b"/healthz", b"/readyz"):
            got = await _exchange(
                server.port,
                b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            )
            head = await _exchange(
                server.port,
                b"HEAD " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            )
            get_fields, get_body = _head_and_body(got)
            head_fields, head_body = _head_and_body(head)
            assert head.startswith(b"HTTP/1.1 200")
            assert get_fields["content-length"] == str(len(get_body)) != "0"
            assert head_fields["content-length"] == get_fields["content-length"]
            assert head_fields["content-type"] == get_fields["content-type"] == "application/json"
            assert head_fields["cache-control"] == "no-store"
            assert head_body == b""  # the head only: no body on the wire


async def test_req_dep_002_a_head_probe_over_h2c_gets_the_head_a_get_would_have() -> None:
    async with (
        serving(_config(), CALLERS_ENV) as server,
        httpx.AsyncClient(http1=False, http2=True) as client,
    ):
        url = f"http://127.0.0.1:{server.port}/readyz"
        got = await client.get(url)
        head = await client.head(url)
    assert head.http_version == "HTTP/2"
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-length"] == str(len(got.content)) == "18"
    assert head.headers["content-type"] == "application/json"
