"""Hostile review of the egress component: each test is one way found to get a request past
it, or to make it misbehave, on the code as it was (REQ-SEC-006 to REQ-SEC-009,
REQ-TEST-005, REQ-TEST-006, LIM-F6, THR-05 to THR-07).

Requests go through the production policy, backend and fetch client. Names are answered by
a test resolver and every connection goes through the recording network backend, which refuses
any address off loopback: a wrong policy shows as an attempt recorded, never as a packet.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Final, overload

import attrs
import httpcore
import pytest
import trio
from fetch_helpers import loopback_client, target_of

from rypsok.config.rules import RuleError, parse_egress_rule
from rypsok.core.egress import EgressPolicy, EgressRefused, Refusal
from rypsok.core.egress.backend import EgressBackend
from rypsok.core.egress.policy import AdmittedURL, Denial
from rypsok.core.egress.testing import MapResolver, RecordingBackend
from rypsok.core.fetch.body import read_bounded

if TYPE_CHECKING:
    from rypsok.core.egress.ranges import Address


def _policy(*, allow: Sequence[str] = (), deny: Sequence[str] = ()) -> EgressPolicy:
    """The production profile with the operator's rules as configuration would give them."""
    policy = EgressPolicy().with_allow(*allow)
    return attrs.evolve(policy, deny=tuple(parse_egress_rule(rule) for rule in deny))


async def _refused_at_connect(policy: EgressPolicy, answers: Sequence[str]) -> Refusal:
    """Resolve a name to `answers` through the backend; return the refusal, and assert that
    nothing was dialled."""
    network_backend = RecordingBackend()
    backend = EgressBackend(
        policy, resolver=MapResolver({"site.example.org": answers}), network_backend=network_backend
    )
    with pytest.raises(EgressRefused) as caught:
        await backend.connect_tcp("site.example.org", 443)
    assert network_backend.attempts == []
    return caught.value.refusal


# --- Allow rules and IPv4 carried in IPv6 -------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "answer", "refusal"),
    [
        # An operator who admits "all of IPv6" admitted IPv4 loopback and metadata too: the
        # rule matched the mapped form instead of the address it means.
        ("::/0", "::ffff:127.0.0.1", Refusal.LOOPBACK),
        ("::/0", "::ffff:169.254.169.254", Refusal.METADATA),
        ("::/0", "::ffff:10.0.0.1", Refusal.PRIVATE),
        ("::/1", "::ffff:100.100.100.200", Refusal.METADATA),
        # A NAT64 network (an IPv6-only host) admitted the translator's way to private IPv4.
        ("64:ff9b::/96", "64:ff9b::a9fe:a9fe", Refusal.NAT64),
        ("64:ff9b::/96", "64:ff9b::7f00:1", Refusal.NAT64),
        ("64:ff9b:1::/48", "64:ff9b:1::a00:1", Refusal.NAT64),
        # All global unicast admitted the 6to4 form of loopback and of the metadata address.
        ("2000::/3", "2002:7f00:1::1", Refusal.LOOPBACK),
        ("2000::/3", "2002:a9fe:a9fe::1", Refusal.METADATA),
        ("2002::/16", "2002:c0a8:101::1", Refusal.PRIVATE),
    ],
)
async def test_req_sec_006_an_ipv6_allow_rule_does_not_admit_the_refused_ipv4_it_carries(
    rule: str, answer: str, refusal: Refusal
) -> None:
    policy = _policy(allow=[rule])
    assert await _refused_at_connect(policy, [answer]) is refusal
    # The literal in a URL is judged by the same rules.
    judged = policy.judge_url(f"https://[{answer}]/")
    assert isinstance(judged, Denial)
    assert judged.refusal is refusal


