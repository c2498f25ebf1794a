"""The one answer to "is this host the loopback interface?", below the configuration (which
admits plain http to an engine on such a host) and the engine client (which connects to it
without a proxy and admits its address).

`localhost` in any case, or a loopback address literal: 127.0.0.0/8, ::1 and the IPv4-mapped
forms of 127.0.0.0/8, an IPv6 address with or without its brackets. A name with a root dot
(`localhost.`) is not: the configuration refuses a host name that ends with a dot, and a
resolver need not answer it from its hosts file as it answers `localhost`. An address with a
zone (`::1%eth0`) is not either: a zone names an interface, never the loopback one.
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback_host"]


def is_loopback_host(host: str) -> bool:
    """Whether `host` (a URL's host as written, or its hostname) is the loopback interface."""
    if host.lower() == "localhost":
        return True
    if "%" in host:
        return False
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback
