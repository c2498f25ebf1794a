"""Who holds a connection (LIM-H1), decided by `Admission` alone: room made at the cap, the
callers' shares, the tokenless newcomer, and the peek at a socket's unread buffer through the
object that owns its descriptor. On Trio's MockClock, with socket pairs for the buffers; the
same rules over real connections are in tests/test_http_listener.py."""

from __future__ import annotations

import os
import socket
import time
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from http_helpers import CALLERS, CALLERS_ENV, TOKEN_A, TOKEN_B, make_config

from rypsok.core import telemetry
from rypsok.mcp.caller_tokens import Callers
from rypsok.mcp.http_framing import Http1RequestParser
from rypsok.mcp.http_refusals import RefusalLog
from rypsok.mcp.listener.admission import Admission
from rypsok.mcp.listener.connection import ROOM_GRACE_S, Body, Connection
from rypsok.mcp.listener.descriptors import ACCEPT_HEADROOM, Descriptors, plan_descriptors
from rypsok.mcp.listener.heads import H2_PREFACE, authorization, peek, waiting_request
from rypsok.mcp.listener.memory import TRIM_AFTER_CLOSES, TRIM_QUIET_S, MemoryReturn

if TYPE_CHECKING:
    from collections.abc import Iterator

    from rypsok.config.schema import Config


@pytest.fixture(autouse=True)
def _fresh_counters() -> None:
    telemetry.COUNTERS.reset()


def _http() -> dict[str, int]:
    return telemetry.COUNTERS.snapshot()["http"]


class Closed:
    """A socket already closed by its owner: its `fileno()` is -1, as Python's is."""

    def fileno(self) -> int:
        return -1


class Pair:
    """A connected socket pair: `server` stands for the accepted socket."""

    def __init__(self, sent: bytes = b"") -> None:
        self.server, self.client = socket.socketpair()
        if sent:
            self.client.sendall(sent)

    def close(self) -> None:
        self.server.close()
        self.client.close()


@pytest.fixture
def pairs() -> Iterator[list[Pair]]:
    made: list[Pair] = []
    yield made
    for pair in made:
        pair.close()


def _head(token: str | None = None, method: bytes = b"POST", *more: bytes) -> bytes:
    lines = [method + b" /mcp HTTP/1.1", b"Host: 127.0.0.1", b"Content-Length: 2", *more]
    if token is not None:
        lines.append(b"Authorization: Bearer " + token.encode())
    return b"\r\n".join(lines) + b"\r\n\r\n{}"


def _admission(config: Config, *, callers: bool = False, cap: int | None = None) -> Admission:
    known = Callers.from_config(config, CALLERS_ENV) if callers else None
    return Admission(config, known, RefusalLog(), MemoryReturn(), cap=cap)


def _pair(pairs: list[Pair], sent: bytes = b"") -> socket.socket:
    pair = Pair(sent)
    pairs.append(pair)
    return pair.server


# -- the descriptor a connection reads through -------------------------------------------------