def test_req_sec_006_transition_forms_are_admitted_when_what_they_carry_is() -> None:
    # The rule still works for what it is meant for: public IPv4 through NAT64 or 6to4,
    # private IPv4 through NAT64 when that network is allowed too, and an address named
    # exactly by a rule.
    nat64 = _policy(allow=["64:ff9b::/96"])
    assert nat64.judge_address(ipaddress.ip_address("64:ff9b::808:808")) is None
    both = _policy(allow=["64:ff9b::/96", "10.0.0.0/8"])
    assert both.judge_address(ipaddress.ip_address("64:ff9b::a00:1")) is None
    exact = _policy(allow=["64:ff9b::a00:1"])
    assert exact.judge_address(ipaddress.ip_address("64:ff9b::a00:1")) is None
    assert exact.judge_address(ipaddress.ip_address("64:ff9b::a00:2")) is Refusal.NAT64
    six_to_four = _policy(allow=["2000::/3"])
    assert six_to_four.judge_address(ipaddress.ip_address("2002:808:808::1")) is None
    # Loopback allowed for tests (REQ-TEST-005) stays allowed in both families.
    local = _policy(allow=["127.0.0.1", "::1"])
    assert local.judge_address(ipaddress.ip_address("::1")) is None
    assert local.judge_address(ipaddress.ip_address("::ffff:127.0.0.1")) is None


def test_req_sec_006_a_rule_in_ipv4_mapped_notation_names_the_ipv4_addresses() -> None:
    allow = _policy(allow=["::ffff:10.0.0.0/104"])
    assert allow.judge_address(ipaddress.ip_address("10.1.2.3")) is None
    assert allow.judge_address(ipaddress.ip_address("::ffff:10.1.2.3")) is None
    assert allow.judge_address(ipaddress.ip_address("11.0.0.1")) is None  # public anyway
    assert allow.judge_address(ipaddress.ip_address("192.168.0.1")) is Refusal.PRIVATE


# --- Deny rules and every form of an address ------------------------------------------------


@pytest.mark.parametrize(
    ("deny", "answer"),
    [
        # A deny rule written in the mapped form did not deny the address it means.
        ("::ffff:8.8.8.8/128", "8.8.8.8"),
        ("::ffff:8.8.8.0/120", "8.8.8.9"),
        # A deny of a public IPv4 network was passed by its 6to4 form.
        ("8.8.8.0/24", "2002:808:808::1"),
        ("8.8.8.8", "2002:808:808:1234::1"),
        ("8.8.8.8", "::ffff:8.8.8.8"),
    ],
)
async def test_req_sec_006_a_deny_rule_refuses_every_form_of_its_addresses(
    deny: str, answer: str
) -> None:
    assert await _refused_at_connect(_policy(deny=[deny]), [answer]) is Refusal.DENY_RULE


@pytest.mark.parametrize(
    "answer", ["64:ff9b::a00:1", "64:ff9b:1::a00:1", "2002:a00:1::1", "::ffff:10.0.0.1"]
)
async def test_req_sec_006_a_deny_rule_wins_over_an_allow_rule_for_the_carrying_form(
    answer: str,
) -> None:
    # The operator runs NAT64 and allows its prefix and 10/8 broadly, but denies 10/8:
    # deny, allow, built-in, whatever form the address is written in.
    policy = _policy(allow=["64:ff9b::/96", "64:ff9b:1::/48", "2002::/16"], deny=["10.0.0.0/8"])
    assert await _refused_at_connect(policy, [answer]) is Refusal.DENY_RULE


# --- Redirect targets read as a browser reads them ------------------------------------------

