"""`rypsok serve --transport http`: the listening socket bound, the listener served until the
stop, then the shutdown within `service.shutdown_ms`.

`serve_http` serves until its `stop` event; then the listening socket is closed (new
connections are refused), idle connections close, and calls in flight get what is left of
`service.shutdown_ms` before they are cancelled.
"""

from __future__ import annotations

import errno
import signal
import socket as stdlib_socket
from typing import TYPE_CHECKING, Any, Final

import trio

from rypsok import _early
from rypsok.config.metrics import metrics_token
from rypsok.core import telemetry
from rypsok.mcp.caller_tokens import Callers
from rypsok.mcp.http_app import McpHttpApp
from rypsok.mcp.listener.accept import listening_socket
from rypsok.mcp.listener.descriptors import descriptor_limit
from rypsok.mcp.listener.lifecycle import Listener
from rypsok.mcp.process import default_service, serving
from rypsok.mcp.sd_notify import READY, STOPPING, Notifier
from rypsok.mcp.sessions import SESSION_TTL_S
from rypsok.shared.allocator import malloc_trim

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from rypsok.config.schema import Config
    from rypsok.core.services import Rypsok
    from rypsok.core.telemetry import Secret
    from rypsok.mcp.tool_calls import ToolService

__all__ = ["run_http", "serve_http"]

_EXIT_MARGIN_MS: Final = 300