async def test_req_sec_018_a_closed_connection_is_never_peeked_through_its_old_descriptor(
    pairs: list[Pair],
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Its descriptor number, closed, is the next socket's: the connection's peek finds
    nothing (its own socket is closed), never the other socket's head, never EBADF."""
    first = Pair()
    connection = Connection("ipv4", first.server)
    number = first.server.fileno()
    first.close()
    second = Pair(_head(TOKEN_A))
    pairs.append(second)
    assert second.server.fileno() == number  # the number lives on in another socket
    assert connection.waiting_head() is None
    assert peek(first.server) == b""


async def test_req_sec_018_a_descriptor_that_is_no_socket_is_nothing_to_peek(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class Number:
        def fileno(self) -> int:
            return 0  # standard input: a descriptor, not a socket

    assert peek(Number()) == b""
    assert peek(Closed()) == b""


async def test_req_sec_018_a_peek_leaves_the_bytes_for_the_read(pairs: list[Pair]) -> None:
    server = _pair(pairs, _head())
    assert peek(server) == _head()
    assert peek(server) == _head()
    server.setblocking(False)
    assert server.recv(65536) == _head()


def test_req_sec_018_a_peek_never_waits_for_bytes_to_come(pairs: list[Pair]) -> None:
    """A socket of the standard library is peeked as it is: one with a timeout (whose
    receive would first wait that long for bytes) and one in blocking mode, nothing sent on
    either, each answer b"" at once; what is sent afterwards is there to peek."""
    with_timeout = Pair()
    blocking = Pair()
    pairs += [with_timeout, blocking]
    with_timeout.server.settimeout(30)
    blocking.server.setblocking(True)
    began = time.monotonic()
    assert peek(with_timeout.server) == b""
    assert peek(blocking.server) == b""
    assert time.monotonic() - began < 5  # far from the timeout's 30 s
    with_timeout.client.sendall(_head())
    blocking.client.sendall(_head())
    assert peek(with_timeout.server) == _head()
    assert peek(blocking.server) == _head()


@pytest.mark.parametrize(
    ("peeked", "waiting"),
    [
        (b"", None),
        (b"POST /mcp HTTP/1.1\r\nHost: a\r\n", None),
        (b"POST /mcp HTTP/1.1\r\nHost: a\r\n\r\n", b"POST /mcp HTTP/1.1\r\nHost: a"),
        (H2_PREFACE, None),
        (H2_PREFACE + b"\x00\x00\x00\x01\x05\x00\x00\x00\x01", b""),  # HEADERS, END_HEADERS
        (H2_PREFACE + b"\x00\x00\x00\x01\x01\x00\x00\x00\x01", None),  # END_STREAM only
        (
            H2_PREFACE
            + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
            + b"\x00\x00\x00\x09\x04\x00\x00\x00\x01",
            b"",
        ),
        (H2_PREFACE + b"\x00\x00\x05\x01\x04\x00\x00\x00\x01abcd", None),  # a frame cut
        (H2_PREFACE[:3] + b"\r\n\r\n", None),
        # A method that begins as the preface does is an HTTP/1 head all the same.
        (b"PROPFIND /mcp HTTP/1.1\r\n\r\n", b"PROPFIND /mcp HTTP/1.1"),
        # Frames without the preface before them are no HTTP/2 request.
        (b"X" * 24 + b"\x00\x00\x00\x01\x04\x00\x00\x00\x01", None),
    ],
)
def test_req_sec_018_a_waiting_request_is_a_whole_head(
    peeked: bytes, waiting: bytes | None
) -> None:
    assert waiting_request(peeked) == waiting


# -- room at the cap -------------------------------------------------------------------------


async def test_req_sec_018_below_the_cap_a_newcomer_is_admitted_and_counted(
    pairs: list[Pair],
    autojump_clock: trio.testing.MockClock,
) -> None:
    admission = _admission(make_config(), cap=2)
    first = admission.admit(Closed(), "ipv4")
    second = admission.admit(_pair(pairs, _head()), "ipv6")
    assert first is not None
    assert second is not None
    assert (first.family, second.family) == ("ipv4", "ipv6")
    assert admission.connections == 2
    admission.forget(first)
    admission.forget(first)  # once only
    assert admission.connections == 1
    assert _http() == {}


async def test_req_sec_018_at_the_cap_a_newcomer_without_its_request_waits_for_the_grace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    admission = _admission(make_config(), cap=2)
    old = admission.admit(Closed(), "ipv4")
    await trio.sleep(0.1)
    young = admission.admit(Closed(), "ipv4")
    assert old is not None
    assert young is not None
    assert admission.admit(Closed(), "ipv4") is None  # nobody settled yet
    assert _http() == {"too_many_connections": 1}
    await trio.sleep(ROOM_GRACE_S - 0.05)  # `old` settled, `young` not
    newcomer = admission.admit(Closed(), "ipv4")
    assert newcomer is not None
    assert old.evicted
    assert old.scope.cancel_called
    assert not young.evicted
    assert admission.connections == 2
    assert _http() == {"too_many_connections": 1, "connection_evicted": 1}


async def test_req_sec_018_at_the_cap_a_newcomer_with_its_request_takes_the_longest_waiting(
    pairs: list[Pair],
    autojump_clock: trio.testing.MockClock,
) -> None:
    admission = _admission(make_config(), cap=3)
    oldest = admission.admit(Closed(), "ipv4")
    await trio.sleep(0.01)
    busy = admission.admit(Closed(), "ipv4")
    await trio.sleep(0.01)
    newest = admission.admit(Closed(), "ipv4")
    assert oldest is not None
    assert busy is not None
    assert newest is not None
    oldest.in_flight = 1  # a request running: never closed for room
    oldest.bodies.append(Body(trio.current_time(), 10, trio.current_time() + 30))
    assert admission.admit(_pair(pairs, _head()), "ipv4") is not None
    assert busy.evicted
    assert not oldest.evicted
    assert not newest.evicted
    assert admission.connections == 3


async def test_req_sec_018_a_connection_about_to_run_its_request_makes_no_room(
    pairs: list[Pair],
    autojump_clock: trio.testing.MockClock,
) -> None:
    admission = _admission(make_config(), cap=2)
    ready = admission.admit(Closed(), "ipv4")
    waiting = admission.admit(_pair(pairs, _head()), "ipv4")  # its head unread in its buffer
    assert ready is not None
    assert waiting is not None
    ready.ready = True
    await trio.sleep(ROOM_GRACE_S * 2)
    assert admission.admit(_pair(pairs, _head()), "ipv4") is None
    assert not ready.evicted
    assert not waiting.evicted
    # Over HTTP/2 the first bytes after the preface protect it for the grace only.
    ready.h2 = object()  # type: ignore[assignment]
    ready.ready_since = trio.current_time() - ROOM_GRACE_S / 2
    assert ready.protected(trio.current_time())
    ready.ready_since = trio.current_time() - ROOM_GRACE_S
    assert admission.admit(_pair(pairs, _head()), "ipv4") is not None
    assert ready.evicted
    assert not waiting.evicted


async def test_req_sec_018_a_request_whose_body_cannot_arrive_in_time_makes_room(
    pairs: list[Pair],
    autojump_clock: trio.testing.MockClock,
) -> None:
    admission = _admission(make_config(), cap=1)
    slow = admission.admit(Closed(), "ipv4")
    assert slow is not None
    started = trio.current_time()
    body = Body(started, 1000, started + 30)
    slow.in_flight = 1
    slow.bodies.append(body)
    await trio.sleep(ROOM_GRACE_S / 2)
    assert admission.admit(_pair(pairs, _head()), "ipv4") is None  # within the grace
    await trio.sleep(ROOM_GRACE_S)
    body.received = 100  # 100 bytes in 1.5 s: the other 900 need 13.5 s, in time
    assert admission.admit(_pair(pairs, _head()), "ipv4") is None
    body.received = 10  # 990 bytes at this rate take 148 s: past LIM-H5
    slow.in_flight = 2  # and a second request without a body being read: it stays
    assert admission.admit(_pair(pairs, _head()), "ipv4") is None
    slow.in_flight = 1
    assert admission.admit(_pair(pairs, _head()), "ipv4") is not None
    assert slow.evicted


@pytest.mark.parametrize(
    ("received", "expected", "elapsed", "doomed"),
    [
        (0, 10, 0.5, False),  # within the grace nothing is judged
        (0, 10, 1.0, True),  # past it, nothing yet: doomed
        (10, 10, 5.0, False),  # whole
        (5, 10, 10.0, False),  # the rest by 20 s, before 30
        (5, 10, 16.0, True),  # the rest by 32 s, after 30
        (20, 10, 29.0, False),  # more than declared: nothing left
        (20, 10, 31.0, True),  # nothing left, but LIM-H5 has passed
        (5, 10, 15.0, False),  # the rest exactly at 30 s: in time
    ],
)
async def test_req_sec_018_a_body_is_doomed_when_its_rate_misses_the_request_time(
    received: int,
    expected: int,
    elapsed: float,
    doomed: bool,
    autojump_clock: trio.testing.MockClock,
) -> None:
    started = trio.current_time() + 100.0  # times are differences: no clock starts at 0
    body = Body(started, expected, started + 30)
    body.received = received
    assert body.doomed(started + elapsed) is doomed


async def test_req_sec_018_a_new_body_has_nothing_yet(
    autojump_clock: trio.testing.MockClock,
) -> None:
    started = trio.current_time() + 100.0
    body = Body(started, 10, started + 30)
    assert (body.received, body.whole, body.expected) == (0, False, 10)
    assert not body.doomed(started + ROOM_GRACE_S / 2)
    assert body.doomed(started + ROOM_GRACE_S)  # nothing within the grace: doomed


async def test_req_sec_018_make_room_closes_a_settled_waiting_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    admission = _admission(make_config(), cap=4)
    busy = admission.admit(Closed(), "ipv4")
    assert busy is not None
    busy.ready = True
    assert not admission.make_room()
    young = admission.admit(Closed(), "ipv4")
    assert young is not None
    assert not admission.make_room()  # not settled yet
    await trio.sleep(ROOM_GRACE_S)
    assert admission.make_room()
    assert young.evicted
    assert not busy.evicted
    assert admission.connections == 1


# -- the tokenless newcomer ------------------------------------------------------------------


async def test_req_sec_018_at_the_cap_a_tokenless_request_makes_no_room(
    pairs: list[Pair],
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    admission = _admission(config, callers=True, cap=2)
    waiting = admission.admit(Closed(), "ipv4")
    await trio.sleep(ROOM_GRACE_S)
    tokenless = admission.admit(_pair(pairs, _head()), "ipv4")
    assert waiting is not None
    assert tokenless is not None
    waiting.ready = True  # its request about to run: it makes no room
    assert tokenless.tokenless
    assert not waiting.tokenless
    for head in (_head(), _head("not-a-callers-token-0123456789abcdef")):
        assert admission.admit(_pair(pairs, head), "ipv4") is None
    assert not waiting.evicted
    assert not tokenless.evicted
    assert _http() == {"too_many_connections": 2}
    # A CORS preflight carries no token by design: it makes room as any request does.
    preflight_field = b"Access-Control-Request-Method: POST"
    preflight = admission.admit(_pair(pairs, _head(None, b"OPTIONS", preflight_field)), "ipv4")
    assert preflight is not None
    assert not preflight.tokenless
    assert tokenless.evicted  # a tokenless request loses nothing: it goes first
    assert not waiting.evicted


def _probe(request_line: bytes) -> bytes:
    return request_line + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


@pytest.mark.parametrize(
    "request_line",
    [b"GET /healthz", b"GET /readyz", b"HEAD /healthz", b"HEAD /readyz"],
)
async def test_req_dep_002_at_the_cap_a_health_probe_makes_room_as_a_callers_request_does(
    pairs: list[Pair],
    autojump_clock: trio.testing.MockClock,
    request_line: bytes,
) -> None:
    # A probe carries no token by design: through a tokenless flood at the cap it is still
    # answered, the flood's connection making room for it (an orchestrator's liveness).
    config = make_config(CALLERS, CALLERS_ENV)
    admission = _admission(config, callers=True, cap=1)
    flooding = admission.admit(_pair(pairs, _head()), "ipv4")
    assert flooding is not None
    assert flooding.tokenless
    probe = admission.admit(_pair(pairs, _probe(request_line)), "ipv4")
    assert probe is not None
    assert not probe.tokenless
    assert flooding.evicted
    # A request to another path without a token still makes no room.
    assert admission.admit(_pair(pairs, _probe(b"GET /healthzz")), "ipv4") is None


async def test_req_sec_018_a_tokenless_connection_claimed_by_a_caller_is_no_longer_one(
    pairs: list[Pair],
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    admission = _admission(config, callers=True, cap=2)
    connection = admission.admit(_pair(pairs, _head()), "ipv4")
    assert connection is not None
    assert connection.tokenless
    assert admission.claim(connection, "alpha")
    assert not connection.tokenless
    assert connection.holder == "alpha"


async def test_req_sec_018_without_callers_no_request_is_tokenless(
    pairs: list[Pair], autojump_clock: trio.testing.MockClock
) -> None:
    admission = _admission(make_config(), callers=True, cap=1)
    admission.admit(Closed(), "ipv4")
    await trio.sleep(ROOM_GRACE_S)
    newcomer = admission.admit(_pair(pairs, _head()), "ipv4")
    assert newcomer is not None
    assert not newcomer.tokenless


# -- the callers' shares ---------------------------------------------------------------------


async def test_req_sec_018_a_callers_newcomer_past_its_share_takes_its_own_waiting_connection(
    pairs: list[Pair],
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    admission = _admission(config, callers=True, cap=4)
    assert admission.share == 2
    a_busy = admission.admit(_pair(pairs, _head(TOKEN_A)), "ipv4")
    a_idle = admission.admit(_pair(pairs, _head(TOKEN_A)), "ipv4")
    b_idle = admission.admit(_pair(pairs, _head(TOKEN_B)), "ipv4")
    assert a_busy is not None
    assert a_idle is not None
    assert b_idle is not None
    assert (a_busy.holder, a_idle.holder, b_idle.holder) == ("alpha", "alpha", "beta")
    a_busy.in_flight = a_idle.in_flight = 1
    b_idle.sock.setblocking(False)
    b_idle.sock.recv(65536)  # B's request read: B's connection waits for its next
    b_idle.quiet_since -= 10  # the longest waiting of all, but not A's
    assert admission.admit(_pair(pairs, _head(TOKEN_A)), "ipv4") is None
    assert _http() == {"caller_share": 1}
    a_idle.in_flight = 0
    a_idle.sock.setblocking(False)
    a_idle.sock.recv(65536)  # its request read and answered: it waits for the next
    third = admission.admit(_pair(pairs, _head(TOKEN_A)), "ipv4")
    assert third is not None
    assert third.holder == "alpha"
    assert a_idle.evicted
    assert not b_idle.evicted
    assert not a_busy.evicted
    # B is below its share: its newcomer is admitted without closing anything.
    assert admission.connections == 3
    assert admission.admit(_pair(pairs, _head(TOKEN_B)), "ipv4") is not None
    assert admission.connections == 4


async def test_req_sec_018_the_apps_claim_keeps_the_share_and_moves_a_connection(
    pairs: list[Pair],
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    admission = _admission(config, callers=True, cap=4)
    first = admission.admit(Closed(), "ipv4")
    second = admission.admit(Closed(), "ipv4")
    third = admission.admit(Closed(), "ipv4")
    assert first is not None
    assert second is not None
    assert third is not None
    assert admission.claim(first, "alpha")
    assert admission.claim(first, "alpha")
    assert admission.claim(second, "alpha")
    second.in_flight = first.in_flight = 1
    assert not admission.claim(third, "alpha")  # A's two have requests running
    assert admission.claim(third, "beta")
    first.in_flight = 0
    assert admission.claim(third, "alpha")  # from B to A: A's waiting one goes
    assert first.evicted
    assert third.holder == "alpha"
    admission.forget(second)
    admission.forget(third)
    fourth = admission.admit(Closed(), "ipv4")
    assert fourth is not None
    assert admission.claim(fourth, "alpha")
    assert admission.claim(fourth, "beta")


async def test_req_sec_018_a_waiting_head_past_its_callers_share_makes_room(
    pairs: list[Pair],
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    admission = _admission(config, callers=True, cap=2)
    assert admission.share == 1
    held = admission.admit(Closed(), "ipv4")
    assert held is not None
    assert admission.claim(held, "alpha")
    held.in_flight = 1
    # A's second connection with its head still unread: it would be refused, so it goes.
    extra = admission.admit(Closed(), "ipv4")
    assert extra is not None
    extra.sock = _pair(pairs, _head(TOKEN_A))
    assert admission.admit(_pair(pairs, _head(TOKEN_B)), "ipv4") is not None
    assert extra.evicted
    assert not held.evicted


async def test_req_sec_018_a_kept_alive_connection_between_requests_shows_its_next_head(
    pairs: list[Pair],
    autojump_clock: trio.testing.MockClock,
) -> None:
    connection = Connection("ipv4", _pair(pairs, _head()))
    connection.gate = Http1RequestParser(16384)
    assert connection.waiting_head() is not None
    connection.in_flight = 1
    assert connection.waiting_head() is None
    connection.in_flight = 0
    assert connection.gate.feed(b"POST /mcp HTTP/1.1\r\n") == b""
    assert connection.waiting_head() is None  # its head begun through the gate
    h2 = Connection("ipv4", _pair(pairs, H2_PREFACE + b"\x00\x00\x00\x01\x05\x00\x00\x00\x01"))
    assert h2.waiting_head() == b""
    h2.gate = Http1RequestParser(16384)
    assert h2.waiting_head() is None  # a preface after HTTP/1 requests is no request


# -- the descriptor plan (LIM-H8) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "connections"),
    [
        (None, 64),
        (20000, 64),
        (142, 64),  # the unit: 16 + 32 + 2 * 4 + 7 * 2 kept back, 8 in passing
        (141, 63),
        (128, 50),  # the PDF workers' 14 taken from the connections
        (100, 22),
        (60, 1),  # fewer than the process needs: one connection, and the warning
    ],
)
def test_lim_h8_the_connections_get_what_the_descriptor_limit_leaves(
    limit: int | None, connections: int
) -> None:
    plan = plan_descriptors(make_config(), limit)
    assert plan.reserve == 16 + 32 + 2 * 4 + 7 * 2
    assert plan.needed == 64 + 70 + 8
    assert plan.connections == connections
    assert plan.sockets == connections + ACCEPT_HEADROOM
    assert plan.short is (limit is not None and connections < 64)


def test_lim_h8_the_reserve_follows_the_outbound_pools() -> None:
    config = make_config("[limits]\noutbound_in_flight = 8\nfetches_in_flight = 2\n")
    plan = plan_descriptors(config, 128)
    assert plan.reserve == 16 + 8 + 4 + 7 * 2
    assert plan.connections == 64  # max_connections, within 128 - 42 - 8
    assert not plan.short


@pytest.mark.parametrize(("workers", "reserve"), [(1, 16 + 32 + 8 + 7), (8, 16 + 32 + 8 + 56)])
def test_lim_h8_the_reserve_follows_the_pdf_workers(workers: int, reserve: int) -> None:
    """Each PDF worker (LIM-C10) holds up to seven descriptors while it starts."""
    plan = plan_descriptors(make_config(f"[fetch]\npdf_workers = {workers}\n"), 142)
    assert plan.reserve == reserve
    assert plan.connections == min(64, 142 - reserve - 8)
    assert plan.needed == 64 + reserve + 8


async def test_lim_h8_the_accept_loop_waits_for_a_socket_to_close(
    autojump_clock: trio.testing.MockClock,
) -> None:
    descriptors = Descriptors(2)
    descriptors.taken()
    descriptors.taken()
    assert not descriptors.room()
    waited = []

    async def wait() -> None:
        await descriptors.wait_for_room()
        waited.append(trio.current_time())

    began = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.sleep(5)
        assert waited == []
        descriptors.released()
    assert waited == [began + 5]
    assert descriptors.room()
    assert descriptors.open == 1


async def test_req_sec_018_a_waiting_connection_goes_before_an_older_one_with_a_doomed_body(
    pairs: list[Pair], autojump_clock: trio.testing.MockClock
) -> None:
    """Both may make room; the one without a request loses nothing at all, so it goes first,
    however long the other has waited."""
    admission = _admission(make_config(), cap=2)
    doomed = admission.admit(Closed(), "ipv4")
    assert doomed is not None
    started = trio.current_time()
    doomed.in_flight = 1
    doomed.bodies.append(Body(started, 1000, started + 30))  # nothing came: doomed
    await trio.sleep(5)
    idle = admission.admit(Closed(), "ipv4")
    assert idle is not None
    await trio.sleep(ROOM_GRACE_S)
    assert admission.admit(_pair(pairs, _head()), "ipv4") is not None
    assert idle.evicted
    assert not doomed.evicted
    assert admission.admit(_pair(pairs, _head()), "ipv4") is not None
    assert doomed.evicted  # then the doomed one, when nothing else can go


async def test_req_sec_018_with_one_caller_it_may_hold_every_connection(
    pairs: list[Pair], autojump_clock: trio.testing.MockClock
) -> None:
    """No share to keep with one caller: at the cap its newcomer is refused for the cap,
    not for a share, and the app's claims never fail."""
    config = make_config(
        '[[service.http.auth.callers]]\nid = "alpha"\ntoken_env = "RYPSOK_TOKEN_A"\n',
        CALLERS_ENV,
    )
    admission = _admission(config, callers=True, cap=2)
    first = admission.admit(_pair(pairs, _head(TOKEN_A)), "ipv4")
    second = admission.admit(_pair(pairs, _head(TOKEN_A)), "ipv4")
    assert first is not None
    assert second is not None
    assert first.holder is None  # no share to count it in
    assert admission.claim(first, "alpha")
    assert admission.claim(second, "alpha")
    first.in_flight = second.in_flight = 1
    assert admission.admit(_pair(pairs, _head(TOKEN_A)), "ipv4") is None
    assert _http() == {"too_many_connections": 1}


async def test_req_sec_018_with_more_callers_than_connections_each_holds_one(
    pairs: list[Pair], autojump_clock: trio.testing.MockClock
) -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    admission = _admission(config, callers=True, cap=1)
    connection = admission.admit(Closed(), "ipv4")
    assert connection is not None
    assert admission.claim(connection, "alpha")
    assert connection.holder == "alpha"


async def test_req_sec_018_the_longest_waiting_of_many_goes_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    admission = _admission(make_config(), cap=12)
    made = []
    for _ in range(12):
        connection = admission.admit(Closed(), "ipv4")
        assert connection is not None
        made.append(connection)
        await trio.sleep(0.5)
    for expected in made[:3]:
        assert admission.admit(Closed(), "ipv4") is not None
        assert [c for c in made if c.evicted] == made[: made.index(expected) + 1]


async def test_req_sec_018_a_claimed_connection_waiting_makes_room_for_anyone(
    pairs: list[Pair], autojump_clock: trio.testing.MockClock
) -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    admission = _admission(config, callers=True, cap=2)
    claimed = admission.admit(Closed(), "ipv4")
    busy = admission.admit(Closed(), "ipv4")
    assert claimed is not None
    assert busy is not None
    assert admission.claim(claimed, "alpha")
    busy.ready = True
    await trio.sleep(ROOM_GRACE_S)
    assert admission.admit(_pair(pairs, _head(TOKEN_B)), "ipv4") is not None
    assert claimed.evicted


async def test_req_sec_018_a_callers_closed_connection_frees_one_place_in_its_share(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    admission = _admission(config, callers=True, cap=4)
    held = [admission.admit(Closed(), "ipv4") for _ in range(4)]
    for connection in held:
        assert connection is not None
        connection.in_flight = 1
    assert admission.claim(held[0], "alpha")
    assert admission.claim(held[1], "alpha")
    admission.forget(held[0])
    assert admission.claim(held[2], "alpha")  # the place held[0] left
    assert not admission.claim(held[3], "alpha")  # and no other
    assert admission.connections == 3


async def test_req_perf_003_connections_forgotten_by_admission_count_for_the_trim(
    autojump_clock: trio.testing.MockClock,
) -> None:
    memory = MemoryReturn()
    admission = Admission(make_config(), None, RefusalLog(), memory)
    trims: list[float] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(memory.run, lambda: trims.append(trio.current_time()))
        made = [admission.admit(Closed(), "ipv4") for _ in range(TRIM_AFTER_CLOSES)]
        for connection in made:
            assert connection is not None
            admission.forget(connection)
            admission.forget(connection)  # counted once
        await trio.sleep(TRIM_QUIET_S * 2)
        assert len(trims) == 1
        nursery.cancel_scope.cancel()


async def test_req_sec_018_a_kept_alive_connection_of_a_caller_at_its_share_keeps_its_next_request(
    pairs: list[Pair], autojump_clock: trio.testing.MockClock
) -> None:
    """A's next request waits unread on one of A's own connections: A is at its share, but
    that request is one of A's, so the connection is not closed for anyone's room; and A's
    requests on its own connections are claimed again without a look at its share."""
    config = make_config(CALLERS, CALLERS_ENV)
    admission = _admission(config, callers=True, cap=2)
    assert admission.share == 1
    kept = admission.admit(Closed(), "ipv4")
    other = admission.admit(Closed(), "ipv4")
    assert kept is not None
    assert other is not None
    assert admission.claim(kept, "alpha")
    assert admission.claim(other, "beta")
    other.in_flight = 1
    kept.sock = _pair(pairs, _head(TOKEN_A))  # its next request, not read yet
    await trio.sleep(ROOM_GRACE_S)
    assert admission.admit(Closed(), "ipv4") is None  # a newcomer: no room for it
    assert admission.admit(_pair(pairs, _head(TOKEN_B)), "ipv4") is None  # B at its share
    assert not kept.evicted
    assert _http() == {"too_many_connections": 1, "caller_share": 1}
    kept.in_flight = 1
    assert admission.claim(kept, "alpha")  # its second request: A's already
    assert kept.holder == "alpha"


async def test_req_sec_018_the_first_bytes_claim_a_connection_for_the_caller_they_name(
    pairs: list[Pair], autojump_clock: trio.testing.MockClock
) -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    admission = _admission(config, callers=True, cap=4)
    made = [admission.admit(Closed(), "ipv4") for _ in range(4)]
    first, second, third, fourth = made
    assert first is not None
    assert second is not None
    assert third is not None
    assert fourth is not None
    assert admission.claimed(first, _head(TOKEN_A))
    assert first.holder == "alpha"
    assert admission.claimed(second, b"POST /mcp HTTP/1.1\r\nAuthorization: Bear")  # cut
    assert admission.claimed(second, _head())  # no token: the app answers it
    assert second.holder is None
    assert admission.claimed(second, _head(TOKEN_A))
    first.in_flight = second.in_flight = 1
    assert not admission.claimed(third, _head(TOKEN_A))  # A's two have requests running
    assert third.holder is None
    assert admission.claimed(third, _head(TOKEN_B))
    assert third.holder == "beta"


async def test_req_sec_018_a_connection_claimed_by_another_caller_leaves_the_first_ones_share(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = make_config(CALLERS, CALLERS_ENV)
    admission = _admission(config, callers=True, cap=2)
    assert admission.share == 1
    moved = admission.admit(Closed(), "ipv4")
    other = admission.admit(Closed(), "ipv4")
    assert moved is not None
    assert other is not None
    moved.in_flight = other.in_flight = 1
    assert admission.claim(moved, "beta")
    assert admission.claim(moved, "alpha")  # its next request carries A's token
    assert admission.claim(other, "beta")  # B holds nothing now: one place again
    admission.forget(moved)
    third = admission.admit(Closed(), "ipv4")
    assert third is not None
    third.in_flight = 1
    assert not admission.claim(third, "beta")  # and only one
    assert admission.claim(third, "alpha")


def test_req_sec_018_a_socket_on_descriptor_0_is_peeked_like_any_other(pairs: list[Pair]) -> None:
    """A process started with standard input closed gives descriptor 0 to its first socket:
    only -1 means closed."""
    server = _pair(pairs, _head())
    saved = os.dup(0)
    try:
        os.dup2(server.fileno(), 0)

        class Zero:
            def fileno(self) -> int:
                return 0

        assert peek(Zero()) == _head()
    finally:
        os.dup2(saved, 0)
        os.close(saved)


# -- a connection's state, as the watchdog and the room at the cap read it ------------------


async def test_req_sec_018_a_new_connection_waits_with_nothing_begun(
    autojump_clock: trio.testing.MockClock,
) -> None:
    connection = Connection("ipv6", Closed())
    now = trio.current_time()
    assert (connection.family, connection.quiet_since) == ("ipv6", now)
    assert (connection.ready, connection.ready_since, connection.in_flight) == (False, 0.0, 0)
    assert connection.head_since is None
    assert not connection.closed_by_peer
    assert not connection.evicted
    assert not connection.tokenless
    assert connection.holder is None
    assert not connection.wake.is_set()
    assert connection.scopes == set()
    assert (connection.gate, connection.h2, connection.replay) == (None, None, None)
    assert connection.bodies == []
    assert not connection.protected(now)


async def test_req_mcp_007_a_peer_gone_cancels_its_requests_and_wakes_the_watchdog(
    autojump_clock: trio.testing.MockClock,
) -> None:
    connection = Connection("ipv4", Closed())
    first, second = trio.CancelScope(), trio.CancelScope()
    connection.scopes.update({first, second})
    connection.peer_gone()
    assert connection.closed_by_peer
    assert first.cancel_called
    assert second.cancel_called
    assert connection.wake.is_set()


async def test_req_sec_022_a_head_begun_keeps_its_start_until_it_is_whole(
    autojump_clock: trio.testing.MockClock,
) -> None:
    connection = Connection("ipv4", Closed())
    connection.head_started(False)
    assert connection.head_since is None
    assert not connection.wake.is_set()
    began = trio.current_time()
    connection.head_started(True)
    assert connection.head_since == began
    assert connection.wake.is_set()  # the watchdog's deadline moves closer
    connection.wake = trio.Event()
    await trio.sleep(3)
    connection.head_started(True)  # more of the same head: its start stays
    assert connection.head_since == began
    assert not connection.wake.is_set()
    connection.head_started(False)  # whole: no head bound from here
    assert connection.head_since is None


async def test_req_sec_018_a_request_ended_starts_the_wait_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    connection = Connection("ipv4", Closed())
    connection.ready = True
    await trio.sleep(7)
    connection.request_ended()
    assert connection.quiet_since == trio.current_time()
    assert not connection.ready
    assert not connection.wake.is_set()


async def test_req_sec_018_an_h2_connection_shows_no_waiting_head(
    pairs: list[Pair], autojump_clock: trio.testing.MockClock
) -> None:
    """Past its preface an h2 connection's requests are streams the h2 scanner follows, not
    heads in its buffer."""
    connection = Connection("ipv4", _pair(pairs, _head()))
    assert connection.waiting_head() is not None
    connection.h2 = object()  # type: ignore[assignment]
    assert connection.waiting_head() is None


@pytest.mark.parametrize(
    ("head", "found"),
    [
        (b"POST /mcp HTTP/1.1\r\nAuthorization: Bearer a\r\nHost: h", b"Bearer a"),
        (b"POST /mcp HTTP/1.1\r\nHost: h\r\nauthorization:Bearer b ", b"Bearer b"),
        (b"POST /mcp HTTP/1.1\r\nHost: h", None),
        # The request line is no field, whatever it holds.
        (b"authorization: Bearer c\r\nHost: h", None),
    ],
)
def test_req_sec_018_the_token_of_a_waiting_head_is_its_authorization_field(
    head: bytes, found: bytes | None
) -> None:
    assert authorization(head) == found