_CURRENT: Final = "https://a.example.org/x/y"


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        # urljoin read these as a path on the current host; a browser reads a new host.
        ("///127.0.0.1/", Refusal.LOOPBACK),
        ("////169.254.169.254/", Refusal.METADATA),
        ("/\\/10.0.0.1/", Refusal.PRIVATE),
        ("\\/\\127.0.0.1/", Refusal.LOOPBACK),
        ("https:///127.0.0.1/", Refusal.LOOPBACK),
        ("HTTPS:////[::1]/", Refusal.LOOPBACK),
        ("https:\\\\\\127.0.0.1/", Refusal.LOOPBACK),
        # What urljoin and a browser agree on.
        ("//127.0.0.1/", Refusal.LOOPBACK),
        ("http:///127.0.0.1/", Refusal.LOOPBACK),
        ("https:127.0.0.1", "https://a.example.org/x/127.0.0.1"),
        ("https:/127.0.0.1", "https://a.example.org/127.0.0.1"),
        ("https:?q", "https://a.example.org/x/y?q"),
        ("///example.net/p", "https://example.net/p"),
        ("../p", "https://a.example.org/p"),
    ],
)
def test_req_sec_008_a_redirect_target_is_the_host_a_browser_would_reach(
    location: str, expected: Refusal | str
) -> None:
    policy = EgressPolicy()
    current = policy.judge_url(_CURRENT)
    assert isinstance(current, AdmittedURL)
    judged = policy.judge_redirect(current, location)
    if isinstance(expected, Refusal):
        assert isinstance(judged, Denial), judged
        assert judged.refusal is expected
    else:
        assert isinstance(judged, AdmittedURL), judged
        assert judged.url == expected


# --- Resolvers that misbehave ---------------------------------------------------------------


class _RaisingResolver:
    def __init__(self, error: Exception) -> None:
        self.error = error

    async def resolve(self, name: str, port: int) -> Sequence[Address]:
        raise self.error


@pytest.mark.parametrize(
    "error", [RuntimeError("boom"), KeyError("x"), TypeError("x"), trio.TooSlowError()]
)
async def test_req_sec_007_a_resolver_that_fails_in_any_way_is_a_name_that_cannot_be_reached(
    error: Exception,
) -> None:
    network_backend = RecordingBackend()
    backend = EgressBackend(
        EgressPolicy(), resolver=_RaisingResolver(error), network_backend=network_backend
    )
    with pytest.raises(httpcore.ConnectError):
        await backend.connect_tcp("site.example.org", 443)
    assert network_backend.attempts == []


class _EndlessAnswer(Sequence["Address"]):
    """An answer that claims to be endless, and counts how much of it was read."""

    def __init__(self) -> None:
        self.read = 0

    def __len__(self) -> int:
        return 10**18

    @overload
    def __getitem__(self, index: int) -> Address: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Address]: ...
    def __getitem__(self, index: int | slice) -> Address | Sequence[Address]:
        if isinstance(index, slice):
            raise TypeError("no slices")
        self.read += 1
        if self.read > 10_000:
            raise AssertionError("the backend read an endless answer")
        return ipaddress.ip_address("10.0.0.1")


class _EndlessResolver:
    def __init__(self) -> None:
        self.answer = _EndlessAnswer()

    async def resolve(self, name: str, port: int) -> Sequence[Address]:
        return self.answer


async def test_req_test_006_an_endless_dns_answer_is_read_only_up_to_the_bound() -> None:
    resolver = _EndlessResolver()
    backend = EgressBackend(EgressPolicy(), resolver=resolver, network_backend=RecordingBackend())
    with pytest.raises(EgressRefused) as caught:
        await backend.connect_tcp("site.example.org", 443)
    assert caught.value.refusal is Refusal.PRIVATE
    assert resolver.answer.read <= 32


class _JunkResolver:
    async def resolve(self, name: str, port: int) -> Sequence[Address]:
        return ["127.0.0.1", None, b"\x7f\x00\x00\x01"]  # type: ignore[list-item]


async def test_req_sec_007_an_answer_that_holds_no_address_is_a_name_that_cannot_be_reached() -> (
    None
):
    network_backend = RecordingBackend()
    backend = EgressBackend(
        EgressPolicy(), resolver=_JunkResolver(), network_backend=network_backend
    )
    with pytest.raises(httpcore.ConnectError):
        await backend.connect_tcp("site.example.org", 443)
    assert network_backend.attempts == []


