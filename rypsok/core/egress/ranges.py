"""The built-in address table of the agent-directed profile (REQ-SEC-006, THR-05).

The table is explicit data, one row per block, so that a reviewer can hold it against the
IANA IPv4 and IPv6 Special-Purpose Address Registries row by row, and so that the answer
does not depend on the `ipaddress` flags of one Python version (they differ for mapped,
6to4 and NAT64 forms). A lookup takes the most specific row that contains the address: the
registries nest blocks (192.0.0.9/32, globally reachable, inside 192.0.0.0/24, which is
not), and a row whose refusal is None admits its block again.

Beyond the registries, the book refuses multicast, the deprecated site-local and
IPv4-compatible forms, NAT64 (both prefixes, whatever they embed) and cloud metadata
addresses, and admits only 2000::/3 of IPv6 (global unicast): every other IPv6 block is
reserved, unassigned, multicast, local or a transition form.

Embedded IPv4 is judged as IPv4: an IPv4-mapped address (::ffff:a.b.c.d) is the IPv4
address it maps (the book's canonicalization), and a 6to4 address (2002:aabb:ccdd::/48)
is refused when the IPv4 address it embeds is. Teredo and IPv4-compatible addresses are
refused whole: both are deprecated tunnelling forms whose destination is not the address.
"""

from __future__ import annotations

import ipaddress
from typing import Final, TypeAlias

import attrs

from rypsok.core.egress.vocabulary import Refusal

__all__ = [
    "IPV4_BLOCKS",
    "IPV6_BLOCKS",
    "Address",
    "Block",
    "canonical",
    "canonical_network",
    "carried_ipv4",
    "classify",
    "embedded_ipv4",
]

Address: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
Network: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network


@attrs.frozen(kw_only=True)
class Block:
    """One row: a network and its refusal (None: admitted)."""

    network: Network
    refusal: Refusal | None


def _row(network: str, refusal: Refusal | None) -> Block:
    return Block(network=ipaddress.ip_network(network), refusal=refusal)


R = Refusal

# Each row's comment is for the reviewer, who holds it against its source: the name the
# source gives the block, then "IANA registry" (the IPv4 or IPv6 Special-Purpose Address
# Registry, whose CSV the tests compare the table with) and the RFC it cites, an RFC alone,
# the IANA address space, or "the book" (a block the book adds). No code reads them.

IPV4_BLOCKS: Final[tuple[Block, ...]] = (
    _row("0.0.0.0/0", None),  # Globally routable unicast: the default of the profile
    _row("0.0.0.0/8", R.THIS_NETWORK),  # This network: IANA registry, RFC 791
    _row("0.0.0.0/32", R.UNSPECIFIED),  # This host on this network: IANA registry, RFC 1122
    _row("10.0.0.0/8", R.PRIVATE),  # Private-Use: IANA registry, RFC 1918
    _row("100.64.0.0/10", R.CGNAT),  # Shared Address Space: IANA registry, RFC 6598
    _row("100.100.100.200/32", R.METADATA),  # Alibaba Cloud metadata service: the book
    _row("127.0.0.0/8", R.LOOPBACK),  # Loopback: IANA registry, RFC 1122
    _row("169.254.0.0/16", R.LINK_LOCAL),  # Link Local: IANA registry, RFC 3927
    _row("169.254.169.254/32", R.METADATA),  # Cloud instance metadata service: the book
    _row("169.254.170.2/32", R.METADATA),  # Container task metadata service: the book
    _row("172.16.0.0/12", R.PRIVATE),  # Private-Use: IANA registry, RFC 1918
    # IETF Protocol Assignments: IANA registry, RFC 6890
    _row("192.0.0.0/24", R.PROTOCOL_ASSIGNMENT),
    # IPv4 Service Continuity Prefix: IANA registry, RFC 7335
    _row("192.0.0.0/29", R.PROTOCOL_ASSIGNMENT),
    _row("192.0.0.8/32", R.PROTOCOL_ASSIGNMENT),  # IPv4 dummy address: IANA registry, RFC 7600
    _row("192.0.0.9/32", None),  # Port Control Protocol Anycast: IANA registry, RFC 7723
    # Traversal Using Relays around NAT Anycast: IANA registry, RFC 8155
    _row("192.0.0.10/32", None),
    _row("192.0.0.170/32", R.NAT64),  # NAT64/DNS64 Discovery: IANA registry, RFC 8880
    _row("192.0.0.171/32", R.NAT64),  # NAT64/DNS64 Discovery: IANA registry, RFC 8880
    _row("192.0.2.0/24", R.DOCUMENTATION),  # Documentation (TEST-NET-1): IANA registry, RFC 5737
    _row("192.31.196.0/24", None),  # AS112-v4: IANA registry, RFC 7535
    _row("192.52.193.0/24", None),  # AMT: IANA registry, RFC 7450
    _row("192.88.99.0/24", R.RESERVED),  # Deprecated (6to4 Relay Anycast): IANA registry, RFC 7526
    _row("192.88.99.2/32", R.RESERVED),  # 6a44-relay anycast address: IANA registry, RFC 6751
    _row("192.168.0.0/16", R.PRIVATE),  # Private-Use: IANA registry, RFC 1918
    _row("192.175.48.0/24", None),  # Direct Delegation AS112 Service: IANA registry, RFC 7534
    _row("198.18.0.0/15", R.BENCHMARKING),  # Benchmarking: IANA registry, RFC 2544
    _row("198.51.100.0/24", R.DOCUMENTATION),  # Documentation (TEST-NET-2): IANA registry, RFC 5737
    _row("203.0.113.0/24", R.DOCUMENTATION),  # Documentation (TEST-NET-3): IANA registry, RFC 5737
    _row("224.0.0.0/4", R.MULTICAST),  # Multicast: IANA IPv4 address space, RFC 5771
    _row("240.0.0.0/4", R.RESERVED),  # Reserved: IANA registry, RFC 1112
    _row("255.255.255.255/32", R.BROADCAST),  # Limited Broadcast: IANA registry, RFC 919
    # Azure's host endpoint is a public address that reaches the host's own agent from
    # inside a virtual machine: a metadata address in all but name.
    _row("168.63.129.16/32", R.METADATA),  # Azure host endpoint (WireServer): the book
)

