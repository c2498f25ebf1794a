"""The stdio adapter in process: memory streams, a fake service, Trio's mock clock."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_helpers import modern
from provider_network import MemoryProviders
from search_fakes import FakeEngine, capture_logs, engine_config, make_config

from rypsok.config.schema import Config, ServiceConfig
from rypsok.core.model import (
    EngineState,
    EngineStatus,
    ErrorKind,
    Outcome,
    Reason,
    SearchRequest,
    SearchResponse,
    SearchResult,
    StatusResponse,
    ToolError,
)
from rypsok.core.services import Rypsok
from rypsok.mcp.stdio import serve_stdio
from testkit.servers import Reply, read_request


class FakeService:
    """Answers at once, or hangs on the query "hang", or crashes on the query "crash"."""

    served_categories = ("general", "science")
    languages = ("en",)

    def __init__(self) -> None:
        self.cancelled_at: list[float] = []
        self.started = trio.Event()
        self.callers: list[str] = []
        self.received: list[float | None] = []

    async def search_as(
        self, caller: str, request: SearchRequest, *, received_at: float | None = None
    ) -> SearchResponse:
        self.callers.append(caller)
        self.received.append(received_at)
        if request.query == "hang":
            self.started.set()
            try:
                await trio.sleep_forever()
            finally:
                self.cancelled_at.append(trio.current_time())
        if request.query == "crash":
            raise RuntimeError("boom")
        if request.query.startswith("sleep"):
            await trio.sleep(float(request.query.split()[1]))
        if request.query.startswith("busy"):
            # Half a second of work before the first checkpoint (the clock moved by hand).
            clock = trio.lowlevel.current_clock()
            assert isinstance(clock, trio.testing.MockClock)
            clock.jump(float(request.query.split()[1]))
        # "unclean": a defect upstream lets a surrogate through into the response.
        title = "T\ud800" if request.query == "unclean" else request.query
        return SearchResponse(
            outcome=Outcome.OK,
            results=(SearchResult(title=title, url="https://example.org/", snippet="s"),),
        )

    async def status_as(self, caller: str) -> StatusResponse:
        return StatusResponse(engines=(EngineStatus(id="wikipedia", state=EngineState.CLOSED),))


def search(request_id: int | str, query: str) -> dict[str, Any]:
    return modern(
        "tools/call", request_id=request_id, name="web_search", arguments={"query": query}
    )


class Harness:
    def __init__(self, service: FakeService | Rypsok, config: Config, **kwargs: Any) -> None:
        self.service = service
        self.config = config
        self.in_send, self.in_recv = trio.testing.memory_stream_one_way_pair()
        self.out_send, self.out_recv = trio.testing.memory_stream_one_way_pair()
        self.kwargs = kwargs
        self.buffer = b""
        self.done = trio.Event()
        self.finished_at: float | None = None

    async def run(self) -> None:
        await serve_stdio(
            self.service, self.config, stdin=self.in_recv, stdout=self.out_send, **self.kwargs
        )
        self.finished_at = trio.current_time()
        self.done.set()

    async def send(self, *messages: dict[str, Any] | bytes) -> None:
        for m in messages:
            data = m if isinstance(m, bytes) else json.dumps(m).encode() + b"\n"
            await self.in_send.send_all(data)

    async def lines(self, count: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while len(out) < count:
            while b"\n" not in self.buffer:
                self.buffer += await self.out_recv.receive_some(65536)
            line, self.buffer = self.buffer.split(b"\n", 1)
            out.append(json.loads(line))
        return out

    async def rest(self) -> bytes:
        """Everything written until the server finished."""
        await self.done.wait()
        while True:
            with trio.move_on_after(0.01) as scope:
                data = await self.out_recv.receive_some(65536)
            if scope.cancelled_caught or not data:
                break
            self.buffer += data
        return self.buffer


def config(**service: Any) -> Config:
    return Config(service=ServiceConfig(**service))


async def test_req_mcp_002_each_line_gets_one_answer_line() -> None:
    h = Harness(FakeService(), config())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        await h.send(modern("server/discover", request_id=1), search(2, "rust"))
        answers = await h.lines(2)
        await h.in_send.aclose()
    assert sorted(a["id"] for a in answers) == [1, 2]
    by_id = {a["id"]: a for a in answers}
    assert by_id[2]["result"]["structuredContent"]["results"][0]["title"] == "rust"
    assert h.service.callers == ["local"]
    assert await h.rest() == b""


async def test_req_mcp_002_calls_run_concurrently(autojump_clock: Any) -> None:
    h = Harness(FakeService(), config())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        await h.send(search(1, "sleep 1"), search(2, "fast"))
        answers = await h.lines(2)
        await h.in_send.aclose()
    assert [a["id"] for a in answers] == [2, 1]


async def test_lim_f5_a_calls_clock_starts_when_its_line_was_read(mock_clock: Any) -> None:
    """Calls read in one chunk start their deadlines when the chunk was read, not when each
    task first runs: behind calls whose first steps take half a second each, the last of
    three still counts from the read, so that LIM-F5 holds under load."""
    h = Harness(FakeService(), config())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        await trio.testing.wait_all_tasks_blocked()
        read_at = trio.current_time()
        chunk = b"".join(json.dumps(search(n, "busy 0.5")).encode() + b"\n" for n in (1, 2, 3))
        await h.send(chunk)
        answers = await h.lines(3)
        await h.in_send.aclose()
    assert sorted(a["id"] for a in answers) == [1, 2, 3]
    assert trio.current_time() >= read_at + 1.5  # the three first steps did take their time
    assert h.service.received == [read_at, read_at, read_at]


async def test_lim_s7_a_call_read_long_ago_counts_its_deadline_from_then(
    autojump_clock: Any,
) -> None:
    """The service counts a call's deadlines from `received_at`: a web_search read longer
    ago than LIM-S7 asks no engine and answers at once, with its latency counted from the
    read; a time in the future is taken as now."""
    from search_fakes import FakeEngine as Engine

    config_ = make_config(engine_config("alpha"))
    engine = Engine("alpha")
    async with Rypsok(config_, engines=[engine]) as rypsok:
        now = trio.current_time()
        late = now - (config_.search.deadline_ms / 1000 + 2)
        with capture_logs() as logs, pytest.raises(ToolError) as raised:
            await rypsok.search_as("local", SearchRequest(query="rust"), received_at=late)
        assert raised.value.kind is ErrorKind.UNAVAILABLE
        assert engine.finished == 0
        assert engine.active == 0
        assert trio.current_time() == now  # answered at once
        (call,) = logs.named("call")
        assert call["latency_ms"] >= config_.search.deadline_ms + 2000
        # Read "in the future" (a clock it cannot be): counted from now, the engine is asked.
        await rypsok.search_as("local", SearchRequest(query="rust"), received_at=now + 60)
        assert engine.finished == 1


class SplittingStream(trio.abc.SendStream):
    """A standard output that takes each write in small pieces, letting other tasks run
    between them (as a pipe may): writes that were not serialized would interleave."""

    def __init__(self, inner: trio.abc.SendStream, piece: int = 7) -> None:
        self.inner = inner
        self.piece = piece
        self.writes = 0

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.writes += 1
        view = memoryview(data)
        for start in range(0, len(view), self.piece):
            await self.inner.send_all(view[start : start + self.piece])
            await trio.lowlevel.checkpoint()

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_req_mcp_002_answers_never_interleave(autojump_clock: Any) -> None:
    h = Harness(FakeService(), config())
    splitting = SplittingStream(h.out_send)
    h.out_send = splitting  # type: ignore[assignment]
    big = "x" * 200
    async with trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        await h.send(*(search(i, f"{big}{i}") for i in range(50)))
        answers = await h.lines(50)
        await h.in_send.aclose()
    assert sorted(a["id"] for a in answers) == list(range(50))
    for a in answers:
        assert a["result"]["structuredContent"]["results"][0]["title"] == f"{big}{a['id']}"
    assert splitting.writes == 50  # one write per answer, each cut into many pieces


async def test_req_mcp_007_cancelled_call_sends_nothing_and_the_next_call_works(
    autojump_clock: Any,
) -> None:
    service = FakeService()
    h = Harness(service, config())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        await h.send(search(1, "hang"))
        await service.started.wait()
        cancelled = trio.current_time()
        await h.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        )
        await h.send(search(2, "after"))
        (answer,) = await h.lines(1)
        await h.in_send.aclose()
    assert answer["id"] == 2
    assert service.cancelled_at
    assert service.cancelled_at[0] - cancelled < 0.5
    assert await h.rest() == b""


class _HangingWikipedia(MemoryProviders):
    """en.wikipedia.org over the engines' production stack in memory: it reads a request and
    never answers; when the client closes the connection, it notes the Trio clock."""

    def __init__(self) -> None:
        super().__init__({"en.wikipedia.org": Reply(body=b"{}")})
        self.hung = trio.Event()
        self.closed = trio.Event()
        self.closed_at: list[float] = []

    async def _serve(self, host: str, stream: trio.abc.Stream) -> None:
        secured = trio.SSLStream(stream, self._tls[host], server_side=True, https_compatible=True)
        try:
            request = await read_request(secured)
            if request is None:
                return
            self.log.append((host, request))
            self.hung.set()
            while await secured.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client closed its end: what the test waits for
        finally:
            self.closed_at.append(trio.current_time())
            self.closed.set()
            await trio.aclose_forcefully(secured)


async def test_req_mcp_007_a_cancelled_call_closes_its_engine_request_within_lim_o2(
    autojump_clock: Any,
) -> None:
    """Through the real facade, engine driver and engine client: the outbound request of a
    cancelled call is closed within LIM-O2 (500 ms), long before its own engine timeout
    (LIM-S5, 2 s) would close it, and the call gets no answer."""
    wikipedia = _HangingWikipedia()
    served = make_config(engine_config("wikipedia"))
    async with Rypsok(served, engine_network=wikipedia.engine_network) as rypsok:
        h = Harness(rypsok, served)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(h.run)
            await h.send(search(1, "hang"))
            await wikipedia.hung.wait()
            cancelled = trio.current_time()
            await h.send(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
            )
            await wikipedia.closed.wait()
            await h.in_send.aclose()
    assert wikipedia.closed_at[0] - cancelled < 0.5  # LIM-O2
    assert await h.rest() == b""


async def test_req_ops_002_end_of_input_lets_a_quick_call_finish(autojump_clock: Any) -> None:
    h = Harness(FakeService(), config(shutdown_ms=3000))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        await h.send(search(1, "sleep 2"))
        await h.in_send.aclose()
        (answer,) = await h.lines(1)
    assert answer["id"] == 1


async def test_req_ops_002_end_of_input_aborts_a_hanging_call_within_shutdown_ms(
    autojump_clock: Any,
) -> None:
    service = FakeService()
    h = Harness(service, config(shutdown_ms=1000))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        await h.send(search(1, "hang"))
        await service.started.wait()
        eof = trio.current_time()
        await h.in_send.aclose()
    assert h.finished_at is not None
    assert h.finished_at - eof < 1.0
    assert service.cancelled_at
    assert await h.rest() == b""


async def test_req_ops_002_stop_before_the_first_message_ends_serving(autojump_clock: Any) -> None:
    stop = trio.Event()
    stop.set()
    h = Harness(FakeService(), config(), stop=stop)
    with trio.fail_after(1):
        await h.run()
    assert await h.rest() == b""


async def test_req_ops_002_stop_with_a_call_in_flight_aborts_it(autojump_clock: Any) -> None:
    stop = trio.Event()
    service = FakeService()
    h = Harness(service, config(shutdown_ms=500), stop=stop)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        await h.send(search(1, "hang"))
        await service.started.wait()
        at = trio.current_time()
        stop.set()
    assert h.finished_at is not None
    assert h.finished_at - at < 0.5


async def test_req_mcp_002_lim_o3_overlong_line_is_dropped_and_reading_goes_on() -> None:
    h = Harness(FakeService(), config(), max_line_bytes=1024)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        long_request = json.dumps(search(1, "y" * 2000)).encode() + b"\n"
        # Sent in pieces, as a pipe delivers it.
        for start in range(0, len(long_request), 300):
            await h.in_send.send_all(long_request[start : start + 300])
        await h.send(search(2, "short"))
        (answer,) = await h.lines(1)
        await h.in_send.aclose()
    assert answer["id"] == 2
    assert await h.rest() == b""


async def test_req_mcp_002_a_crash_inside_a_call_is_an_internal_error_and_serving_goes_on() -> None:
    h = Harness(FakeService(), config())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        await h.send(search(1, "crash"))
        (crash,) = await h.lines(1)
        await h.send(search(2, "after"))
        (after,) = await h.lines(1)
        await h.in_send.aclose()
    assert crash == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32603, "message": "Internal error"},
    }
    assert after["result"]["isError"] is False


async def test_req_mcp_002_an_unencodable_answer_is_an_internal_error_and_serving_goes_on() -> None:
    h = Harness(FakeService(), config())
    with capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(h.run)
            await h.send(search(1, "unclean"))
            (unclean,) = await h.lines(1)
            await h.send(search(2, "after"))
            (after,) = await h.lines(1)
            await h.in_send.aclose()
    assert unclean == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32603, "message": "Internal error"},
    }
    assert after["result"]["isError"] is False
    assert [e["replies"] for e in logs.named("stdio_reply_unencodable")] == [1]


async def test_req_mcp_004_a_surrogate_in_the_query_is_refused_before_the_service_sees_it() -> None:
    service = FakeService()
    h = Harness(service, config())
    line = json.dumps(search(1, "rust")).replace('"rust"', '"rust \\ud800"').encode() + b"\n"
    assert b"\\ud800" in line
    async with trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        await h.send(line, search(2, "after"))
        refused, after = await h.lines(2)
        await h.in_send.aclose()
    assert refused["id"] is None
    assert refused["error"]["code"] == -32700
    assert after["id"] == 2
    assert service.callers == ["local"]  # only the second call reached the service


async def test_req_mcp_001_batch_in_revision_2025_03_26_gets_one_array() -> None:
    h = Harness(FakeService(), config())
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {}},
    }
    batch = [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "engine_status"}},
    ]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        await h.send(init)
        await h.lines(1)
        await h.in_send.send_all(json.dumps(batch).encode() + b"\n")
        line = b""
        while b"\n" not in line:
            line += await h.out_recv.receive_some(65536)
        await h.in_send.aclose()
    answers = json.loads(line)
    assert isinstance(answers, list)
    assert [a["id"] for a in answers] == [1, 2]
    assert "structuredContent" not in answers[1]["result"]


async def test_req_sec_014_a_defect_in_the_method_table_answers_internal_error_and_serves_on(
    monkeypatch: Any,
) -> None:
    from rypsok.mcp.protocol.dispatch import Dispatcher

    real = Dispatcher._legacy

    def broken(self: Dispatcher, request: Any, params: dict[str, Any]) -> Any:
        if request.method == "ping" and request.id == "boom":
            raise RuntimeError("a defect")
        return real(self, request, params)

    monkeypatch.setattr(Dispatcher, "_legacy", broken)
    h = Harness(FakeService(), config())
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {}},
    }
    boom = {"jsonrpc": "2.0", "id": "boom", "method": "ping"}
    with capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(h.run)
            await h.send(init, boom)
            _, alone = await h.lines(2)
            # In a batch, the element alone fails; its neighbours are answered.
            await h.send(
                json.dumps([boom, {"jsonrpc": "2.0", "id": 1, "method": "ping"}]).encode() + b"\n"
            )
            line = b""
            while b"\n" not in line:
                line += await h.out_recv.receive_some(65536)
            await h.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            (after,) = await h.lines(1)
            await h.in_send.aclose()
    internal = {
        "jsonrpc": "2.0",
        "id": "boom",
        "error": {"code": -32603, "message": "Internal error"},
    }
    assert alone == internal
    assert json.loads(line) == [internal, {"jsonrpc": "2.0", "id": 1, "result": {}}]
    assert after == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert [e["exception"] for e in logs.named("dispatch_failed")] == ["RuntimeError"] * 2


async def test_req_mcp_001_duplicate_in_flight_id_is_refused(autojump_clock: Any) -> None:
    service = FakeService()
    h = Harness(service, config())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        await h.send(search(1, "hang"))
        await service.started.wait()
        await h.send(search(1, "again"))
        (answer,) = await h.lines(1)
        await h.in_send.aclose()
    assert answer["error"]["code"] == -32600


async def test_req_ops_002_closed_output_stops_serving_without_a_crash() -> None:
    h = Harness(FakeService(), config())
    await h.out_recv.aclose()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        await h.send(search(1, "rust"))
        with trio.fail_after(5):
            await h.done.wait()
    assert h.finished_at is not None


async def test_req_ops_002_no_new_call_starts_once_shutdown_began(autojump_clock: Any) -> None:
    stop = trio.Event()
    service = FakeService()
    h = Harness(service, config(shutdown_ms=3000), stop=stop)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        await h.send(search(1, "sleep 1"))
        await trio.sleep(0.1)
        stop.set()
        await trio.sleep(0.1)
        await h.send(search(2, "late"))
        (answer,) = await h.lines(1)
    assert answer["id"] == 1  # the call in flight finished within the grace period
    assert service.callers == ["local"]  # the late one never reached the service
    assert await h.rest() == b""


async def test_req_ops_002_end_of_input_waits_for_a_batch_in_flight(autojump_clock: Any) -> None:
    h = Harness(FakeService(), config(shutdown_ms=3000))
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {}},
    }
    batch = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "web_search", "arguments": {"query": "sleep 1"}},
        }
    ]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        await h.send(init)
        await h.lines(1)
        await h.in_send.send_all(json.dumps(batch).encode() + b"\n")
        await h.in_send.aclose()
    (answers,) = [json.loads(line) for line in (await h.rest()).splitlines()]
    assert [a["id"] for a in answers] == [1]
    assert answers[0]["result"]["isError"] is False


# -- REQ-TEST-009: the protocol surface, once per supported revision -----------------------

REVISIONS = ("2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26")


class _Session:
    """Requests in one revision: `_meta` on every request in 2026-07-28, a handshake before."""

    def __init__(self, h: Harness, revision: str) -> None:
        self.h = h
        self.revision = revision
        self.instructions = ""

    def request(self, method: str, request_id: int, **params: Any) -> dict[str, Any]:
        if self.revision == "2026-07-28":
            message = modern(method, request_id=request_id, **params)
            message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = self.revision
            return message
        return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}

    async def open(self) -> None:
        if self.revision == "2026-07-28":
            await self.h.send(self.request("server/discover", 0))
        else:
            await self.h.send(
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": self.revision,
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"},
                    },
                },
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
            )
        (opened,) = await self.h.lines(1)
        result = opened["result"]
        if self.revision != "2026-07-28":
            assert result["protocolVersion"] == self.revision
        self.instructions = result["instructions"]


def _flat(schema: dict[str, Any]) -> None:
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert len(schema["properties"]) <= 5  # LIM-I2
    for prop in schema["properties"].values():
        assert prop["type"] in ("string", "integer")  # LIM-I3
        assert not {"properties", "items", "$ref", "anyOf", "oneOf"} & set(prop)


async def test_req_test_009_tool_list_schemas_budget_cancellation_purity_and_eof_in_every_revision(
    autojump_clock: Any,
) -> None:
    listings = []
    for revision in REVISIONS:
        service = FakeService()
        h = Harness(service, config(shutdown_ms=1000))
        session = _Session(h, revision)
        with capture_logs("debug") as logs:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(h.run)
                await session.open()
                await h.send(session.request("tools/list", 1))
                (listed,) = await h.lines(1)
                # Cancellation: the hanging call is aborted, gets no answer, and the next works.
                await h.send(
                    session.request("tools/call", 2, name="web_search", arguments={"query": "hang"})
                )
                await service.started.wait()
                await h.send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": 2},
                    }
                )
                await h.send(
                    session.request(
                        "tools/call", 3, name="web_search", arguments={"query": "after"}
                    )
                )
                (after,) = await h.lines(1)
                # Shutdown on end of input, with a call still in flight.
                await h.send(
                    session.request("tools/call", 4, name="web_search", arguments={"query": "hang"})
                )
                await trio.sleep(0.01)
                eof = trio.current_time()
                await h.in_send.aclose()
        assert h.finished_at is not None
        assert h.finished_at - eof <= 1.0, revision
        assert len(service.cancelled_at) == 2, revision
        # Stdout purity: nothing but the answers was written; logs went to the log stream.
        assert await h.rest() == b"", revision
        # What the log stream got: the cancellation, the one answered call of this revision
        # and the shutdown with the hanging call in flight.
        assert len(logs.named("call_cancelled")) == 1, revision
        answered = logs.named("stdio_call_answered")
        assert [(e["tool"], e["revision"]) for e in answered] == [("web_search", revision)]
        assert len(logs.named("stdio_end_of_input")) == 1, revision
        assert [e["in_flight"] for e in logs.named("shutdown_started")] == [1], revision
        tools = listed["result"]["tools"]
        assert [t["name"] for t in tools] == ["web_search", "web_fetch", "engine_status"]
        base = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True}
        assert tools[0]["annotations"] == {**base, "openWorldHint": True}
        assert tools[1]["annotations"] == {**base, "openWorldHint": True}
        assert tools[2]["annotations"] == {**base, "openWorldHint": False}
        for tool in tools:
            _flat(tool["inputSchema"])
            assert ("outputSchema" in tool) is (revision != "2025-03-26")
        budget = len(session.instructions) + sum(
            len(t["name"])
            + len(t["description"])
            + len(json.dumps(t["inputSchema"], sort_keys=True, separators=(",", ":")))
            for t in tools
        )
        assert budget <= 2000, revision  # LIM-I1
        assert after["id"] == 3
        assert after["result"]["isError"] is False
        listings.append([{k: v for k, v in t.items() if k != "outputSchema"} for t in tools])
    assert all(listing == listings[0] for listing in listings)


# -- REQ-ERR-003 and REQ-SEC-014 through the real facade -----------------------------------


def _real_service() -> tuple[Rypsok, Config]:
    cfg = make_config(engine_config("alpha"), limits={"web_search_per_minute": 2})
    return Rypsok(cfg, engines=[FakeEngine("alpha", failure=Reason.BLOCKED)]), cfg


async def test_req_err_003_call_errors_are_tool_results_with_is_error_and_the_error_object(
    autojump_clock: Any,
) -> None:
    rypsok, cfg = _real_service()
    h = Harness(rypsok, cfg)
    async with rypsok, trio.open_nursery() as nursery:
        nursery.start_soon(h.run)
        answers: dict[Any, dict[str, Any]] = {}
        # One at a time, so that the rate limit meets them in this order.
        for message in (
            search(1, "rust"),  # every engine failed: unavailable
            modern("tools/call", request_id=2, name="web_search", arguments={"max_results": 0}),
            modern("tools/call", request_id=3, name="web_search", arguments={"query": ""}),
            search(4, "rust"),  # the third call that reached the service: over its limit
            modern("tools/call", request_id=5, name="no_such_tool", arguments={}),
            b'{"jsonrpc": "2.0", "id": 6, "method": \n',
        ):
            await h.send(message)
            (answer,) = await h.lines(1)
            answers[answer.get("id")] = answer
        await h.in_send.aclose()
    for request_id, kind in (
        (1, "unavailable"),
        (2, "invalid_request"),
        (3, "invalid_request"),
        (4, "unavailable"),
    ):
        answer = answers[request_id]
        assert "error" not in answer
        result = answer["result"]
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["kind"] == kind
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert answers[1]["result"]["structuredContent"]["error"]["detail"]["reason"] == "all_failed"
    assert answers[4]["result"]["structuredContent"]["error"]["detail"]["reason"] == "rate_limited"
    # Only an unknown tool and a malformed message are protocol errors.
    assert answers[5]["error"]["code"] == -32602
    assert "result" not in answers[5]
    assert answers[None]["error"]["code"] == -32700


MALFORMED_LINES = st.one_of(
    st.binary(max_size=300).map(lambda b: b.replace(b"\n", b" ")),
    st.sampled_from(
        [
            b"[]",
            b"{}",
            b"null",
            b'{"jsonrpc": "2.0", "id": {}, "method": "tools/call"}',
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": []}',
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 5}}',
            b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}',
            b'{"jsonrpc": "2.0", "id": 1e999, "method": "ping"}',
            b"[" * 50_000,
            b'{"a":' * 50_000,
            b"\xff\xfe\x00\x00",
        ]
    ),
    st.recursive(
        st.none() | st.integers() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
        ),
        max_leaves=10,
    ).map(
        lambda v: json.dumps(
            {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": v}
        ).encode()
    ),
)


@settings(max_examples=40, deadline=None)
@given(lines=st.lists(MALFORMED_LINES, min_size=1, max_size=4))
def test_req_sec_014_malformed_protocol_lines_never_end_the_server(lines: list[bytes]) -> None:
    async def main() -> tuple[list[dict[str, Any]], bool]:
        rypsok, cfg = _real_service()
        h = Harness(rypsok, cfg)
        async with rypsok, trio.open_nursery() as nursery:
            nursery.start_soon(h.run)
            for line in lines:
                await h.send(line + b"\n")
            await h.send(
                modern("tools/call", request_id="probe", name="engine_status", arguments={})
            )
            answers: list[dict[str, Any]] = []
            while not answers or answers[-1].get("id") != "probe":
                answers += await h.lines(1)
            alive = not h.done.is_set()
            await h.in_send.aclose()
        return answers, alive

    with capture_logs():
        answers, alive = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert alive
    assert answers[-1]["result"]["isError"] is False
    for answer in answers:
        assert answer["jsonrpc"] == "2.0"
