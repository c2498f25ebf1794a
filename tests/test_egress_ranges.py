"""The refusal table against the IANA special-purpose registries (REQ-SEC-006, REQ-TEST-005,
THR-05, audit NET-4).

The expectations come from the registries' own CSV files in tests/fixtures/iana/ (copied
from IANA's CSV form), never from the table under test. Each block's first and last address
is judged twice, through the production paths: as a literal in a URL (`judge_url`, denied
before any connection) and as the answer of a name at connect time (the network backend
with a recording network backend that refuses to dial anything off loopback and records what was
attempted). A block is expected refused unless the registry marks it globally reachable
(True) and the book does not refuse it: of those, only the NAT64 well-known prefix
64:ff9b::/96 is refused, because the book refuses NAT64 ranges whatever they embed.
"""

from __future__ import annotations

import csv
import ipaddress
import re
from pathlib import Path
from typing import Final

import httpcore
import pytest

from rypsok.core.egress import EgressPolicy, EgressRefused, Refusal
from rypsok.core.egress.backend import EgressBackend
from rypsok.core.egress.policy import AdmittedURL, Denial
from rypsok.core.egress.ranges import IPV4_BLOCKS, IPV6_BLOCKS, Block, classify
from rypsok.core.egress.testing import MapResolver, RecordingBackend
from rypsok.core.model import DetailReason