IPV6_BLOCKS: Final[tuple[Block, ...]] = (
    _row("::/0", R.RESERVED),  # Outside global unicast: IANA IPv6 address space
    _row("2000::/3", None),  # Global Unicast: IANA IPv6 address space, RFC 4291
    _row("::/128", R.UNSPECIFIED),  # Unspecified Address: IANA registry, RFC 4291
    _row("::1/128", R.LOOPBACK),  # Loopback Address: IANA registry, RFC 4291
    _row("::/96", R.IPV4_COMPATIBLE),  # IPv4-compatible (deprecated): RFC 4291 §2.5.5.1
    # Reached only by a caller that did not canonicalize first: `classify` unwraps it.
    _row("::ffff:0:0/96", R.RESERVED),  # IPv4-mapped Address: IANA registry, RFC 4291
    _row("64:ff9b::/96", R.NAT64),  # IPv4-IPv6 Translat.: IANA registry, RFC 6052
    _row("64:ff9b:1::/48", R.NAT64),  # IPv4-IPv6 Translat.: IANA registry, RFC 8215
    _row("100::/64", R.RESERVED),  # Discard-Only Address Block: IANA registry, RFC 6666
    _row("100:0:0:1::/64", R.RESERVED),  # Dummy IPv6 Prefix: IANA registry, RFC 9780
    _row("2001::/23", R.PROTOCOL_ASSIGNMENT),  # IETF Protocol Assignments: IANA registry, RFC 2928
    _row("2001::/32", R.TEREDO),  # TEREDO: IANA registry, RFC 4380
    _row("2001:1::1/128", None),  # Port Control Protocol Anycast: IANA registry, RFC 7723
    # Traversal Using Relays around NAT Anycast: IANA registry, RFC 8155
    _row("2001:1::2/128", None),
    # DNS-SD Service Registration Protocol Anycast: IANA registry, RFC 9665
    _row("2001:1::3/128", None),
    _row("2001:2::/48", R.BENCHMARKING),  # Benchmarking: IANA registry, RFC 5180
    _row("2001:3::/32", None),  # AMT: IANA registry, RFC 7450
    _row("2001:4:112::/48", None),  # AS112-v6: IANA registry, RFC 7535
    _row("2001:10::/28", R.RESERVED),  # Deprecated (previously ORCHID): IANA registry, RFC 4843
    _row("2001:20::/28", None),  # ORCHIDv2: IANA registry, RFC 7343
    # Drone Remote ID Protocol Entity Tags (DETs) Prefix: IANA registry, RFC 9374
    _row("2001:30::/28", None),
    _row("2001:db8::/32", R.DOCUMENTATION),  # Documentation: IANA registry, RFC 3849
    # Admitted as a block; `classify` judges the IPv4 address each 6to4 address embeds.
    _row("2002::/16", None),  # 6to4: IANA registry, RFC 3056
    _row("2620:4f:8000::/48", None),  # Direct Delegation AS112 Service: IANA registry, RFC 7534
    _row("3fff::/20", R.DOCUMENTATION),  # Documentation: IANA registry, RFC 9637
    _row("5f00::/16", R.RESERVED),  # Segment Routing (SRv6) SIDs: IANA registry, RFC 9602
    _row("fc00::/7", R.UNIQUE_LOCAL),  # Unique-Local: IANA registry, RFC 4193
    _row("fd00:ec2::254/128", R.METADATA),  # AWS instance metadata service (IPv6): the book
    _row("fe80::/10", R.LINK_LOCAL),  # Link-Local Unicast: IANA registry, RFC 4291
    _row("fec0::/10", R.SITE_LOCAL),  # Site-Local (deprecated): RFC 3879
    _row("ff00::/8", R.MULTICAST),  # Multicast: IANA IPv6 address space, RFC 4291
)

