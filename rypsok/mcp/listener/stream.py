"""hypercorn's side of a connection: its configuration, and the stream it reads (`Replay`):
the bytes already read handed back first, every later byte through the connection's gate
(`rypsok.mcp.http_framing`) before hypercorn parses it. Over HTTP/2 hypercorn's h2 connection
becomes the listener's (`h2_streams`: a stream beyond LIM-H4 or after the stop refused alone,
the GOAWAY after the last answer) before the first frame.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Final

import h2.connection
import trio
from hypercorn.config import Config as HypercornConfig

from rypsok.mcp.http_app import HEADER_BLOCK_BYTES
from rypsok.mcp.listener.h2_streams import ListenerH2Connection, adopt
from rypsok.mcp.listener.heads import H2_PREFACE

if TYPE_CHECKING:
    from collections.abc import Callable

    from hypercorn.trio.tcp_server import TCPServer

    from rypsok.config.schema import Config
    from rypsok.mcp.http_app import RefusalLog
    from rypsok.mcp.listener.connection import Connection

__all__ = ["NO_IDLE_TASK", "RECEIVE", "Replay", "hypercorn_config"]

RECEIVE: Final = 65536


def hypercorn_config(config: Config) -> HypercornConfig:
    """hypercorn's settings from `[service.http]`: its own logs off, its bounds ours."""
    http = config.service.http
    hc = HypercornConfig()
    hc.keep_alive_timeout = float(http.idle_timeout_s)
    hc.h11_max_incomplete_size = HEADER_BLOCK_BYTES
    hc.h2_max_header_list_size = HEADER_BLOCK_BYTES
    hc.h2_max_concurrent_streams = http.max_streams
    hc.include_server_header = False
    hc.include_date_header = False
    hc.accesslog = None
    hc.errorlog = None  # our own JSON lines only; app failures are logged by the wrapper
    hc.graceful_timeout = config.service.shutdown_ms / 1000
    return hc


_STATUS_TEXT: Final = {
    400: b"Bad Request",
    417: b"Expectation Failed",
    431: b"Request Header Fields Too Large",
    501: b"Not Implemented",
    505: b"HTTP Version Not Supported",
}
_CONTINUE_LINE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"
_LINGER_S: Final = 0.5
_LINGER_BYTES: Final = 65536


