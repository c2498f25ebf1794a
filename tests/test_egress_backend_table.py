"""The judging network backend's edges (rypsok.core.egress.backend), one test per case.

REQ-SEC-006/007: every connection goes to an address the policy admitted. These tests take
the backend's parts one by one: the system resolver's reading of getaddrinfo, the host
forms httpcore hands over, an answer holding something that is not an address, and the
stream view httpcore reads connection facts from (its pool's reuse test among them).
"""

from __future__ import annotations

import ipaddress
import socket
from typing import TYPE_CHECKING, Any

import httpcore
import pytest
import trio
import trio.testing
from fetch_helpers import Authority

from rypsok.core.egress import EgressPolicy, EgressRefused, Refusal
from rypsok.core.egress.backend import EgressBackend, SystemResolver, _TrioStream

if TYPE_CHECKING:
    from collections.abc import Sequence


class _ListResolver:
    def __init__(self, answer: Sequence[object]) -> None:
        self.answer = answer

    async def resolve(self, name: str, port: int) -> Sequence[Any]:
        return self.answer


async def test_req_sec_007_something_not_an_address_in_an_answer_is_passed_over() -> None:
    policy = EgressPolicy().with_allow("127.0.0.2")
    resolver = _ListResolver(["127.0.0.9", None, ipaddress.ip_address("127.0.0.2")])
    backend = EgressBackend(policy, resolver=resolver)
    admitted = await backend.admitted_addresses("docs.python.org", 443)
    assert admitted == [ipaddress.ip_address("127.0.0.2")]


@pytest.mark.parametrize(
    ("host", "refusal"),
    [("::1", Refusal.LOOPBACK), ("fe80::1", Refusal.LINK_LOCAL), ("127.0.0.1", Refusal.LOOPBACK)],
)
async def test_req_sec_007_an_address_httpcore_hands_over_bare_is_judged(
    host: str, refusal: Refusal
) -> None:
    # httpcore gives an IPv6 host without its brackets: it is read as an address, and judged.
    backend = EgressBackend(EgressPolicy(), resolver=_ListResolver([]))
    with pytest.raises(EgressRefused) as caught:
        await backend.admitted_addresses(host, 443)
    assert caught.value.refusal is refusal


async def test_req_sec_007_the_system_resolvers_answer_is_read_as_addresses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def getaddrinfo(*_: object, **__: object) -> list[tuple[Any, ...]]:
        stream = socket.SOCK_STREAM
        return [
            (socket.AF_INET6, stream, 6, "", ("fe80::1%eth0", 443, 0, 2)),  # a scope
            (socket.AF_UNIX, stream, 0, "", "/run/x.sock"),  # not an Internet address
            (socket.AF_INET, stream, 6, "", ("192.0.2.7", 443)),
            (socket.AF_INET, stream, 6, "", ("not-an-address", 443)),
            (socket.AF_INET, stream, 6, "", ("192.0.2.7", 443)),  # the same again
            # Another family is never read as an address, whatever its entry holds (a
            # resolver an embedding host installs in Trio may answer anything).
            (socket.AF_UNIX, stream, 0, "", ("192.0.2.66", 0)),
            (socket.AF_INET6, stream, 6, "", ("2001:db8::5", 443, 0, 0)),
        ]

    monkeypatch.setattr(trio.socket, "getaddrinfo", getaddrinfo)
    answer = await SystemResolver().resolve("site.example", 443)
    # Every address after a passed-over entry is still read, in the answer's order.
    assert answer == [
        ipaddress.ip_address("fe80::1"),
        ipaddress.ip_address("192.0.2.7"),
        ipaddress.ip_address("2001:db8::5"),
    ]


async def _pair() -> tuple[trio.SocketStream, trio.SocketStream, trio.SocketListener]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    listener = listeners[0]
    port = listener.socket.getsockname()[1]
    client = await trio.open_tcp_stream("127.0.0.1", port)
    server = await listener.accept()
    assert isinstance(server, trio.SocketStream)
    return client, server, listener


