"""The fetch client's tables and settings, one test per entry (rypsok.core.egress.clients).

REQ-SEC-009 (rypsok's own headers only), REQ-FETCH-007 (no cookie), REQ-FETCH-008 (the
Accept of web_fetch), REQ-SEC-006 (the request sent is the one the policy admitted), LIM-F4
and LIM-C3 (the client a configuration builds). Requests go to local servers through the
production client, reached by an allow rule added in code and a test resolver.
"""

from __future__ import annotations

import functools
import socket
import ssl
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpcore
import pytest
import trio
from fetch_helpers import fetch_config, fetching_rypsok, loopback_client, target_of
from fetch_sites import Page, serve_site

from rypsok.core.egress import EgressPolicy, EgressRefused, TcpBackend, build_fetch_client
from rypsok.core.egress.clients import DEFAULT_ACCEPT, EgressTransport
from rypsok.core.egress.policy import DEFAULT_PORTS, AdmittedURL
from rypsok.core.egress.testing import MapResolver, RecordingBackend
from rypsok.core.fetch.body import BodyTooLarge, read_bounded
from rypsok.core.fetch.egress_port import FetchNetwork, build_fetch_egress
from rypsok.core.model import DetailReason, ErrorKind, FetchRequest, ToolError
from rypsok.core.services import Rypsok
from testkit.servers import Reply, serve_http

if TYPE_CHECKING:
    from rypsok.core.egress import FetchClient
    from rypsok.core.egress.backend import NetworkBackend
    from rypsok.core.egress.clients import HttpResponse
    from rypsok.core.egress.ranges import Address


async def _read(response: HttpResponse) -> bytes:
    return bytes(await read_bounded(response, 1 << 22))


def test_req_fetch_008_web_fetch_asks_for_what_it_can_extract_in_this_order() -> None:
    assert DEFAULT_ACCEPT == (
        "text/html, application/xhtml+xml, text/markdown;q=0.9, text/plain;q=0.8, */*;q=0.1"
    )


async def test_req_fetch_008_the_accept_sent_is_the_default_or_the_one_asked() -> None:
    async with serve_http({"/p": Reply(body=b"x")}) as server:
        port = server.port
        async with loopback_client(port) as client:
            target = target_of(client, f"http://example.org:{port}/p")
            async with client.stream(target) as response:
                await _read(response)
            async with client.stream(target, accept="text/plain") as response:
                await _read(response)
    assert [r.header("accept") for r in server.requests] == [DEFAULT_ACCEPT, "text/plain"]


async def test_req_sec_009_the_request_carries_exactly_rypsoks_four_headers() -> None:
    async with serve_http({"/p": Reply(body=b"x")}) as server:
        client = loopback_client(server.port)
        target = target_of(client, f"http://example.org:{server.port}/p")
        async with client, client.stream(target) as r:
            await _read(r)
    (request,) = server.requests
    assert request.method == "GET"
    assert [name.lower() for name, _value in request.headers] == [
        "host",
        "user-agent",
        "accept",
        "accept-encoding",
    ]


def _unused_tls() -> ssl.SSLContext:
    return ssl.create_default_context()


async def test_req_sec_009_the_caller_s_bound_decides_how_much_of_a_body_is_taken() -> None:
    # The client hands the response over unread: a bound below the body's size ends the read.
    async with (
        serve_http({"/p": Reply(body=b"x" * 5000)}) as server,
        loopback_client(server.port) as client,
    ):
        target = target_of(client, f"http://example.org:{server.port}/p")
        async with client.stream(target) as response:
            with pytest.raises(BodyTooLarge):
                await read_bounded(response, 4999)
        async with client.stream(target) as response:
            body = await read_bounded(response, 5000)
    assert body == b"x" * 5000


async def test_req_sec_009_closing_the_client_closes_its_connections() -> None:
    async with serve_http({"/p": Reply(body=b"x")}) as server:
        client = loopback_client(server.port)
        target = target_of(client, f"http://example.org:{server.port}/p")
        async with client.stream(target) as response:
            await _read(response)
        await client.aclose()
        assert client.transport._pool.connections == []


