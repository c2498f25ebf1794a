"""`GET /metrics` on `[service.metrics] bind`: the Prometheus exposition, on a socket of its
own apart from the MCP listener.

One request a connection (`Connection: close`), at most `METRICS_CONNECTIONS` at once (a connection
past them is closed unanswered), the request head within `_HEAD_S` and `_HEAD_BYTES`. With
an operator token the request must carry `Authorization: Bearer <token>` (401 otherwise);
an MCP caller's token is never asked for or accepted here. Another path is 404, another
method 405. Nothing a scrape sends is logged.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Final

import h11
import trio

from rypsok.core import telemetry

if TYPE_CHECKING:
    import socket as stdlib_socket

    from prometheus_client import CollectorRegistry

    from rypsok.core.telemetry import Secret

__all__ = ["METRICS_CONNECTIONS", "serve_metrics"]

METRICS_PATH: Final = b"/metrics"
METRICS_CONNECTIONS: Final = 8
_HEAD_S: Final = 5.0
_HEAD_BYTES: Final = 8192
_SEND_S: Final = 10.0


async def serve_metrics(
    sock: stdlib_socket.socket,
    registry: CollectorRegistry,
    token: Secret | None,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the exposition on the bound, listening `sock` until cancelled."""
    listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    telemetry.info("metrics_listening", address=shown, token=token is not None)
    expected = None if token is None else b"Bearer " + token.reveal().encode("utf-8")
    open_connections = [0]
    async with listener, trio.open_nursery() as nursery:
        task_status.started()
        while True:
            try:
                stream = await listener.accept()
            except OSError:
                await trio.sleep(0.1)  # out of descriptors: the MCP listener's rule
                continue
            if open_connections[0] >= METRICS_CONNECTIONS:
                await stream.aclose()
                continue
            open_connections[0] += 1
            nursery.start_soon(_connection, stream, registry, expected, open_connections)


async def _connection(
    stream: trio.SocketStream,
    registry: CollectorRegistry,
    expected: bytes | None,
    open_connections: list[int],
) -> None:
    try:
        async with stream:
            read = await _read_head(stream)
            if read is None:
                return
            connection, request = read
            status, headers, body = _answer(request, registry, expected)
            with trio.move_on_after(_SEND_S):
                await _send(stream, connection, request.method, status, headers, body)
    except (trio.BrokenResourceError, trio.ClosedResourceError, h11.LocalProtocolError):
        pass
    finally:
        open_connections[0] -= 1


async def _read_head(stream: trio.SocketStream) -> tuple[h11.Connection, h11.Request] | None:
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=_HEAD_BYTES)
    with trio.move_on_after(_HEAD_S):
        while True:
            try:
                event = connection.next_event()
            except h11.RemoteProtocolError:
                return None
            if isinstance(event, h11.Request):
                return connection, event
            if event is not h11.NEED_DATA:
                return None
            data = await stream.receive_some(4096)
            connection.receive_data(data)
            if not data:
                return None
    return None


def _answer(
    request: h11.Request, registry: CollectorRegistry, expected: bytes | None
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    if request.target.split(b"?", 1)[0] != METRICS_PATH:
        return 404, [], b""
    if request.method not in (b"GET", b"HEAD"):
        return 405, [(b"allow", b"GET, HEAD")], b""
    if expected is not None:
        given = b""
        for name, value in request.headers:
            if name == b"authorization":
                given = value
        if not hmac.compare_digest(given, expected):
            return 401, [(b"www-authenticate", b"Bearer")], b""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    body = generate_latest(registry)
    return 200, [(b"content-type", CONTENT_TYPE_LATEST.encode("ascii"))], body


async def _send(
    stream: trio.SocketStream,
    connection: h11.Connection,
    method: bytes,
    status: int,
    headers: list[tuple[bytes, bytes]],
    body: bytes,
) -> None:
    response = h11.Response(
        status_code=status,
        headers=[
            *headers,
            (b"content-length", b"%d" % len(body)),
            (b"cache-control", b"no-store"),
            (b"connection", b"close"),
        ],
    )
    data = connection.send(response) or b""
    if method != b"HEAD" and body:
        data += connection.send(h11.Data(data=body)) or b""
    data += connection.send(h11.EndOfMessage()) or b""
    await stream.send_all(data)
