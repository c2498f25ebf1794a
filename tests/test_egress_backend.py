"""Connect-time enforcement (REQ-SEC-007, REQ-SEC-006, REQ-TEST-005, REQ-TEST-006, LIM-F6,
THR-06).

Requests go through the production fetch client and its network backend. Names are
answered by a test resolver; every connection goes through a recording network backend that
refuses any address off loopback, so a wrong policy could never reach the network, and the
tests assert on what was attempted. The local server is reached only through an allow rule
added in code.
"""

from __future__ import annotations

import ipaddress
import ssl
from functools import partial
from typing import TYPE_CHECKING, Final

import httpcore
import pytest
import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rypsok.core.egress import EgressPolicy, EgressRefused, Refusal, build_fetch_client
from rypsok.core.egress.backend import EgressBackend
from rypsok.core.egress.clients import CONNECT_ERRORS
from rypsok.core.egress.policy import AdmittedURL
from rypsok.core.egress.ranges import canonical
from rypsok.core.egress.testing import MapResolver, RecordingBackend
from rypsok.core.fetch.body import read_bounded
from testkit.authority import Authority
from testkit.servers import Reply, serve_http

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rypsok.core.egress.ranges import Address

PUBLIC: Final = "93.184.215.14"  # never dialled: the recording network backend refuses it
LOOPBACK: Final = ipaddress.ip_address("127.0.0.1")


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _policy(port: int, *allow: str) -> EgressPolicy:
    """The production profile, plain http allowed (the local server has no TLS), the
    server's port listed, and the given allow rules."""
    return EgressPolicy(allow_http=True, ports=frozenset({80, 443, port})).with_allow(*allow)


def _target(policy: EgressPolicy, url: str) -> AdmittedURL:
    judged = policy.judge_url(url)
    assert isinstance(judged, AdmittedURL)
    return judged


async def test_req_sec_007_mixed_answers_dial_only_the_admitted_addresses() -> None:
    async with serve_http({"/p": Reply(body=b"page")}) as server:
        port = _port(server.url)
        policy = _policy(port, "127.0.0.1/32")
        resolver = MapResolver(
            {"example.org": ["10.0.0.1", PUBLIC, "169.254.169.254", "127.0.0.1"]}
        )
        network_backend = RecordingBackend()
        async with (
            build_fetch_client(
                policy, user_agent="rypsok/test", resolver=resolver, network_backend=network_backend
            ) as client,
            client.stream(_target(policy, f"http://example.org:{port}/p")) as response,
        ):
            body = bytes(await read_bounded(response, 1 << 22))
    assert body == b"page"
    # The private and metadata answers were judged and never dialled; the public one was
    # tried first (and stopped by the recording network backend), then the admitted loopback one.
    assert network_backend.attempts == [(ipaddress.ip_address(PUBLIC), port), (LOOPBACK, port)]
    assert resolver.lookups == ["example.org"]
    assert server.requests[0].header("host") == f"example.org:{port}"


async def test_req_sec_007_a_name_whose_addresses_are_all_refused_is_a_network_failure() -> None:
    async with serve_http({"/p": Reply(body=b"page")}) as server:
        port = _port(server.url)
        policy = _policy(port)  # no allow rule: loopback is refused like any private range
        resolver = MapResolver({"internal.example.org": ["127.0.0.1", "10.1.2.3", "::1"]})
        network_backend = RecordingBackend()
        async with build_fetch_client(
            policy, user_agent="rypsok/test", resolver=resolver, network_backend=network_backend
        ) as client:
            target = _target(policy, f"http://internal.example.org:{port}/p")
            with pytest.raises(EgressRefused) as caught:
                async with client.stream(target):
                    pass
            # A name that does not resolve is a connect error, which the pipeline answers as
            # unavailable, network, as it answers the refusal.
            with pytest.raises(httpcore.ConnectError) as unresolvable:
                async with client.stream(_target(policy, f"http://nowhere.example.org:{port}/")):
                    pass
    assert caught.value.refusal is Refusal.LOOPBACK
    assert isinstance(caught.value, CONNECT_ERRORS)
    assert isinstance(unresolvable.value, CONNECT_ERRORS)
    # Never a connect error itself: those are retried and remapped as transient failures.
    assert not isinstance(caught.value, httpcore.ConnectError)
    assert "internal" not in str(caught.value)
    assert "127.0.0.1" not in str(caught.value)
    assert network_backend.attempts == []
    assert server.requests == []


