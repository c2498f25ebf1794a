"""Why the egress policy refused something: one closed vocabulary for the whole component.

A refusal is written to the operator's log (event `refused`, with this name and never the
host) and decides which answer the caller gets: a refusal judged on the URL is `denied`
with the reason of `detail_reason`; a refusal met only at connect time is answered as a
network failure, identical to a name that does not resolve (external design §8).
"""

from __future__ import annotations

from enum import StrEnum

from rypsok.core.model import DetailReason

__all__ = ["Refusal", "detail_reason"]


class Refusal(StrEnum):
    """The class of one refusal."""

    # Address classes: the IANA special-purpose registries plus the book's own additions.
    UNSPECIFIED = "unspecified"
    THIS_NETWORK = "this_network"
    LOOPBACK = "loopback"
    PRIVATE = "private"
    CGNAT = "cgnat"
    LINK_LOCAL = "link_local"
    SITE_LOCAL = "site_local"
    UNIQUE_LOCAL = "unique_local"
    MULTICAST = "multicast"
    BROADCAST = "broadcast"
    BENCHMARKING = "benchmarking"
    DOCUMENTATION = "documentation"
    PROTOCOL_ASSIGNMENT = "protocol_assignment"
    RESERVED = "reserved"
    NAT64 = "nat64"
    TEREDO = "teredo"
    IPV4_COMPATIBLE = "ipv4_compatible"
    METADATA = "metadata"
    # Host names.
    LOCALHOST = "localhost"
    SINGLE_LABEL = "single_label"
    SPECIAL_USE_NAME = "special_use_name"
    MALFORMED_HOST = "malformed_host"
    ZONE_ID = "zone_id"
    # The operator's own rules.
    DENY_RULE = "deny_rule"
    # The request itself.
    MALFORMED_URL = "malformed_url"
    SCHEME = "scheme"
    CREDENTIALS = "credentials"
    PORT = "port"
    METHOD = "method"


_TO_DETAIL: dict[Refusal, DetailReason] = {
    Refusal.SCHEME: DetailReason.SCHEME,
    Refusal.CREDENTIALS: DetailReason.CREDENTIAL_IN_URL,
}


def detail_reason(refusal: Refusal) -> DetailReason:
    """The caller-facing reason of a refusal judged on the URL: scheme, credential_in_url,
    or egress for every destination, port, method or header refusal."""
    return _TO_DETAIL.get(refusal, DetailReason.EGRESS)
