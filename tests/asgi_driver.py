"""The HTTP app (`McpHttpApp`) driven as ASGI, without a socket: for the tests of its gate and
its sessions on Trio's MockClock, where a real connection's time would not jump."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio
from http_helpers import ACCEPT

from rypsok.core.services import Rypsok
from rypsok.mcp.caller_tokens import Callers
from rypsok.mcp.http_app import McpHttpApp
from testkit.instant import InstantEngine

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from rypsok.config.schema import Config


@attrs.frozen
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


@asynccontextmanager
async def app_of(
    config: Config, env: Mapping[str, str] | None = None, *, session_ttl_s: float = 300.0
) -> AsyncIterator[McpHttpApp]:
    """The app of `config`, with an instant engine, for the length of the block."""
    env = env or {}
    async with Rypsok(config, env=env, engines=[InstantEngine("wikipedia")]) as rypsok:
        yield McpHttpApp(
            rypsok, config, Callers.from_config(config, env), session_ttl_s=session_ttl_s
        )


async def post(app: McpHttpApp, body: bytes, token: str | None = None, **more: str) -> Answer:
    """One POST /mcp through the app, as HTTP/1.1 from a loopback client."""
    headers = {"host": "127.0.0.1", "accept": ACCEPT, "content-type": "application/json"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    headers.update({k.lower(): v for k, v in more.items()})
    headers["content-length"] = str(len(body))
    scope: dict[str, Any] = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 40000),
    }
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    answer_body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    answer_headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return Answer(start["status"], answer_headers, answer_body)
