"""Running the HTTP listener in the test's own Trio run, on a loopback port, with fast engines.

Every test talks to it over a real socket: httpx for ordinary requests, raw streams for what
no well-behaved client sends (silence, trickles, oversized headers), h2 for HTTP/2 frames.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs
import httpx
import trio

from rypsok.config.load import load_config_text
from rypsok.config.metrics import metrics_token
from rypsok.core import telemetry
from rypsok.core.services import Rypsok
from rypsok.mcp.caller_tokens import Callers
from rypsok.mcp.listener import Listener, serve_http
from testkit.instant import ANSWER, InstantEngine

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping

    from rypsok.config.schema import Config
    from rypsok.core.engines.base import EngineAnswer, EngineQuery


MODERN = "2026-07-28"
TOKEN_A = "token-of-caller-a-0123456789abcdef-AAAA"
TOKEN_B = "token-of-caller-b-0123456789abcdef-BBBB"
CALLERS_ENV = {"RYPSOK_TOKEN_A": TOKEN_A, "RYPSOK_TOKEN_B": TOKEN_B}
CALLERS = """\
[[service.http.auth.callers]]
id = "alpha"
token_env = "RYPSOK_TOKEN_A"
[[service.http.auth.callers]]
id = "beta"
token_env = "RYPSOK_TOKEN_B"
"""
ENGINES = """
[engines.wikipedia]
type = "wikipedia"
categories = ["general", "science"]
"""
ACCEPT = "application/json, text/event-stream"


def make_config(extra: str = "", env: Mapping[str, str] | None = None, **http: Any) -> Config:
    """A validated configuration; `http` then sets [service.http] values directly, for the
    timing tests that need a bound shorter than an operator may configure."""
    config = load_config_text("config_version = 1\n" + extra + ENGINES, env or {})
    if http:
        service = attrs.evolve(config.service, http=attrs.evolve(config.service.http, **http))
        config = attrs.evolve(config, service=service)
    return config


class SlowEngine(InstantEngine):
    """Answers after `delay_s`, or never when it is None: a call that stays in flight."""

    def __init__(self, engine_id: str, delay_s: float | None) -> None:
        super().__init__(engine_id)
        self.delay_s = delay_s
        self.started = trio.Event()
        self.cancelled = trio.Event()

    async def search(self, query: EngineQuery) -> EngineAnswer:
        self.started.set()
        try:
            await trio.sleep(self.delay_s if self.delay_s is not None else 3600)
        except trio.Cancelled:
            self.cancelled.set()
            raise
        return ANSWER


@attrs.define
class Server:
    port: int
    listener: Listener
    stop: trio.Event

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"


@asynccontextmanager
async def serving(
    config: Config,
    env: Mapping[str, str] | None = None,
    *,
    engine: InstantEngine | None = None,
    session_ttl_s: float = 300.0,
    listen_socket: Any = None,
    counters_interval_s: float = 60.0,
    trim: Callable[[], object] | None = None,
) -> AsyncIterator[Server]:
    env = env or {}
    engines = [engine if engine is not None else InstantEngine("wikipedia")]
    async with (
        trio.open_nursery() as nursery,
        Rypsok(config, env=env, engines=engines) as rypsok,
    ):
        stop = trio.Event()
        start = partial(
            serve_http,
            rypsok,
            config,
            Callers.from_config(config, env),
            stop=stop,
            port=0 if listen_socket is None else None,
            session_ttl_s=session_ttl_s,
            listen_socket=listen_socket,
            counters_interval_s=counters_interval_s,
            trim=trim,
            metrics_token=metrics_token(config, env),
        )
        port, listener = await nursery.start(start)
        try:
            yield Server(port=port, listener=listener, stop=stop)
        finally:
            stop.set()


def meta() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def modern_body(method: str, params: dict[str, Any] | None = None, id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": method,
        "params": {**(params or {}), "_meta": meta()},
    }


def call_body(tool: str, arguments: dict[str, Any] | None = None, id: int = 1) -> dict[str, Any]:
    return modern_body("tools/call", {"name": tool, "arguments": arguments or {}}, id)


def modern_headers(
    method: str, name: str | None = None, token: str | None = None, **more: str
) -> dict[str, str]:
    headers = {
        "Accept": ACCEPT,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    headers.update(more)
    return headers


async def post(
    client: httpx.AsyncClient,
    server: Server,
    body: dict[str, Any] | bytes,
    headers: dict[str, str],
) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await client.post(server.url, content=content, headers=headers)


async def start_slow_search(
    nursery: trio.Nursery, client: httpx.AsyncClient, server: Server, engine: SlowEngine
) -> None:
    """Start a web_search POST in `nursery`; return once `engine` has its query (a call in
    flight). The call's HTTP error, a connection the shutdown cut, is not the test's."""

    async def call() -> None:
        with suppress(httpx.HTTPError):
            await post(
                client, server, call_body("web_search", {"query": "rust"}),
                modern_headers("tools/call", "web_search"),
            )  # fmt: skip

    nursery.start_soon(call)
    with trio.fail_after(5):
        await engine.started.wait()


async def call_status(
    client: httpx.AsyncClient, server: Server, token: str | None = None, id: int = 1
) -> httpx.Response:
    return await post(
        client, server, call_body("engine_status", id=id),
        modern_headers("tools/call", "engine_status", token),
    )  # fmt: skip


def initialize_body(version: str = "2025-11-25", id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }


def legacy_headers(token: str | None = None, **more: str) -> dict[str, str]:
    headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    headers.update(more)
    return headers


def http_counts() -> dict[str, int]:
    return telemetry.COUNTERS.snapshot()["http"]


async def raw_exchange(port: int, data: bytes, timeout_s: float = 10) -> bytes:
    """Send `data` on a fresh connection and read until the server closes it."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    received = b""
    with trio.fail_after(timeout_s):
        await stream.send_all(data)
        while chunk := await stream.receive_some(65536):
            received += chunk
    await stream.aclose()
    return received


async def closed_by_server(stream: trio.SocketStream, timeout_s: float) -> bytes:
    """What the server sends until it closes the connection (fails after `timeout_s`)."""
    received = b""
    with trio.fail_after(timeout_s):
        try:
            while chunk := await stream.receive_some(65536):
                received += chunk
        except trio.BrokenResourceError:
            pass
    return received