async def test_req_sec_006_the_connection_facts_httpcore_reads_are_the_sockets() -> None:
    client, server, listener = await _pair()
    view = _TrioStream(client)
    assert view.get_extra_info("socket") is client.socket
    assert view.get_extra_info("client_addr") == client.socket.getsockname()
    assert view.get_extra_info("server_addr") == client.socket.getpeername()
    assert view.get_extra_info("ssl_object") is None
    assert view.get_extra_info("anything else") is None
    # The pool's reuse test: readable once the server sent (or closed).
    assert view.get_extra_info("is_readable") is False
    await server.send_all(b"x")
    with trio.fail_after(2):  # the byte crosses loopback, however loaded the machine
        await trio.lowlevel.wait_readable(client.socket)
    assert view.get_extra_info("is_readable") is True
    for stream in (client, server, listener):
        await stream.aclose()


async def test_req_sec_006_a_stream_without_a_socket_has_no_socket_facts() -> None:
    left, _right = trio.testing.memory_stream_pair()
    view = _TrioStream(left)
    for info in ("socket", "client_addr", "server_addr", "is_readable", "ssl_object"):
        assert view.get_extra_info(info) is None


async def _tls_pair() -> tuple[
    httpcore.AsyncNetworkStream, trio.SocketStream, trio.SSLStream[trio.SocketStream],
    trio.SocketListener,
]:  # fmt: skip
    """The backend's view of a client TLS connection, its socket, and the server's ends."""
    authority = Authority()
    client, server, listener = await _pair()
    server_tls = trio.SSLStream(server, authority.server_context("localhost"), server_side=True)
    view = _TrioStream(client)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server_tls.do_handshake)
        secured = await view.start_tls(authority.client_context(), "localhost", timeout=5)
    return secured, client, server_tls, listener


async def test_req_sec_006_over_tls_the_facts_are_those_of_the_socket_under_it() -> None:
    secured, client, server_tls, listener = await _tls_pair()
    assert secured.get_extra_info("ssl_object") is not None
    assert secured.get_extra_info("ssl_object").server_hostname == "localhost"
    assert secured.get_extra_info("socket") is client.socket
    assert secured.get_extra_info("server_addr") == client.socket.getpeername()
    await trio.aclose_forcefully(server_tls)
    await listener.aclose()
    await secured.aclose()


async def test_req_sec_011_a_tls_handshake_that_times_out_closes_its_connection() -> None:
    client, server, listener = await _pair()
    view = _TrioStream(client)
    with pytest.raises(httpcore.ConnectTimeout):
        await view.start_tls(Authority().client_context(), "localhost", timeout=0.2)
    with trio.fail_after(2):
        while await server.receive_some(65536):
            pass  # the ClientHello, then the end: the client closed its side
    await server.aclose()
    await listener.aclose()


async def test_req_sec_006_a_write_to_a_closed_stream_is_httpcores_write_error() -> None:
    client, server, listener = await _pair()
    view = _TrioStream(client)
    await client.aclose()
    with pytest.raises(httpcore.WriteError):
        await view.write(b"GET / HTTP/1.1\r\n\r\n")
    with pytest.raises(httpcore.ReadError):
        await view.read(10)
    await server.aclose()
    await listener.aclose()


@pytest.mark.parametrize(("position", "admitted"), [(32, True), (33, False)])
async def test_req_sec_007_only_the_first_32_addresses_of_an_answer_are_judged(
    position: int, admitted: bool
) -> None:
    # A hostile resolver's long answer is read up to the bound: an admitted address in 32nd
    # place is used, one in 33rd place is never seen, and the refusal of the others stands.
    answer: list[object] = [ipaddress.ip_address(f"10.0.0.{n}") for n in range(1, position)]
    answer.append(ipaddress.ip_address("127.0.0.2"))
    backend = EgressBackend(EgressPolicy().with_allow("127.0.0.2"), resolver=_ListResolver(answer))
    if admitted:
        assert await backend.admitted_addresses("docs.python.org", 443) == [answer[-1]]
    else:
        with pytest.raises(EgressRefused) as caught:
            await backend.admitted_addresses("docs.python.org", 443)
        assert caught.value.refusal is Refusal.PRIVATE


def test_req_sec_007_the_refusals_message_is_fixed_and_names_no_destination() -> None:
    # httpx's handlers and a log may print a transport error: this one says what happened
    # and nothing of the host or the address.
    refused = EgressRefused(Refusal.METADATA)
    assert str(refused) == "the destination was refused by the egress policy"
    assert refused.refusal is Refusal.METADATA