class Replay(trio.abc.HalfCloseableStream):
    """The accepted stream with the bytes already read handed back first, and every byte
    passed through the connection's gate (`rypsok.mcp.http_framing`) before hypercorn reads it.

    No `do_handshake`: hypercorn takes a stream without one for cleartext (h2c by prior
    knowledge, or HTTP/1.1).
    """

    def __init__(
        self,
        stream: trio.SocketStream,
        first: bytes,
        connection: Connection,
        refusals: RefusalLog,
        stopping: Callable[[], bool],
    ) -> None:
        self._stream = stream
        self._connection = connection
        self._refusals = refusals
        self._stopping = stopping
        self.socket = stream.socket
        self.server: TCPServer | None = None
        self.h2_connection: ListenerH2Connection | None = None  # hypercorn's, adopted
        if connection.h2 is not None:
            # The preface alone first: hypercorn makes its HTTP/2 protocol object from it,
            # and `receive_some` changes that object's h2 class before the first frame.
            self._first = first[: len(H2_PREFACE)]
            self._pending = first[len(H2_PREFACE) :]
        else:
            self._first = b""
            self._pending = first  # through the gate like every later byte

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        connection = self._connection
        if self._first:
            data, self._first = self._first, b""
            await trio.lowlevel.checkpoint()
            return data
        while True:
            if self._pending:
                data, self._pending = self._pending, b""
            else:
                try:
                    data = bytes(await self._stream.receive_some(max_bytes))
                except trio.BrokenResourceError:
                    connection.peer_gone()
                    raise
                if not data:
                    connection.peer_gone()
                    return data
            if connection.h2 is not None:
                return await self._h2(data)
            passed = await self._http1(data)
            if passed is not None:
                return passed

    async def _h2(self, data: bytes) -> bytes:
        connection = self._connection
        scanner = connection.h2
        assert scanner is not None
        if self.h2_connection is None and self.server is not None:
            protocol = getattr(self.server.protocol, "protocol", None)
            h2_connection = getattr(protocol, "connection", None)
            if isinstance(h2_connection, h2.connection.H2Connection):
                adopt(h2_connection, self._stopping)
                assert isinstance(h2_connection, ListenerH2Connection)
                self.h2_connection = h2_connection
        if not scanner.feed(data):
            # LIM-H7 passed by the fragments so far: closed before h2 buffers any more.
            self._refusals.refuse("header_too_large", connection.family)
            connection.peer_gone()
            return b""
        connection.head_started(scanner.in_block)
        return data

    async def _http1(self, data: bytes) -> bytes | None:
        """What hypercorn may read of `data`: b"" to close, None when it must wait."""
        connection = self._connection
        gate = connection.gate
        assert gate is not None
        passed = gate.feed(data)
        connection.head_started(gate.head_started)
        if passed:
            # A complete head (or a body's bytes) on its way to the app: not a connection
            # waiting for a request, for the eviction at the cap.
            connection.ready = True
            return passed
        if gate.refused is None:
            return None
        refusal = gate.refused
        if refusal.reason is not None:
            self._refusals.refuse(refusal.reason, connection.family)
        if connection.in_flight == 0 and not gate.in_body:
            await self._answer_and_linger(refusal.status)
        connection.peer_gone()
        return b""

    async def _answer_and_linger(self, status: int) -> None:
        """Answer a refused head and close: the write side first, then what the peer still
        sends is read (bounded) so that the close sends no reset that would lose the answer."""
        head = b"HTTP/1.1 %d %s\r\ncontent-length: 0\r\nconnection: close\r\n\r\n" % (
            status,
            _STATUS_TEXT[status],
        )
        assert self.server is not None
        try:
            async with self.server.send_lock:
                await self._stream.send_all(head)
            await self._stream.send_eof()
            read = 0
            with trio.move_on_after(_LINGER_S):
                while read < _LINGER_BYTES:
                    chunk = await self._stream.receive_some(RECEIVE)
                    if not chunk:
                        break
                    read += len(chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def send_continue(self) -> None:
        """`100 Continue`, once the app has decided to read the body of a request that asked
        for it (the gate held `Expect` back from h11)."""
        gate = self._connection.gate
        if gate is None or not gate.expects_continue or self.server is None:
            return
        gate.expects_continue = False
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            async with self.server.send_lock:
                await self._stream.send_all(_CONTINUE_LINE)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        # hypercorn hands over the empty end of every HTTP/1 message with a length: sending
        # nothing needs no trip through the scheduler.
        if data:
            await self._stream.send_all(data)
        if self.h2_connection is not None:
            self.h2_connection.sent(data)
            if self.h2_connection.settled and self._stopping():
                self._connection.wake.set()  # the watchdog may close it now

    @property
    def settled(self) -> bool:
        """Whether all hypercorn has to say on this connection is written: over HTTP/2 no
        stream open and every frame sent (`ListenerH2Connection.settled`); over HTTP/1,
        whose answers are written before their request ends, always."""
        return self.h2_connection is None or self.h2_connection.settled

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        # hypercorn closes a connection (`_close`) without its send lock, while the app may
        # be sending an answer under it: two senders on one stream would fail the app's
        # send (BusyResourceError). After the lock, a later send finds the stream closed,
        # which hypercorn takes as the connection's end.
        if self.server is None:
            await self._stream.send_eof()
            return
        async with self.server.send_lock:
            await self._stream.send_eof()

    async def aclose(self) -> None:
        await self._stream.aclose()


class NoIdleTask:
    """Stands in for hypercorn's keep-alive timer of a connection.

    hypercorn starts a task when a connection goes idle and cancels it when a request comes:
    a task started and ended per request. The watchdog below keeps the same bound (LIM-H3,
    closing on shutdown too) with one task for the connection's whole life.
    """

    async def restart(self, task_group: Any, action: Any) -> None:
        pass

    async def stop(self) -> None:
        pass


NO_IDLE_TASK: Final = NoIdleTask()