# --- What the client sends -------------------------------------------------------------------


_MARKER: Final = "secret-marker-7f3a"


@pytest.mark.parametrize(
    "reply",
    [
        f"HTTP/1.1 2000 {_MARKER}\r\n\r\n".encode(),
        f"{_MARKER} 200 OK\r\n\r\n".encode(),
        f"HTTP/1.1 200 OK\r\n{_MARKER}\r\n\r\n".encode(),
        f"HTTP/1.1 200 OK\r\nContent-Length: {_MARKER}\r\n\r\n".encode(),
    ],
)
async def test_req_priv_004_a_servers_bytes_never_reach_an_error_message(reply: bytes) -> None:
    async def answer(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        await stream.send_all(reply)
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, answer, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        async with loopback_client(port) as client:
            target = target_of(client, f"http://example.org:{port}/")
            with pytest.raises(httpcore.RemoteProtocolError) as caught:
                async with client.stream(target) as response:
                    await read_bounded(response, 1 << 20)
        nursery.cancel_scope.cancel()
    assert _MARKER not in str(caught.value)
    assert "example.org" not in str(caught.value)


@pytest.mark.parametrize(
    ("answer", "refusal"),
    [
        (["::ffff:127.0.0.1"], Refusal.LOOPBACK),
        (["::ffff:169.254.169.254", "::ffff:10.0.0.1"], Refusal.METADATA),
        (["::ffff:0:7f00:1"], Refusal.RESERVED),  # SIIT's IPv4-translated form
        (["::7f00:1"], Refusal.IPV4_COMPATIBLE),
        (["64:ff9b:1::a9fe:a9fe"], Refusal.NAT64),
        (["2001:0:4136:e378:8000:63bf:3fff:fdd2"], Refusal.TEREDO),
    ],
)
async def test_req_sec_006_ipv4_carried_in_ipv6_answers_is_judged_as_ipv4(
    answer: list[str], refusal: Refusal
) -> None:
    assert await _refused_at_connect(EgressPolicy(), answer) is refusal


class _EmptyResolver:
    async def resolve(self, name: str, port: int) -> Sequence[Address]:
        return ()


async def test_req_sec_007_an_empty_answer_is_a_name_that_cannot_be_reached() -> None:
    network_backend = RecordingBackend()
    backend = EgressBackend(
        EgressPolicy(), resolver=_EmptyResolver(), network_backend=network_backend
    )
    with pytest.raises(httpcore.ConnectError):
        await backend.connect_tcp("site.example.org", 443)
    assert network_backend.attempts == []


@pytest.mark.parametrize("text", ["fe80::1%eth0", "fe80::%eth0/64", "[fe80::1%25eth0]", "%2e.org"])
def test_req_cfg_005_an_egress_rule_with_a_zone_is_refused(text: str) -> None:
    # A zone was kept by ipaddress and ignored when matching: the rule admitted the address
    # on every interface. It is refused with a sentence that does not repeat the rule.
    with pytest.raises(RuleError) as caught:
        parse_egress_rule(text)
    assert "eth0" not in str(caught.value)


@pytest.mark.parametrize(
    "address",
    [
        "2606:4700::808:808",  # an ordinary global IPv6 address whose low 32 bits read 8.8.8.8
        "2001:4860:4860::8888",
    ],
)
def test_req_sec_006_an_ipv4_deny_rule_leaves_ordinary_ipv6_addresses_alone(address: str) -> None:
    # Only the forms that carry an IPv4 address (mapped, compatible, 6to4, NAT64, Teredo)
    # are read as that address; the low 32 bits of any other IPv6 address are not one.
    policy = _policy(deny=["8.8.8.0/24", "8.8.136.136/32"])
    assert policy.judge_address(ipaddress.ip_address(address)) is None
