"""MCP over stdio: the Trio adapter around the sans-I/O protocol layer.

One JSON-RPC message per line in each direction. Every request runs as its own task under
the server's nursery, in its own cancel scope (so `notifications/cancelled` can abort it);
answers are written whole, one per line, under a lock. End of input or SIGTERM starts the
shutdown: calls in flight get what is left of `service.shutdown_ms` (less a reserve for the
process to exit, see `shutdown_plan`), then are aborted without an answer.

Standard output carries protocol messages only. While serving, file descriptor 1 points at
standard error and messages go to a private duplicate of the original standard output, so a
stray write from any library lands in the log instead of corrupting the stream.

Implements REQ-MCP-002 and REQ-DEP-001.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
from typing import TYPE_CHECKING, Any

import trio

from rypsok import _early
from rypsok.core import telemetry
from rypsok.mcp.process import Activity, default_service, serving
from rypsok.mcp.protocol import Call, Cancel, Dispatcher, Nothing, Reply, jsonrpc
from rypsok.mcp.protocol.stdio_lines import MAX_LINE_BYTES, LineDecoder
from rypsok.mcp.tool_calls import ToolService, execute, make_dispatcher

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from rypsok.config.schema import Config
    from rypsok.core.services import Rypsok
    from rypsok.mcp.protocol.dispatch import Action

__all__ = ["run_stdio", "serve_stdio"]

LOCAL_CALLER = telemetry.LOCAL_CALLER  # the caller of every call over stdio
_READ_CHUNK = 65536
# What the process needs after its last write to be gone: closing the service and the
# streams, then the interpreter's teardown (module and thread clean-up). Measured at 70 to
# 180 ms on a busy two-core machine (tools/bench-shutdown, book/maintainers/measurements.md);
# kept at about three times that, and at most half of a short budget.
_EXIT_RESERVE_MS = 500


def shutdown_plan(shutdown_ms: int) -> tuple[float, float]:
    """When the steps of a shutdown end, in seconds after it starts (LIM-O1 is one budget):
    calls in flight may finish until the first; their answers, and every other write, end by
    the second; the rest of `shutdown_ms` is left for the process to exit."""
    reserve_ms = min(_EXIT_RESERVE_MS, shutdown_ms // 2)
    writes_ms = shutdown_ms - reserve_ms
    # A call that finishes at the last moment still has a fifth of the reserve (at most
    # 100 ms) to write its answer.
    calls_ms = writes_ms - reserve_ms // 5
    return calls_ms / 1000, writes_ms / 1000


class _Connection:
    def __init__(
        self,
        service: ToolService,
        dispatcher: Dispatcher,
        stdout: trio.abc.SendStream,
        nursery: trio.Nursery,
        stop: trio.Event,
    ) -> None:
        self._service = service
        self._dispatcher = dispatcher
        self._stdout = stdout
        self._nursery = nursery
        self._write_lock = trio.Lock()
        self._write_deadline = math.inf
        self._writes: set[trio.CancelScope] = set()  # writes under way or waiting for the lock
        self._stop = stop
        self._broken = False
        self._in_flight: dict[jsonrpc.RequestId, trio.CancelScope] = {}
        self._cancelled: set[jsonrpc.RequestId] = set()
        # Calls and batches running; shutdown waits for them, within bounds.
        self.jobs = Activity()

    def stopping(self, deadline: float) -> None:
        """From now on every write ends by `deadline` (LIM-O1 is one budget, not one per write)."""
        self._write_deadline = deadline
        for scope in self._writes:
            scope.deadline = min(scope.deadline, deadline)

    async def write(
        self,
        payload: dict[str, Any] | list[dict[str, Any]],
        request_id: jsonrpc.RequestId | None = None,
    ) -> None:
        if self._broken:
            return  # the stream is gone or ruined: nothing more is written, nor reported
        data, replaced = jsonrpc.encode_safely(payload)
        if replaced:
            # A defect upstream (a value JSON cannot carry): that reply became -32603, and
            # the process serves on.
            telemetry.error("stdio_reply_unencodable", replies=replaced)
        # Shielded: a line is written whole or the stream is ruined. While serving a write
        # waits for the host (backpressure); once stopping, all writes share one deadline.
        with trio.CancelScope(shield=True, deadline=self._write_deadline) as bound:
            self._writes.add(bound)
            try:
                await self._send(data, request_id)
            finally:
                self._writes.discard(bound)
        if bound.cancelled_caught and not self._broken:
            # Cut midway: what follows would be glued to a fragment. Nothing more is written;
            # the writes queued behind this one end with it, reported once.
            self._broken = True
            telemetry.warn("stdio_output_stalled")
            self._stop.set()

    async def _send(self, data: bytes, request_id: jsonrpc.RequestId | None) -> None:
        async with self._write_lock:
            if self._broken:
                return
            if request_id is not None and request_id in self._cancelled:
                return  # cancelled while it waited for the lock: no message for it
            try:
                await self._stdout.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                # The host stopped reading: nobody is left to answer, so shut down.
                self._broken = True
                telemetry.warn("stdio_output_closed")
                self._stop.set()

    async def line(self, line: bytes, received: float | None = None) -> None:
        """One line of the host's. `received` is when it was read (its chunk's time): a call's
        deadlines count from then, not from when its task first runs, which among the lines
        of one large chunk can be half a second later under load."""
        if received is None:
            received = trio.current_time()
        if not line.strip() or self._stop.is_set():
            # Once shutting down, no new work: not even the lines already read.
            return
        message = jsonrpc.parse(line)
        if isinstance(message, jsonrpc.Batch) and self._dispatcher.batches_allowed():
            self.jobs.started()
            self._nursery.start_soon(self._batch, message, received)
            return
        action = self._act(message, batch_item=False)
        if isinstance(action, Reply):
            await self.write(action.payload)
        elif isinstance(action, Cancel):
            self._cancel(action.request_id)
        elif isinstance(action, Call):
            scope = self._register(action.request_id)
            if scope is None:
                await self.write(_id_in_use(action.request_id))
                return
            self.jobs.started()
            self._nursery.start_soon(self._run_call, action, scope, received)

    def _act(self, message: jsonrpc.Message, *, batch_item: bool) -> Action:
        """The dispatcher's action; a defect in it for one message answers that message
        -32603 (a notification: nothing) instead of ending the process."""
        try:
            if batch_item:
                return self._dispatcher.handle_batch_item(message)
            return self._dispatcher.handle(message)
        except Exception as exc:
            telemetry.log_exception("dispatch_failed", exc)
            if isinstance(message, jsonrpc.Request):
                return Reply(
                    payload=jsonrpc.error_response(
                        message.id, jsonrpc.INTERNAL_ERROR, "Internal error"
                    )
                )
            return Nothing()

    def _cancel(self, request_id: jsonrpc.RequestId) -> None:
        scope = self._in_flight.get(request_id)
        if scope is not None:
            telemetry.debug("call_cancelled")
            self._cancelled.add(request_id)
            scope.cancel()

    def _register(self, request_id: jsonrpc.RequestId) -> trio.CancelScope | None:
        """The cancel scope of a new call, or None when a call with this id still runs."""
        if request_id in self._in_flight:
            return None
        scope = trio.CancelScope()
        self._in_flight[request_id] = scope
        return scope

    def _unregister(self, request_id: jsonrpc.RequestId) -> None:
        del self._in_flight[request_id]
        self._cancelled.discard(request_id)

    async def _run_call(self, call: Call, scope: trio.CancelScope, received: float) -> None:
        start = trio.current_time()
        try:
            payload = None
            with scope:
                payload = await execute(
                    self._service, self._dispatcher, call, LOCAL_CALLER, received_at=received
                )
            if payload is not None and call.request_id not in self._cancelled:
                await self.write(payload, call.request_id)
                if telemetry.is_enabled("debug"):  # its fields are not worked out for nothing
                    telemetry.debug(
                        "stdio_call_answered",
                        tool=call.tool,
                        revision=call.revision,
                        duration_ms=round((trio.current_time() - start) * 1000),
                    )
        finally:
            self._unregister(call.request_id)
            self.jobs.ended()

    async def _batch(self, batch: jsonrpc.Batch, received: float) -> None:
        """A JSON-RPC batch of a revision that has them: one array of answers, in order."""
        answers: list[dict[str, Any] | None] = [None] * len(batch.items)

        cancelled: set[int] = set()

        async def run(index: int, call: Call, scope: trio.CancelScope) -> None:
            try:
                with scope:
                    answers[index] = await execute(
                        self._service, self._dispatcher, call, LOCAL_CALLER, received_at=received
                    )
                if call.request_id in self._cancelled:
                    cancelled.add(index)
            finally:
                self._unregister(call.request_id)

        try:
            async with trio.open_nursery() as nursery:
                for index, item in enumerate(batch.items):
                    action = self._act(item, batch_item=True)
                    if isinstance(action, Reply):
                        answers[index] = action.payload
                    elif isinstance(action, Cancel):
                        self._cancel(action.request_id)
                    elif isinstance(action, Call):
                        scope = self._register(action.request_id)
                        if scope is None:
                            answers[index] = _id_in_use(action.request_id)
                        else:
                            nursery.start_soon(run, index, action, scope)
            replies = [a for i, a in enumerate(answers) if a is not None and i not in cancelled]
            if replies:
                await self.write(replies)
        finally:
            self.jobs.ended()

    def abort_all(self) -> None:
        for request_id, scope in list(self._in_flight.items()):
            self._cancelled.add(request_id)
            scope.cancel()


def _id_in_use(request_id: jsonrpc.RequestId) -> dict[str, Any]:
    return jsonrpc.error_response(request_id, jsonrpc.INVALID_REQUEST, "Invalid Request: id in use")


async def _read_until_eof(
    stdin: trio.abc.ReceiveStream, connection: _Connection, max_line_bytes: int
) -> None:
    splitter = LineDecoder(max_line_bytes)
    while True:
        data = await stdin.receive_some(_READ_CHUNK)
        if not data:
            break
        received = trio.current_time()  # every line of the chunk was there by now
        dropped = splitter.dropped
        for line in splitter.feed(data):
            await connection.line(line, received)
        if splitter.dropped != dropped:
            telemetry.warn("stdio_line_too_long", limit_bytes=max_line_bytes)
    last = splitter.finish()
    if last is not None:
        await connection.line(last)


async def serve_stdio(
    rypsok: Any,
    config: Config,
    *,
    stdin: trio.abc.ReceiveStream,
    stdout: trio.abc.SendStream,
    stop: trio.Event | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> None:
    """Serve MCP on the two streams until end of input or `stop`, then shut down."""
    dispatcher = make_dispatcher(rypsok, config)
    shutdown_ms = config.service.shutdown_ms
    stop = stop if stop is not None else trio.Event()
    async with trio.open_nursery() as nursery:
        connection = _Connection(rypsok, dispatcher, stdout, nursery, stop)
        await nursery.start(telemetry.run_counters_reporter)

        reading = trio.CancelScope()

        async def reader() -> None:
            with reading:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await _read_until_eof(stdin, connection, max_line_bytes)
                telemetry.info("stdio_end_of_input")
                stop.set()

        nursery.start_soon(reader)
        await stop.wait()
        # No new work once shutting down: lines after SIGTERM are not read.
        reading.cancel()
        telemetry.info("shutdown_started", in_flight=len(connection._in_flight))
        stopped_at = trio.current_time()
        # Every write from here on, answers of finishing calls included, ends within the
        # shutdown budget; the margin is left for closing the streams and the process.
        calls_s, writes_s = shutdown_plan(shutdown_ms)
        connection.stopping(stopped_at + writes_s)
        with trio.move_on_at(stopped_at + calls_s):
            await connection.jobs.idle.wait()
        connection.abort_all()
        # What is still running (the reader, the counters, writes) ends with the nursery;
        # writes already started finish under their own bound.
        nursery.cancel_scope.cancel()


async def _serve_process(config: Config, service: Callable[[], Rypsok]) -> None:
    out_fd = os.dup(1)
    os.dup2(2, 1)  # from here a stray write to fd 1 goes to the log stream
    in_fd = os.dup(0)
    stdin = trio.lowlevel.FdStream(in_fd)
    stdout = trio.lowlevel.FdStream(out_fd)
    async with serving(service, (signal.SIGTERM,)) as (rypsok, stop):
        telemetry.info("serving", transport="stdio")
        await serve_stdio(rypsok, config, stdin=stdin, stdout=stdout, stop=stop)
    await stdout.aclose()
    await stdin.aclose()


def run_stdio(
    config: Config,
    env: Mapping[str, str],
    *,
    service: Callable[[], Rypsok] | None = None,
) -> int:
    """`rypsok serve --transport stdio`: serve until end of input or SIGTERM; exit code 0.

    `service` builds the core to serve (`default_service`, the production one, when None).
    """
    # A SIGTERM before the event loop listens (the entry point catches it while the modules
    # import) must still mean a graceful stop: `_early` remembers it until Trio takes over.
    previous = signal.getsignal(signal.SIGTERM)
    _early.install()
    try:
        trio.run(_serve_process, config, service or default_service(config, env))
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0
