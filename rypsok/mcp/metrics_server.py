"""`GET /metrics` on `[service.metrics] bind`: the Prometheus exposition, on a socket of its
own apart from the MCP listener.

One request a connection (`Connection: close`), at most `METRICS_CONNECTIONS` at once
(LIM-H9). At the cap a newcomer makes room: the connection that has waited longest without a
whole request head is closed, so that connections which open and stop mid-head never keep a
scrape out. A newcomer that has not sent its own head yet makes room only among connections
that have waited a second (the MCP listener's grace), so that a connect flood does not close
a scrape's connection before its head comes; when none can make room the newcomer is closed
unanswered. The request head is read within `_HEAD_S` and is at most `_HEAD_BYTES` bytes,
its blank line included; past either the connection is closed unanswered. The target is the
origin form `/metrics` or the absolute form `http://host/metrics` (RFC 9112 §3.2.2: its path
decides). With an operator token the request must carry `Authorization: Bearer <token>`, the
scheme in any case, read as `/mcp` reads a caller's (401 otherwise); an MCP caller's token
is never asked for or accepted here. Another path is 404, another method 405. Nothing a
scrape sends is logged.
"""

from __future__ import annotations

import hmac
import math
from typing import TYPE_CHECKING, Final

import h11
import trio

from rypsok.core import telemetry
from rypsok.mcp.caller_tokens import bearer_token

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
_READ_BYTES: Final = 4096
_ABSOLUTE_SCHEMES: Final = (b"http://", b"https://")


class _Connection:
    """One accepted connection: when it came, and whether its whole head has arrived."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.accepted_at = trio.current_time()
        self.has_head = False
        self.scope = trio.CancelScope()

    def evict(self) -> None:
        """Close it now: its descriptor is free before the newcomer's task starts."""
        self.scope.cancel()
        self.stream.socket.close()


class _Connections:
    """The open connections, and the room a newcomer makes at the cap."""

    def __init__(self) -> None:
        self.open: set[_Connection] = set()

    def admit(self, stream: trio.SocketStream) -> _Connection | None:
        """The newcomer's connection, room made for it at the cap; None when no open
        connection can make room (the newcomer is closed unanswered)."""
        if len(self.open) >= METRICS_CONNECTIONS:
            victim = self._longest_waiting(settled=not _whole_head(stream.socket))
            if victim is None:
                return None
            self.open.discard(victim)
            victim.evict()
        connection = _Connection(stream)
        self.open.add(connection)
        return connection

    def _longest_waiting(self, *, settled: bool) -> _Connection | None:
        """The connection that has waited longest without a whole head, read or in its
        buffer. With `settled` (a newcomer that has not sent its own head yet) only one that
        has waited the MCP listener's grace: a connect flood's renewed connections do not
        close a scrape's before its head comes."""
        from rypsok.mcp.listener.connection import ROOM_GRACE_S  # see `_whole_head`

        before = trio.current_time() - ROOM_GRACE_S if settled else math.inf
        waiting = [
            connection
            for connection in self.open
            if not connection.has_head
            and connection.accepted_at <= before
            and not _whole_head(connection.stream.socket)
        ]
        return min(waiting, key=lambda connection: connection.accepted_at, default=None)


def _whole_head(sock: trio.socket.SocketType) -> bool:
    """Whether a whole HTTP/1 head waits unread in `sock`'s buffer."""
    # Imported here: rypsok.mcp.listener imports this module (its descriptor plan).
    from rypsok.mcp.listener.heads import peek, whole_http1_head

    return whole_http1_head(peek(sock)) is not None


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
    expected = None if token is None else token.reveal().encode("utf-8")
    connections = _Connections()
    async with listener, trio.open_nursery() as nursery:
        task_status.started()
        while True:
            try:
                stream = await listener.accept()
            except OSError:
                await trio.sleep(0.1)  # out of descriptors: the MCP listener's rule
                continue
            connection = connections.admit(stream)
            if connection is None:
                await stream.aclose()
                continue
            nursery.start_soon(_serve, connection, connections, registry, expected)


async def _serve(
    connection: _Connection,
    connections: _Connections,
    registry: CollectorRegistry,
    expected: bytes | None,
) -> None:
    stream = connection.stream
    try:
        with connection.scope:
            async with stream:
                read = await _read_head(stream)
                if read is None:
                    return
                connection.has_head = True
                h11_connection, request = read
                status, headers, body = _answer(request, registry, expected)
                with trio.move_on_after(_SEND_S):
                    await _send(stream, h11_connection, request.method, status, headers, body)
    except (trio.BrokenResourceError, trio.ClosedResourceError, h11.LocalProtocolError):
        pass
    finally:
        connections.open.discard(connection)


_Answer = tuple[int, list[tuple[bytes, bytes]], bytes]


async def _read_head(stream: trio.SocketStream) -> tuple[h11.Connection, h11.Request] | None:
    """The request head, read within `_HEAD_S`; None (closed unanswered) when it passes
    `_HEAD_BYTES`, is malformed or does not arrive in time.

    No more than `_HEAD_BYTES` bytes are ever read: a head that is not whole within them is
    too large, however the reads fell."""
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=_HEAD_BYTES)
    received = 0
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
            if received >= _HEAD_BYTES:
                return None
            data = await stream.receive_some(min(_READ_BYTES, _HEAD_BYTES - received))
            if not data:
                return None
            received += len(data)
            connection.receive_data(data)
    return None


def _path(target: bytes) -> bytes:
    """The path of a request target in the origin form or the absolute form (RFC 9112
    §3.2.1-2); b"" for any other form."""
    if target.lower().startswith(_ABSOLUTE_SCHEMES):
        authority_and_path = target.split(b"://", 1)[1]
        slash = authority_and_path.find(b"/")
        target = b"" if slash < 0 else authority_and_path[slash:]
    if not target.startswith(b"/"):
        return b""
    return target.split(b"?", 1)[0]


def _authorized(request: h11.Request, expected: bytes) -> bool:
    """Whether the request carries the operator's token, read as `/mcp` reads a caller's:
    one Authorization field, the Bearer scheme in any case."""
    fields = [value for name, value in request.headers if name == b"authorization"]
    offered = bearer_token(fields[0]) if len(fields) == 1 else None
    # Compared even when nothing was offered: the time taken says nothing either way.
    return hmac.compare_digest(offered or b"", expected) and offered is not None


def _answer(request: h11.Request, registry: CollectorRegistry, expected: bytes | None) -> _Answer:
    if _path(request.target) != METRICS_PATH:
        return 404, [], b""
    if request.method not in (b"GET", b"HEAD"):
        return 405, [(b"allow", b"GET, HEAD")], b""
    if expected is not None and not _authorized(request, expected):
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