async def test_req_test_005_dns_rebinding_cannot_pass_an_address_the_policy_refuses() -> None:
    # The answer changes between two resolutions: first the admitted address, then a
    # refused one. Each connection resolves once and dials only what it judged.
    async with serve_http({"/p": Reply(body=b"page")}) as server:
        port = _port(server.url)
        policy = _policy(port, "127.0.0.1/32")
        resolver = MapResolver({"rebind.example.org": ["127.0.0.1"]})
        network_backend = RecordingBackend()
        async with build_fetch_client(
            policy, user_agent="rypsok/test", resolver=resolver, network_backend=network_backend
        ) as client:
            target = _target(policy, f"http://rebind.example.org:{port}/p")
            async with client.stream(target) as response:
                assert bytes(await read_bounded(response, 1 << 22)) == b"page"
            resolver.answer("rebind.example.org", ["127.0.0.2"])  # loopback, not allowed
            with pytest.raises(EgressRefused) as caught:
                async with client.stream(target):
                    pass
            resolver.answer("rebind.example.org", ["169.254.169.254"])
            with pytest.raises(EgressRefused) as metadata:
                async with client.stream(target):
                    pass
    assert caught.value.refusal is Refusal.LOOPBACK
    assert metadata.value.refusal is Refusal.METADATA
    assert network_backend.attempts == [(LOOPBACK, port)]
    assert resolver.lookups == ["rebind.example.org"] * 3
    assert len(server.requests) == 1


async def test_req_test_005_a_public_answer_then_a_private_one_never_reaches_the_private() -> None:
    resolver = MapResolver({"flip.example.org": [PUBLIC]})
    network_backend = RecordingBackend()
    backend = EgressBackend(EgressPolicy(), resolver=resolver, network_backend=network_backend)
    with pytest.raises(httpcore.ConnectError):
        await backend.connect_tcp("flip.example.org", 443)
    resolver.answer("flip.example.org", ["127.0.0.1"])
    with pytest.raises(EgressRefused):
        await backend.connect_tcp("flip.example.org", 443)
    assert network_backend.attempts == [(ipaddress.ip_address(PUBLIC), 443)]


async def test_req_sec_007_an_address_literal_is_connected_to_without_any_lookup() -> None:
    async with serve_http({"/p": Reply(body=b"page")}) as server:
        port = _port(server.url)
        policy = _policy(port, "127.0.0.1/32")
        resolver = MapResolver()
        network_backend = RecordingBackend()
        async with build_fetch_client(
            policy, user_agent="rypsok/test", resolver=resolver, network_backend=network_backend
        ) as client:
            target = _target(policy, f"http://0x7f.1:{port}/p")
            assert target.host == "127.0.0.1"
            async with client.stream(target) as response:
                assert bytes(await read_bounded(response, 1 << 22)) == b"page"
            # A literal the policy refuses is refused at connect time too, whoever built it.
            unjudged = AdmittedURL(
                scheme="http",
                host="127.0.0.2",
                port=port,
                path="/p",
                upgraded=False,
                allowed_by_rule=False,
            )
            with pytest.raises(EgressRefused) as caught:
                async with client.stream(unjudged):
                    pass
    assert resolver.lookups == []
    assert network_backend.attempts == [(LOOPBACK, port)]
    assert caught.value.refusal is Refusal.LOOPBACK