# Most specific first, so that the first containing row is the answer.
_V4: Final = tuple(sorted(IPV4_BLOCKS, key=lambda b: -b.network.prefixlen))
_V6: Final = tuple(sorted(IPV6_BLOCKS, key=lambda b: -b.network.prefixlen))
_MAPPED: Final = ipaddress.IPv6Network("::ffff:0:0/96")
_SIX_TO_FOUR: Final = ipaddress.IPv6Network("2002::/16")
_TEREDO: Final = ipaddress.IPv6Network("2001::/32")
# The forms whose last 32 bits are an IPv4 address: NAT64 (both prefixes; the local-use one
# in its common /96 form), SIIT's IPv4-translated form and the deprecated IPv4-compatible
# form (RFC 6052, 8215, 7915, 4291).
_LOW_32: Final = (
    ipaddress.IPv6Network("64:ff9b::/96"),
    ipaddress.IPv6Network("64:ff9b:1::/48"),
    ipaddress.IPv6Network("::ffff:0:0:0/96"),
    ipaddress.IPv6Network("::/96"),
)


def canonical(address: Address) -> Address:
    """An IPv4-mapped IPv6 address as the IPv4 address it maps; any other unchanged."""
    if isinstance(address, ipaddress.IPv6Address) and address in _MAPPED:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a 6to4 address embeds (bits 16 to 47), else None."""
    if isinstance(address, ipaddress.IPv6Address) and address in _SIX_TO_FOUR:
        return ipaddress.IPv4Address((int(address) >> 80) & 0xFFFFFFFF)
    return None


def carried_ipv4(address: Address) -> tuple[ipaddress.IPv4Address, ...]:
    """Every IPv4 address an IPv6 transition form carries (6to4, NAT64, SIIT,
    IPv4-compatible, and a Teredo address's server and client), after canonicalization.

    A packet to such an address ends up at (or is translated to) the IPv4 address, so an
    operator's deny rule for an IPv4 network is matched against these too, and an allow
    rule for the IPv6 form does not vouch for the IPv4 address it carries.
    """
    address = canonical(address)
    if isinstance(address, ipaddress.IPv4Address):
        return ()
    value = int(address)
    out: list[ipaddress.IPv4Address] = []
    inner = embedded_ipv4(address)
    if inner is not None:
        out.append(inner)
    if address in _TEREDO:
        out.append(ipaddress.IPv4Address((value >> 64) & 0xFFFFFFFF))
        out.append(ipaddress.IPv4Address(~value & 0xFFFFFFFF))
    # :: and ::1 are the unspecified and loopback addresses, not IPv4-compatible ones.
    if value > 1 and any(address in network for network in _LOW_32):
        out.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    return tuple(out)


def canonical_network(network: Network) -> Network:
    """An IPv6 network inside ::ffff:0:0/96 as the IPv4 network it maps; any other
    unchanged (a rule written in the mapped form names IPv4 destinations)."""
    if isinstance(network, ipaddress.IPv6Network) and network.subnet_of(_MAPPED):
        return ipaddress.IPv4Network(
            (int(network.network_address) & 0xFFFFFFFF, network.prefixlen - 96)
        )
    return network


def _lookup(address: Address) -> Refusal | None:
    rows = _V4 if isinstance(address, ipaddress.IPv4Address) else _V6
    for block in rows:
        if address in block.network:
            return block.refusal
    raise AssertionError("the table has a default row")  # pragma: no cover


def classify(address: Address) -> Refusal | None:
    """The built-in judgment of one address: its refusal class, or None when it is globally
    routable unicast and may be connected to."""
    address = canonical(address)
    inner = embedded_ipv4(address)
    if inner is not None:
        return _lookup(inner)
    return _lookup(address)