_FIXTURES: Final = Path(__file__).parent / "fixtures" / "iana"
# Globally reachable in the registry, refused by the book (REQ-SEC-006: NAT64 ranges).
_BOOK_REFUSES: Final = {"64:ff9b::/96": Refusal.NAT64}
_FOOTNOTE: Final = re.compile(r"\s*\[\d+\]")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _registry_rows() -> list[tuple[str, str, bool]]:
    """(block, registry name, globally reachable) for every block of both registries."""
    rows: list[tuple[str, str, bool]] = []
    for name in ("iana-ipv4-special-registry-1.csv", "iana-ipv6-special-registry-1.csv"):
        with (_FIXTURES / name).open(newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                reachable = _FOOTNOTE.sub("", row["Globally Reachable"]).strip() == "True"
                for block in row["Address Block"].split(","):
                    rows.append((_FOOTNOTE.sub("", block).strip(), row["Name"], reachable))
    return rows


_ROWS: Final = _registry_rows()


def _ends() -> list[tuple[str, Address, bool]]:
    cases: list[tuple[str, Address, bool]] = []
    for block, _name, reachable in _ROWS:
        network = ipaddress.ip_network(block)
        admitted = reachable and block not in _BOOK_REFUSES
        cases.append((block, network[0], admitted))
        cases.append((block, network[-1], admitted))
    return cases


def _literal_url(address: Address) -> str:
    host = f"[{address}]" if address.version == 6 else str(address)
    return f"https://{host}/page"


def test_req_sec_006_the_fixtures_hold_every_row_of_both_registries() -> None:
    # 25 + 25 rows, one IPv4 row holding two blocks (the fixtures' README).
    assert len([r for r in _ROWS if ":" not in r[0]]) == 26
    assert len([r for r in _ROWS if ":" in r[0]]) == 25
    assert {r[0] for r in _ROWS if r[2]} >= {"192.0.0.9/32", "2001:3::/32", "64:ff9b::/96"}


@pytest.mark.parametrize(("block", "address", "admitted"), _ends(), ids=str)
def test_req_sec_006_every_special_purpose_block_is_refused(
    block: str, address: Address, admitted: bool
) -> None:
    judged = EgressPolicy().judge_url(_literal_url(address))
    if admitted:
        assert isinstance(judged, AdmittedURL), block
        assert judged.address == address
    else:
        assert isinstance(judged, Denial), block
        assert judged.reason is DetailReason.EGRESS
        if block in _BOOK_REFUSES:
            assert judged.refusal is _BOOK_REFUSES[block]


@pytest.mark.parametrize(("block", "address", "admitted"), _ends(), ids=str)
async def test_req_sec_007_every_special_purpose_block_is_judged_at_connect_time(
    block: str, address: Address, admitted: bool
) -> None:
    resolver = MapResolver({"site.example.org": [str(address)]})
    network_backend = RecordingBackend()
    backend = EgressBackend(EgressPolicy(), resolver=resolver, network_backend=network_backend)
    if admitted:
        # Admitted: dialled, and the recording network backend (not the policy) stops it.
        with pytest.raises(httpcore.ConnectError):
            await backend.connect_tcp("site.example.org", 443)
        assert network_backend.attempts == [(address, 443)]
    else:
        with pytest.raises(EgressRefused) as caught:
            await backend.connect_tcp("site.example.org", 443)
        assert network_backend.attempts == [], block
        assert isinstance(caught.value.refusal, Refusal)
        assert "site" not in str(caught.value)


# The book's refusals beyond the special-purpose registries, each with its class, and a
# few globally routable neighbours that must stay admitted (first and last of each range).
_BOOK_TABLE: Final[tuple[tuple[str, Refusal | None], ...]] = (
    ("224.0.0.0", Refusal.MULTICAST),
    ("239.255.255.255", Refusal.MULTICAST),
    ("ff00::", Refusal.MULTICAST),
    ("ff02::1", Refusal.MULTICAST),
    ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Refusal.MULTICAST),
    ("fec0::", Refusal.SITE_LOCAL),
    ("feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Refusal.SITE_LOCAL),
    ("::2", Refusal.IPV4_COMPATIBLE),
    ("::7f00:1", Refusal.IPV4_COMPATIBLE),
    ("::ffff:ffff", Refusal.IPV4_COMPATIBLE),
    ("169.254.169.254", Refusal.METADATA),
    ("169.254.170.2", Refusal.METADATA),
    ("100.100.100.200", Refusal.METADATA),
    ("168.63.129.16", Refusal.METADATA),
    ("fd00:ec2::254", Refusal.METADATA),
    ("64:ff9b::5db8:d70e", Refusal.NAT64),  # a public IPv4 address behind NAT64: refused
    ("64:ff9b:1::", Refusal.NAT64),
    ("64:ff9b:1:ffff:ffff:ffff:ffff:ffff", Refusal.NAT64),
    ("2001::5db8:d70e", Refusal.TEREDO),
    ("2001:0:ffff:ffff:ffff:ffff:ffff:ffff", Refusal.TEREDO),
    ("1::", Refusal.RESERVED),  # outside 2000::/3
    ("1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Refusal.RESERVED),
    ("4000::", Refusal.RESERVED),
    ("fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Refusal.RESERVED),
    ("100.63.255.255", None),
    ("100.128.0.0", None),
    ("1.0.0.0", None),
    ("223.255.255.255", None),
    ("2000::", None),
    ("3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", None),
    ("2606:4700::6810:84e5", None),
    ("168.63.129.15", None),
    ("169.254.169.253", Refusal.LINK_LOCAL),
    ("169.254.169.255", Refusal.LINK_LOCAL),
)


@pytest.mark.parametrize(("text", "expected"), _BOOK_TABLE)
def test_req_sec_006_the_books_own_ranges_are_refused_with_their_class(
    text: str, expected: Refusal | None
) -> None:
    judged = EgressPolicy().judge_url(_literal_url(ipaddress.ip_address(text)))
    if expected is None:
        assert isinstance(judged, AdmittedURL)
    else:
        assert isinstance(judged, Denial)
        assert judged.refusal is expected


# IPv4 in IPv6: mapped addresses are the IPv4 address (the book's canonicalization); 6to4
# is judged by the IPv4 address it embeds; NAT64, Teredo and IPv4-compatible are refused.
_EMBEDDED: Final[tuple[tuple[str, Refusal | None], ...]] = (
    ("::ffff:127.0.0.1", Refusal.LOOPBACK),
    ("::ffff:7f00:1", Refusal.LOOPBACK),
    ("0:0:0:0:0:ffff:10.1.2.3", Refusal.PRIVATE),
    ("::ffff:169.254.169.254", Refusal.METADATA),
    ("::ffff:100.64.0.1", Refusal.CGNAT),
    ("::ffff:0.0.0.0", Refusal.UNSPECIFIED),
    ("::ffff:255.255.255.255", Refusal.BROADCAST),
    ("::ffff:93.184.215.14", None),
    ("2002:7f00:1::", Refusal.LOOPBACK),
    ("2002:a00:1:ffff::1", Refusal.PRIVATE),
    ("2002:a9fe:a9fe::1", Refusal.METADATA),
    ("2002:c0a8:101::", Refusal.PRIVATE),
    ("2002:5db8:d70e::1", None),
    ("64:ff9b::7f00:1", Refusal.NAT64),
    ("64:ff9b::a00:1", Refusal.NAT64),
    ("::127.0.0.1", Refusal.IPV4_COMPATIBLE),
    ("::10.0.0.1", Refusal.IPV4_COMPATIBLE),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Refusal.TEREDO),
)


@pytest.mark.parametrize(("text", "expected"), _EMBEDDED)
async def test_req_test_005_embedded_ipv4_forms_are_judged_as_what_they_reach(
    text: str, expected: Refusal | None
) -> None:
    address = ipaddress.ip_address(text)
    judged = EgressPolicy().judge_url(_literal_url(address))
    # The same answer when a name resolves to the form at connect time.
    network_backend = RecordingBackend()
    backend = EgressBackend(
        EgressPolicy(),
        resolver=MapResolver({"mapped.example.org": [text]}),
        network_backend=network_backend,
    )
    if expected is None:
        assert isinstance(judged, AdmittedURL)
        with pytest.raises(httpcore.ConnectError):
            await backend.connect_tcp("mapped.example.org", 443)
        assert network_backend.attempts == [(address, 443)]
    else:
        assert isinstance(judged, Denial)
        assert judged.refusal is expected
        with pytest.raises(EgressRefused) as caught:
            await backend.connect_tcp("mapped.example.org", 443)
        assert caught.value.refusal is expected
        assert network_backend.attempts == []


def test_req_sec_006_the_table_holds_every_block_of_the_registries() -> None:
    # The registry rows of the table cover every block of the registries' CSV.
    tabled = {str(row.network) for row in (*IPV4_BLOCKS, *IPV6_BLOCKS)}
    assert {block for block, _name, _reachable in _ROWS} <= tabled


@pytest.mark.parametrize("row", [*IPV4_BLOCKS, *IPV6_BLOCKS], ids=lambda r: str(r.network))
def test_req_sec_006_each_table_row_decides_its_own_first_and_last_address(row: Block) -> None:
    # Where a row is the most specific one for its ends, the ends carry its class; a row
    # nested inside a wider one is not shadowed by it. Mapped and 6to4 rows are judged
    # by the IPv4 address they carry and are covered above.
    if str(row.network) in ("::ffff:0:0/96", "2002::/16"):
        return
    rows = (*IPV4_BLOCKS, *IPV6_BLOCKS)
    for address in (row.network[0], row.network[-1]):
        narrower = [
            other
            for other in rows
            if other.network.version == row.network.version
            and other.network.prefixlen > row.network.prefixlen
            and address in other.network
        ]
        if not narrower:
            assert classify(address) is row.refusal, address


@pytest.mark.parametrize(
    ("address", "carried"),
    [
        # RFC 4380's example: server 65.54.227.120, client 192.0.2.45 (its bits inverted).
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", ("65.54.227.120", "192.0.2.45")),
        ("2001:0:c000:201:0:0:3f57:fefe", ("192.0.2.1", "192.168.1.1")),
        ("2002:c000:201::1", ("192.0.2.1",)),  # 6to4
        ("2002:ffff:ffff::", ("255.255.255.255",)),  # every bit of the carried address
        ("2002:0:1::", ("0.0.0.1",)),
        ("::2", ("0.0.0.2",)),  # IPv4-compatible, the lowest
        ("::c000:205", ("192.0.2.5",)),  # IPv4-compatible, an odd last byte kept
        ("64:ff9b::c000:205", ("192.0.2.5",)),  # NAT64, the well-known prefix
        ("64:ff9b:1::c000:205", ("192.0.2.5",)),  # NAT64, the local-use prefix
        ("::ffff:0:c000:205", ("192.0.2.5",)),  # SIIT's IPv4-translated form
        ("::ffff:c000:205", ()),  # IPv4-mapped: the IPv4 address itself, not a carrier
        ("192.0.2.5", ()),  # an IPv4 address carries nothing
        ("::1", ()),  # loopback, not an IPv4-compatible address
        ("::", ()),  # unspecified
    ],
)
def test_req_sec_006_the_ipv4_addresses_a_transition_form_carries(
    address: str, carried: tuple[str, ...]
) -> None:
    from rypsok.core.egress.ranges import carried_ipv4

    assert carried_ipv4(ipaddress.ip_address(address)) == tuple(
        ipaddress.IPv4Address(a) for a in carried
    )