async def test_req_sec_007_the_backend_judges_a_number_notation_host_as_its_address() -> None:
    # If anything handed the backend a host in number notation, it is read as the address
    # (as a resolver's inet_aton would) and judged: never resolved as a name.
    resolver = MapResolver({"0x7f.1": [PUBLIC]})
    network_backend = RecordingBackend()
    backend = EgressBackend(EgressPolicy(), resolver=resolver, network_backend=network_backend)
    for host in ("0x7f.1", "2130706433", "127.1", "::ffff:127.0.0.1", "localhost", "a..b"):
        with pytest.raises(EgressRefused):
            await backend.connect_tcp(host, 443)
    assert resolver.lookups == []
    assert network_backend.attempts == []


async def test_req_res_008_environment_proxies_are_ignored_by_the_fetch_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with (
        serve_http(default=Reply(body=b"proxy")) as proxy,
        serve_http({"/p": Reply(body=b"direct")}) as server,
    ):
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
            monkeypatch.setenv(name, proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        port = _port(server.url)
        policy = _policy(port, "127.0.0.1")
        async with (
            build_fetch_client(
                policy,
                user_agent="rypsok/test",
                resolver=MapResolver({"example.org": ["127.0.0.1"]}),
                network_backend=RecordingBackend(),
            ) as client,
            client.stream(_target(policy, f"http://example.org:{port}/p")) as response,
        ):
            body = bytes(await read_bounded(response, 1 << 22))
    assert body == b"direct"
    assert proxy.requests == []


async def _never_answers(name: str, port: int) -> Sequence[Address]:
    await trio.sleep_forever()
    raise AssertionError  # pragma: no cover


class _SilentResolver:
    async def resolve(self, name: str, port: int) -> Sequence[Address]:
        return await _never_answers(name, port)


class _SilentBackend:
    def __init__(self) -> None:
        self.attempts: list[Address] = []

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        self.attempts.append(address)
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover


async def test_lim_f6_a_resolver_that_never_answers_ends_at_the_connect_timeout(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    policy = EgressPolicy(connect_timeout_s=3.0)
    backend = EgressBackend(policy, resolver=_SilentResolver(), network_backend=RecordingBackend())
    start = trio.current_time()
    with pytest.raises(httpcore.ConnectTimeout):
        await backend.connect_tcp("slow.example.org", 443, timeout=30.0)
    assert trio.current_time() - start == pytest.approx(3.0)


async def test_lim_f6_the_connect_timeout_covers_every_address_together(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    policy = EgressPolicy(connect_timeout_s=3.0).with_allow("127.0.0.0/8")
    network_backend = _SilentBackend()
    backend = EgressBackend(
        policy,
        resolver=MapResolver({"a.example.org": ["127.0.0.1", "127.0.0.2"]}),
        network_backend=network_backend,
    )
    start = trio.current_time()
    with pytest.raises(httpcore.ConnectTimeout):
        await backend.connect_tcp("a.example.org", 443, timeout=1.5)
    # httpcore's own (shorter) timeout wins; the first address held the whole budget.
    assert trio.current_time() - start == pytest.approx(1.5)
    assert network_backend.attempts == [LOOPBACK]


class _FloodResolver:
    async def resolve(self, name: str, port: int) -> Sequence[Address]:
        return [
            ipaddress.ip_address(f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}")
            for i in range(100_000)
        ] + [LOOPBACK]


async def test_req_test_006_a_huge_dns_answer_is_judged_within_a_bound() -> None:
    # A hostile resolver's answer is cut to the backend's bound before anything is judged
    # or tried: the loopback address at its end is never reached.
    network_backend = RecordingBackend()
    backend = EgressBackend(
        EgressPolicy().with_allow("127.0.0.1"),
        resolver=_FloodResolver(),
        network_backend=network_backend,
    )
    with pytest.raises(EgressRefused) as caught:
        await backend.connect_tcp("flood.example.org", 443)
    assert caught.value.refusal is Refusal.PRIVATE
    assert network_backend.attempts == []


async def test_req_sec_007_tls_server_name_and_host_stay_the_name() -> None:
    authority = Authority()
    server_context, client_context = (
        authority.server_context("example.org"),
        authority.client_context(),
    )
    seen: dict[str, object] = {}
    names: list[str | None] = []

    def on_sni(sock: ssl.SSLObject, name: str | None, context: ssl.SSLContext) -> None:
        names.append(name)

    server_context.sni_callback = on_sni  # type: ignore[assignment]

    async def answer(stream: trio.SocketStream) -> None:
        tls = trio.SSLStream(stream, server_context, server_side=True)
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                head += await tls.receive_some(4096)
            seen["head"] = head.decode("latin-1")
            await tls.send_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
            )
            await tls.aclose()
        except (trio.BrokenResourceError, ssl.SSLError):
            pass

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, answer, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        policy = EgressPolicy(ports=frozenset({443, port})).with_allow("127.0.0.1")
        network_backend = RecordingBackend()
        async with build_fetch_client(
            policy,
            user_agent="rypsok/test",
            resolver=MapResolver({"example.org": ["127.0.0.1"]}),
            network_backend=network_backend,
            ssl_context=client_context,
        ) as client:
            async with client.stream(_target(policy, f"https://example.org:{port}/x")) as r:
                assert bytes(await read_bounded(r, 1 << 22)) == b"ok"
            # The certificate is checked against the name, not the address connected to.
            with pytest.raises(httpcore.ConnectError):
                async with client.stream(_target(policy, f"https://127.0.0.1:{port}/x")):
                    pass
        nursery.cancel_scope.cancel()
    # The second handshake named no server (an address is never sent as SNI) and failed.
    assert names == ["example.org", None]
    assert f"\r\nHost: example.org:{port}\r\n".lower() in str(seen["head"]).lower()
    assert network_backend.attempts == [(LOOPBACK, port), (LOOPBACK, port)]


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.characters(exclude_categories=(), max_codepoint=0x10FFFF),
        max_size=40,
    )
)
@example("1.0")  # found by a run: WHATWG's short form of the public address 1.0.0.0
@example("example.org")
async def test_req_test_005_any_host_given_to_the_backend_is_refused_or_unreachable(
    host: str,
) -> None:
    # Whatever httpcore hands the backend, the outcome is a refusal or a network failure,
    # and only an address the policy admits is ever attempted: a public address literal
    # (the recording network backend dials nothing off loopback), never the loopback address
    # the one known name resolves to.
    policy = EgressPolicy()
    network_backend = RecordingBackend()
    backend = EgressBackend(
        policy,
        resolver=MapResolver({"example.org": ["127.0.0.1"]}),
        network_backend=network_backend,
    )
    with pytest.raises((EgressRefused, httpcore.ConnectError)):
        await backend.connect_tcp(host, 443)
    for address, port in network_backend.attempts:
        assert port == 443
        assert policy.judge_address(address) is None
        assert not canonical(address).is_loopback


async def test_lim_f6_a_spent_connect_budget_is_a_timeout_not_an_error() -> None:
    network_backend = RecordingBackend()
    backend = EgressBackend(
        EgressPolicy().with_allow("127.0.0.1"),
        resolver=MapResolver({"example.org": ["127.0.0.1"]}),
        network_backend=network_backend,
    )
    for spent in (0.0, -1.0):
        with pytest.raises(httpcore.ConnectTimeout):
            await backend.connect_tcp("example.org", 443, timeout=spent)
    assert network_backend.attempts == []


async def test_req_sec_007_the_system_resolver_returns_addresses_in_its_order() -> None:
    from rypsok.core.egress import SystemResolver

    # localhost is the one name the test guard lets the system resolve.
    answer = await SystemResolver().resolve("localhost", 80)
    assert answer
    assert all(address.is_loopback for address in answer)
    assert len(set(answer)) == len(answer)
    # An address given as text comes back as itself, without a lookup.
    assert await SystemResolver().resolve("127.0.0.1", 80) == [LOOPBACK]