def test_lim_f4_lim_c3_the_configured_client_takes_the_deadline_and_the_pool_size() -> None:
    config = fetch_config(
        """
[limits]
fetches_in_flight = 3
[fetch]
deadline_ms = 7000
"""
    )
    _policy, client = build_fetch_egress(config, FetchNetwork(), user_agent="rypsok/0 (+test)")
    assert client.timeouts.read == 7.0
    assert client.timeouts.connect == min(client.policy.connect_timeout_s, 7.0)
    assert client.transport._pool._max_connections == 6  # a page and its robots.txt each


async def test_req_sec_009_a_page_is_read_over_http_1_1_even_where_h2_is_offered() -> None:
    # The fetch client speaks HTTP/1.1 only: a site whose TLS offers h2 first is still read
    # over HTTP/1.1 (the pipeline's bounds and headers are written for it).
    from fetch_helpers import Authority
    from fetch_sites import Page, serve_site

    authority = Authority()
    server_tls = authority.server_context("example.org")
    server_tls.set_alpn_protocols(["h2", "http/1.1"])
    async with serve_site({"/": Page.text("over 1.1")}, tls=server_tls) as site:
        policy = EgressPolicy(ports=frozenset({443, site.port})).with_allow("127.0.0.1")
        client = build_fetch_client(
            policy,
            user_agent="rypsok/0 (+test)",
            resolver=MapResolver({"example.org": ["127.0.0.1"]}),
            network_backend=RecordingBackend(),
            ssl_context=authority.client_context(),
        )
        async with client:
            target = target_of(client, f"https://example.org:{site.port}/")
            async with client.stream(target) as response:
                version = response._response.extensions["http_version"]
                body = await _read(response)
    assert version == b"HTTP/1.1"
    assert body == b"over 1.1"