async def serve_http(
    service: ToolService,
    config: Config,
    callers: Callers,
    *,
    stop: trio.Event,
    port: int | None = None,
    session_ttl_s: float = SESSION_TTL_S,
    listen_socket: Any = None,
    counters_interval_s: float = 60.0,
    trim: Callable[[], object] | None = None,
    notify_env: Mapping[str, str] | None = None,
    metrics_socket: stdlib_socket.socket | None = None,
    metrics_token: Secret | None = None,
    task_status: trio.TaskStatus[tuple[int, Listener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve MCP over HTTP until `stop`, then shut down within `service.shutdown_ms`.

    `port` replaces the configured one (tests bind port 0); `listen_socket` replaces the
    socket itself (a test's socket whose accept fails); `counters_interval_s` is the minute
    of the `counters` event; `trim` returns the allocator's free memory after a flood
    (`malloc_trim`, which `run_http` passes; None: kept); `notify_env` holds the service
    manager's NOTIFY_SOCKET and WATCHDOG_USEC (`rypsok.mcp.sd_notify`; None: no manager).
    With `[service.metrics]` the exposition is served on `metrics_socket` (bound here from
    the configuration when None), guarded by `metrics_token` when the operator gave one.
    """
    if listen_socket is None:
        listen_socket = listening_socket(config.service.http.bind, port)
    sock = (
        trio.socket.from_stdlib_socket(listen_socket)
        if isinstance(listen_socket, stdlib_socket.socket)
        else listen_socket
    )
    host, bound_port = sock.getsockname()[:2]
    app = McpHttpApp(service, config, callers, session_ttl_s=session_ttl_s, bound_port=bound_port)
    listener = Listener(app, config, descriptor_limit=descriptor_limit())
    _warn_if_short(listener, config)
    shown = f"[{host}]:{bound_port}" if ":" in host else f"{host}:{bound_port}"
    telemetry.info("listening", address=shown, transport="http", callers=len(callers))
    shutdown_ms = config.service.shutdown_ms
    notifier = Notifier(notify_env or {})
    async with trio.open_nursery() as nursery:
        await nursery.start(telemetry.run_counters_reporter, counters_interval_s)
        await nursery.start(notifier.run_watchdog)
        if config.service.metrics is not None:
            await nursery.start(
                _serve_metrics, service, listener, config, metrics_socket, metrics_token
            )
        await nursery.start(app.refusals.run)
        await nursery.start(listener.return_memory, trim)
        async with trio.open_nursery() as connections:
            accepting = trio.CancelScope()

            async def accept() -> None:
                with accepting:
                    await listener.accept_loop(sock, connections)

            connections.start_soon(accept)
            app.health.accepting = True
            notifier.notify(READY)
            task_status.started((bound_port, listener))
            await stop.wait()
            stopped_at = trio.current_time()
            app.health.stopping = True
            notifier.notify(STOPPING)
            accepting.cancel()
            sock.close()  # from here a new connection is refused by the kernel
            telemetry.info("shutdown_started", in_flight=listener.calls.count)
            grace = max(shutdown_ms - _EXIT_MARGIN_MS, 0) / 1000
            await listener.drain(stopped_at + grace)
            # What still runs (idle connections, cancelled calls) ends with the nursery.
            connections.cancel_scope.cancel()
        app.refusals.flush(final=True)
        nursery.cancel_scope.cancel()


def _warn_if_short(listener: Listener, config: Config) -> None:
    """Say at start when the descriptor limit leaves fewer connections than configured."""
    plan = listener.descriptor_plan
    if plan.short:
        telemetry.warn(
            "descriptor_limit",
            limit=plan.limit,
            reserve=plan.reserve,
            connections=plan.connections,
            max_connections=config.service.http.max_connections,
            note=f"raise the descriptor limit (LimitNOFILE) to at least {plan.needed}, "
            "or lower service.http.max_connections",
        )


async def _serve_metrics(
    service: ToolService,
    listener: Listener,
    config: Config,
    sock: stdlib_socket.socket | None,
    token: Secret | None,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """`[service.metrics]`: prometheus_client is imported here, by such a process only."""
    from rypsok.mcp.metrics import metrics_registry
    from rypsok.mcp.metrics_server import serve_metrics

    assert config.service.metrics is not None
    engine_states = getattr(service, "engine_states", None)
    if sock is None:
        sock = listening_socket(config.service.metrics.bind)
    exposition = metrics_registry(engine_states, lambda: listener.calls.count)
    await serve_metrics(sock, exposition, token, task_status=task_status)


async def _serve_process(
    config: Config,
    env: Mapping[str, str],
    callers: Callers,
    sock: stdlib_socket.socket,
    metrics: tuple[stdlib_socket.socket | None, Secret | None],
    service: Callable[[], Rypsok],
) -> None:
    async with serving(service, (signal.SIGTERM, signal.SIGINT)) as (rypsok, stop):
        await serve_http(
            rypsok,
            config,
            callers,
            stop=stop,
            listen_socket=sock,
            trim=malloc_trim(),
            notify_env=env,
            metrics_socket=metrics[0],
            metrics_token=metrics[1],
        )


def run_http(
    config: Config,
    env: Mapping[str, str],
    *,
    service: Callable[[], Rypsok] | None = None,
) -> int:
    """`rypsok serve --transport http`: serve until SIGTERM; exit code 0.

    The tokens are read once, here; the configuration was validated with the same reading.
    `service` builds the core to serve (`default_service`, the production one, when None).
    """
    callers = Callers.from_config(config, env)
    try:
        sock = listening_socket(config.service.http.bind)
    except OSError as exc:
        telemetry.error(
            "listen_failed",
            address=config.service.http.bind,
            error=errno.errorcode.get(exc.errno or 0, "OSError"),
            note="another process may hold the port; change service.http.bind",
        )
        return 1
    metrics: tuple[stdlib_socket.socket | None, Secret | None] = (None, None)
    if config.service.metrics is not None:
        try:
            metrics = (
                listening_socket(config.service.metrics.bind),
                metrics_token(config, env),
            )
        except OSError as exc:
            sock.close()
            telemetry.error(
                "listen_failed",
                address=config.service.metrics.bind,
                error=errno.errorcode.get(exc.errno or 0, "OSError"),
                note="another process may hold the port; change service.metrics.bind",
            )
            return 1
    previous = signal.getsignal(signal.SIGTERM)
    _early.install()
    try:
        trio.run(
            _serve_process,
            config,
            env,
            callers,
            sock,
            metrics,
            service or default_service(config, env),
        )
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0