class _FailingStream(trio.abc.Stream):
    """A stream of any network backend (the NetworkBackend protocol admits any Trio stream) whose
    reads and writes fail with `error`, as it raises it."""

    def __init__(self, error: type[Exception]) -> None:
        self.error = error
        self.sends = 0

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        raise self.error

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.sends += 1
        raise self.error

    async def wait_send_all_might_not_block(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize(
    "error", [ConnectionResetError, trio.BrokenResourceError, trio.ClosedResourceError]
)
async def test_req_sec_006_a_failing_stream_is_httpcores_error(error: type[Exception]) -> None:
    view = _TrioStream(_FailingStream(error))
    with pytest.raises(httpcore.ReadError):
        await view.read(10)
    with pytest.raises(httpcore.WriteError):
        await view.write(b"GET / HTTP/1.1\r\n\r\n")
    # A TLS start over it fails as a connection that could not be made.
    with pytest.raises(httpcore.ConnectError):
        await view.start_tls(Authority().client_context(), "localhost", timeout=2)


async def test_req_sec_006_an_empty_write_sends_nothing() -> None:
    # httpcore hands over an empty buffer at the end of a message: nothing to send, so not
    # even a stream that has failed is asked.
    stream = _FailingStream(trio.BrokenResourceError)
    await _TrioStream(stream).write(b"")
    assert stream.sends == 0


async def test_req_sec_011_a_tls_body_ended_by_the_close_alone_is_read_to_its_end() -> None:
    # Many servers end a body read until the close without TLS's close_notify: the abrupt
    # end is the body's end (https_compatible), not a broken connection.
    secured, _client, server_tls, listener = await _tls_pair()
    await server_tls.send_all(b"HTTP/1.0 200 OK\r\n\r\nbody")
    await trio.aclose_forcefully(server_tls.transport_stream)  # the TCP close, no close_notify
    received = b""
    with trio.fail_after(5):
        while data := await secured.read(65536, timeout=5):
            received += data
    assert received == b"HTTP/1.0 200 OK\r\n\r\nbody"
    await secured.aclose()
    await listener.aclose()


async def test_req_sec_011_a_tls_start_on_a_closed_connection_is_a_connect_error() -> None:
    client, server, listener = await _pair()
    await client.aclose()
    with pytest.raises(httpcore.ConnectError):
        await _TrioStream(client).start_tls(Authority().client_context(), "localhost", timeout=2)
    await server.aclose()
    await listener.aclose()


async def test_req_sec_011_a_read_or_write_timeout_before_the_callers_deadline_is_its_own(
    mock_clock: trio.testing.MockClock,
) -> None:
    # The stream's timeout ends the operation as httpcore's timeout when it comes first.
    client, _server = trio.testing.lockstep_stream_pair()
    stream = _TrioStream(client)
    mock_clock.autojump_threshold = 0
    with trio.move_on_after(5) as outer:
        start = trio.current_time()
        with pytest.raises(httpcore.ReadTimeout):
            await stream.read(10, timeout=1.0)
        assert trio.current_time() - start == pytest.approx(1.0)
        with pytest.raises(httpcore.WriteTimeout):
            await stream.write(b"never taken", timeout=1.0)
        assert trio.current_time() - start == pytest.approx(2.0)
    assert not outer.cancelled_caught


@pytest.mark.parametrize("stream_timeout", [4.0, 5.0, None])
async def test_req_sec_011_a_timeout_at_or_after_the_callers_deadline_leaves_it_the_callers(
    mock_clock: trio.testing.MockClock, stream_timeout: float | None
) -> None:
    # An engine's read timeout is the time left of its total: the caller's scope ends the
    # read at its deadline, as a cancellation, never as a timeout of the stream.
    client, _server = trio.testing.lockstep_stream_pair()
    stream = _TrioStream(client)
    mock_clock.autojump_threshold = 0
    operations = (
        stream.read(10, timeout=stream_timeout),
        stream.write(b"x", timeout=stream_timeout),
    )
    for operation in operations:
        start = trio.current_time()
        with trio.move_on_after(4.0) as outer:
            await operation
        assert outer.cancelled_caught
        assert trio.current_time() - start == pytest.approx(4.0)


async def test_req_sec_007_the_backends_sleep_is_trios_own(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # httpcore waits through its backend (between connection retries): the wait is Trio's,
    # so that it honours cancellation and the test clock like every other wait of a call.
    backend = EgressBackend(EgressPolicy(), resolver=_ListResolver([]))
    start = trio.current_time()
    await backend.sleep(7.5)
    assert trio.current_time() - start == pytest.approx(7.5)