class _TrackedStream(trio.abc.Stream):
    """A loopback connection whose closing the test can see."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.closed = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        return bytes(await self.inner.receive_some(max_bytes))

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        self.closed = True
        await self.inner.aclose()


class _TrackingConnector:
    def __init__(self) -> None:
        self.streams: list[_TrackedStream] = []

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        stream = _TrackedStream(await TcpBackend().connect(address, port))
        self.streams.append(stream)
        return stream


def _tracking_client(port: int, network_backend: _TrackingConnector) -> FetchClient:
    policy = EgressPolicy(allow_http=True, ports=frozenset({port})).with_allow("127.0.0.1")
    return build_fetch_client(
        policy,
        user_agent="rypsok/0 (+test)",
        resolver=MapResolver({"example.org": ["127.0.0.1"]}),
        network_backend=RecordingBackend(network_backend),
    )


def _judged(client: FetchClient, url: str) -> AdmittedURL:
    judged = client.policy.judge_url(url)
    assert isinstance(judged, AdmittedURL)
    return judged


async def test_req_fetch_005_a_body_left_unread_closes_its_connection_at_once() -> None:
    # A page given up before its end (too large, a deadline) does not keep its connection
    # open until the client closes: the stream's end closes it.
    async with serve_http({"/big": Reply(body=b"x" * 2_000_000)}) as server:
        port = int(server.url.rsplit(":", 1)[1])
        network_backend = _TrackingConnector()
        async with _tracking_client(port, network_backend) as client:
            async with client.stream(_judged(client, f"http://example.org:{port}/big")) as r:
                assert r.status_code == 200
            (stream,) = network_backend.streams
            assert stream.closed


async def test_req_fetch_005_closing_the_client_closes_its_kept_connections() -> None:
    # A server that keeps its connection (the fixture server closes each one): the pool
    # keeps it for the origin's next request, and closing the client closes it.
    async def keep_alive(stream: trio.SocketStream) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            head += await stream.receive_some(65536)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx")
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(
            functools.partial(trio.serve_tcp, keep_alive, 0, host="127.0.0.1")
        )
        port = listener.socket.getsockname()[1]
        network_backend = _TrackingConnector()
        async with _tracking_client(port, network_backend) as client:
            async with client.stream(_judged(client, f"http://example.org:{port}/p")) as r:
                assert await _read(r) == b"x"
            (stream,) = network_backend.streams
            assert not stream.closed
        assert stream.closed
        nursery.cancel_scope.cancel()


async def test_req_sec_009_a_streams_own_accept_replaces_the_default() -> None:
    # robots.txt asks for text; the value given is the value sent, the codings stay.
    async with serve_http({"/robots.txt": Reply(body=b"")}) as server:
        port = int(server.url.rsplit(":", 1)[1])
        async with _tracking_client(port, _TrackingConnector()) as client:
            target = _judged(client, f"http://example.org:{port}/robots.txt")
            async with client.stream(target, accept="text/plain") as r:
                await _read(r)
    (request,) = server.requests
    assert request.header("accept") == "text/plain"
    assert request.header("accept-encoding") == "gzip, deflate"


async def test_req_fetch_005_a_stream_without_its_own_timeouts_keeps_the_clients() -> None:
    # A server that accepts and never answers: the client's deadline ends the wait.
    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(
            functools.partial(trio.serve_tcp, silent, 0, host="127.0.0.1")
        )
        port = listener.socket.getsockname()[1]
        policy = EgressPolicy(allow_http=True, ports=frozenset({port})).with_allow("127.0.0.1")
        client = build_fetch_client(
            policy,
            user_agent="rypsok/0 (+test)",
            resolver=MapResolver({"example.org": ["127.0.0.1"]}),
            deadline_s=0.3,
        )
        async with client:
            target = _judged(client, f"http://example.org:{port}/p")
            with trio.fail_after(5), pytest.raises(httpcore.ReadTimeout):
                async with client.stream(target):
                    pass
        nursery.cancel_scope.cancel()


def _core_get(url: str, headers: list[tuple[bytes, bytes]] | None = None) -> httpcore.Request:
    ports = frozenset({80, 443, urlsplit(url).port or 80})
    policy = EgressPolicy(allow_http=True, ports=ports).with_allow("127.0.0.1")
    judged = policy.judge_url(url, upgrade_http=False)
    assert isinstance(judged, AdmittedURL)
    return httpcore.Request(
        b"GET",
        httpcore.URL(
            scheme=judged.scheme.encode(),
            host=judged.host.encode(),
            port=None if judged.port == DEFAULT_PORTS[judged.scheme] else judged.port,
            target=judged.path.encode(),
        ),
        headers=[(b"Host", judged.authority.encode()), *(headers or [])],
    )


async def test_req_sec_005_the_core_entry_uses_the_same_pool_and_refuses_other_methods() -> None:
    # What the engines call: the response of the pool itself, judged by the same
    # backend; GET only, as for every request of the egress component.
    async with serve_http({"/x": Reply(body=b"{}")}) as server:
        policy = EgressPolicy(allow_http=True, ports=frozenset({server.port})).with_allow(
            "127.0.0.1"
        )
        transport = EgressTransport(policy, ssl_context=_unused_tls())
        response = await transport.handle_core(_core_get(f"{server.url}/x"))
        assert response.status == 200
        assert await response.aread() == b"{}"
        await response.aclose()
        with pytest.raises(EgressRefused) as caught:
            await transport.handle_core(httpcore.Request(b"POST", _core_get(f"{server.url}/x").url))
        await transport.aclose()
    assert caught.value.refusal is not None
    assert [r.method for r in server.requests] == ["GET"]


async def test_req_res_008_through_a_proxy_the_request_and_its_credentials_go_to_the_proxy() -> (
    None
):
    # An http origin through the operator's proxy: absolute form, with the proxy's own
    # credentials; the origin is never dialled (nothing listens there).
    async with serve_http(default=Reply(body=b"via proxy")) as proxy:
        policy = EgressPolicy(allow_http=True, ports=frozenset({80, proxy.port})).with_allow(
            "127.0.0.1"
        )
        transport = EgressTransport(
            policy,
            ssl_context=_unused_tls(),
            proxy=(proxy.url, (b"user", b"secret")),
        )
        response = await transport.handle_core(_core_get("http://api.provider-of-search.net/x"))
        body = await response.aread()
        await response.aclose()
        await transport.aclose()
    assert body == b"via proxy"
    (seen,) = proxy.requests
    assert seen.target == "http://api.provider-of-search.net/x"
    assert seen.header("proxy-authorization") == "Basic dXNlcjpzZWNyZXQ="


async def test_req_res_008_an_https_proxy_is_verified_with_the_processs_trust_store() -> None:
    # The operator's proxy over TLS: its certificate is checked against the same trust
    # context as every other connection (here a test authority's), not a library's own
    # bundle, which does not hold that authority and would refuse the proxy.
    from fetch_helpers import Authority

    authority = Authority()
    async with serve_http(
        default=Reply(body=b"via tls proxy"), tls=authority.server_context("proxy.example.net")
    ) as proxy:
        policy = EgressPolicy(allow_http=True, ports=frozenset({80, proxy.port})).with_allow(
            "127.0.0.1"
        )
        transport = EgressTransport(
            policy,
            ssl_context=authority.client_context(),
            resolver=MapResolver({"proxy.example.net": ["127.0.0.1"]}),
            proxy=(f"https://proxy.example.net:{proxy.port}", None),
        )
        response = await transport.handle_core(_core_get("http://api.provider-of-search.net/x"))
        body = await response.aread()
        await response.aclose()
        await transport.aclose()
    assert body == b"via tls proxy"
    (seen,) = proxy.requests
    assert seen.target == "http://api.provider-of-search.net/x"


# --- what the exchange can raise, one entry of CONNECT_ERRORS and TRANSPORT_ERRORS each ----
#
# Each error is raised below the client, by a local port or a fake network, and seen
# through web_fetch as the book's answer for a site that cannot be reached: unavailable,
# reason network, with robots.txt read first (the robots read meets it) and without (the
# page's own request meets it).


class _Hanging:
    """A network where no connection is ever answered (a dropped SYN)."""

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        await trio.sleep_forever()
        raise AssertionError("unreachable")


class _Unwritable(trio.abc.Stream):
    """A connection that is opened and then takes no byte of the request, nor answers."""

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.sleep_forever()
        return b""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.sleep_forever()

    async def wait_send_all_might_not_block(self) -> None:
        await trio.sleep_forever()

    async def aclose(self) -> None:
        pass


class _UnwritableNetwork:
    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        return _Unwritable()


class _ClosedPort:
    """The network to a loopback port nothing listens on: the connection is refused."""

    def __init__(self) -> None:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        return await TcpBackend().connect(address, self.port)


async def _fetch_unreachable(network_backend: NetworkBackend, *, robots: bool) -> object:
    config = fetch_config(
        "[egress]\nallow_http = true\n"
        f"[fetch]\nrobots_txt = {'true' if robots else 'false'}\nconnect_timeout_ms = 500\n"
    )
    network = FetchNetwork(
        extra_allow=("gone.org",),
        resolver=MapResolver({"gone.org": ["127.0.0.1"]}),
        network_backend=RecordingBackend(network_backend),
    )
    async with Rypsok(config, engines=[], fetch_network=network) as rypsok:
        with trio.fail_after(5):
            try:
                return await rypsok.fetch(FetchRequest(url="http://gone.org/page"))
            except ToolError as error:
                return error


def _is_unreachable(answer: object) -> bool:
    return (
        isinstance(answer, ToolError)
        and answer.kind is ErrorKind.UNAVAILABLE
        and answer.detail.reason is DetailReason.NETWORK
        and answer.message == "the site could not be reached; retry later or choose another page"
    )


@pytest.mark.parametrize("robots", [True, False], ids=["robots_txt", "no_robots_txt"])
async def test_req_fetch_001_a_refused_connection_is_a_site_that_cannot_be_reached(
    robots: bool,
) -> None:
    # httpcore's ConnectError, a NetworkError: CONNECT_ERRORS for the robots read,
    # TRANSPORT_ERRORS for the page.
    assert _is_unreachable(await _fetch_unreachable(_ClosedPort(), robots=robots))


@pytest.mark.parametrize("robots", [True, False], ids=["robots_txt", "no_robots_txt"])
async def test_req_sec_011_a_connect_timeout_is_a_site_that_cannot_be_reached(
    robots: bool,
) -> None:
    # httpcore's ConnectTimeout after LIM-F6 (500 ms here), long before the 10 s deadline:
    # the answer of an unreachable site, not the deadline's, and robots.txt's connect
    # timeout is the site's, not a file that could not be read (denied, robots_txt).
    start = trio.current_time()
    answer = await _fetch_unreachable(_Hanging(), robots=robots)
    assert _is_unreachable(answer)
    assert trio.current_time() - start < 5


async def test_req_sec_011_a_stream_without_its_own_timeouts_connects_within_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The client's deadline (0.3 s) is below the policy's connect timeout (3 s): it bounds
    # the connection too.
    policy = EgressPolicy(allow_http=True).with_allow("127.0.0.1")
    assert policy.connect_timeout_s == 3.0
    client = build_fetch_client(
        policy,
        user_agent="rypsok/0 (+test)",
        resolver=MapResolver({"example.org": ["127.0.0.1"]}),
        network_backend=RecordingBackend(_Hanging()),
        deadline_s=0.3,
    )
    async with client:
        target = target_of(client, "http://example.org/p")
        start = trio.current_time()
        with trio.fail_after(2), pytest.raises(httpcore.ConnectTimeout):
            async with client.stream(target):
                pass
    assert trio.current_time() - start == pytest.approx(0.3)


async def test_req_sec_011_a_stream_without_its_own_timeouts_sends_within_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A connection that never takes the request: the client's deadline ends the write.
    policy = EgressPolicy(allow_http=True).with_allow("127.0.0.1")
    client = build_fetch_client(
        policy,
        user_agent="rypsok/0 (+test)",
        resolver=MapResolver({"example.org": ["127.0.0.1"]}),
        network_backend=RecordingBackend(_UnwritableNetwork()),
        deadline_s=0.3,
    )
    async with client:
        target = target_of(client, "http://example.org/p")
        start = trio.current_time()
        with trio.fail_after(2), pytest.raises(httpcore.WriteTimeout):
            async with client.stream(target):
                pass
    assert trio.current_time() - start == pytest.approx(0.3)


async def test_req_fetch_006_a_location_that_is_not_utf_8_is_read_as_latin_1() -> None:
    # The byte E9 alone is no UTF-8: it is é, as a browser reads the field, and the target
    # is requested in its UTF-8 percent-encoded form.
    routes = {
        "/old": Page.redirect("/caf\u00e9"),  # the site writes its headers in Latin-1
        "/caf%C3%A9": Page.html(
            "<html><head><title>Caf\u00e9</title></head><body><article><p>The page the "
            "redirect leads to, with enough words to be the main block.</p></article>"
            "</body></html>"
        ),
    }
    async with serve_site(routes) as site:
        rypsok, _, _ = fetching_rypsok(
            fetch_config("[egress]\nallow_http = true\n[fetch]\nrobots_txt = false\n"),
            {"latin.org": site},
        )
        async with rypsok:
            response = await rypsok.fetch(FetchRequest(url="http://latin.org/old"))
    assert site.paths() == ["/old", "/caf%C3%A9"]
    assert response.url == "http://latin.org/caf%C3%A9"
    assert response.title == "Caf\u00e9"
