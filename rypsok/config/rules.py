"""The forms of the configuration's values that are more than a type: identifiers, names of
environment variables, egress rules, the listener's bind, hosts and origins.

Each parser raises `RuleError` with a sentence that never repeats the text it was given;
the caller adds the key.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final
from urllib.parse import urlsplit

import attrs
import idna

from rypsok.shared.hosts import is_loopback_host

__all__ = [
    "Bind",
    "EgressRule",
    "RuleError",
    "is_env_name",
    "is_identifier",
    "parse_bind",
    "parse_egress_rule",
    "parse_host_name",
    "validate_allowed_host",
    "validate_base_url",
    "validate_origin",
    "validate_proxy",
]

_IDENTIFIER: Final = re.compile(r"[a-z][a-z0-9_]*")
_ENV_NAME: Final = re.compile(r"[A-Z_][A-Z0-9_]*")
_LABEL: Final = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_MAX_NAME: Final = 253


class RuleError(ValueError):
    """A value of the right kind in the wrong form; the message never holds the value."""


def is_identifier(text: str) -> bool:
    """Engine and caller ids: lowercase letters, digits and underscores, from a letter."""
    return len(text) <= 64 and _IDENTIFIER.fullmatch(text) is not None


def is_env_name(text: str) -> bool:
    """Upper-case letters, digits and underscores: the name of a variable, not a secret."""
    return len(text) <= 128 and _ENV_NAME.fullmatch(text) is not None


def parse_host_name(text: str, *, what: str = "a host name") -> str:
    """A DNS name, lower-cased; a trailing dot, a leading dot or an empty label refused."""
    if text.endswith("."):
        raise RuleError(f"{what} must not end with a dot")
    if text.startswith("."):
        raise RuleError(f"{what} must not start with a dot")
    if not text:
        raise RuleError(f"{what} must not be empty")
    if ".." in text:
        raise RuleError(f"{what} must not have an empty label")
    name = text.lower()
    if not name.isascii():
        # UTS #46, non-transitional: the mapping a URL's host gets (rypsok.core.egress.names),
        # so that a rule written in Unicode matches the host it names (Python's own "idna"
        # codec is IDNA 2003 and would turn faß.de into fass.de).
        try:
            name = idna.encode(name, uts46=True, transitional=False).decode("ascii")
        except (idna.IDNAError, UnicodeError, ValueError):
            raise RuleError(f"{what} is not a valid name") from None
    if len(name) > _MAX_NAME or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        raise RuleError(f"{what} is not a valid name")
    for label in name.split("."):
        if label.startswith("xn--"):
            # An A-label must decode, as a URL's host must (rypsok.core.egress.names).
            try:
                idna.decode(label)
            except (idna.IDNAError, UnicodeError, ValueError):
                raise RuleError(f"{what} is not a valid name") from None
    return name


@attrs.frozen(kw_only=True)
class EgressRule:
    """One `egress.allow` or `egress.deny` rule: exactly one of its fields is set."""

    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    host: str | None = None  # an exact name
    suffix: str | None = None  # `*.corp.example` matches below corp.example, not itself


def parse_egress_rule(text: str) -> EgressRule:
    """A network in CIDR notation, an address, a host name or `*.` and a name."""
    if "://" in text or text.lower().startswith(("http:", "https:")):
        raise RuleError("a rule names a network, an address or a host, never a scheme")
    if "%" in text:
        # ipaddress keeps a zone (fe80::1%eth0) but ignores it when matching, so such a rule
        # would admit the address on every interface; a URL with a zone is refused anyway.
        raise RuleError("a rule names an address without a zone (no %)")
    if "/" in text:
        try:
            return EgressRule(network=ipaddress.ip_network(text, strict=True))
        except ValueError:
            raise RuleError(
                "a network is an address, a slash and a prefix length, with no bits set "
                "after the prefix"
            ) from None
    try:
        address = ipaddress.ip_address(text.removeprefix("[").removesuffix("]"))
    except ValueError:
        pass
    else:
        return EgressRule(network=ipaddress.ip_network(address))
    if ":" in text:
        raise RuleError("a rule names a network, an address or a host, never a port")
    if text.startswith("*."):
        return EgressRule(suffix=parse_host_name(text[2:], what="a host pattern"))
    if "*" in text:
        raise RuleError("a host pattern has * only as its whole first label (*.example)")
    name = parse_host_name(text, what="a host pattern")
    if _ends_in_number(name):
        # A URL host like this is read as an address (127.1 is 127.0.0.1), never as a
        # name, so such a rule would match nothing: ask for the address in full.
        raise RuleError("an address is written in full, as four decimal numbers (127.0.0.1)")
    return EgressRule(host=name)


def _ends_in_number(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    if last.isdigit():
        return True
    return last.startswith("0x") and all(c in "0123456789abcdef" for c in last[2:])


@attrs.frozen(kw_only=True)
class Bind:
    host: ipaddress.IPv4Address | ipaddress.IPv6Address
    port: int

    @property
    def is_loopback(self) -> bool:
        return _unmapped(self.host).is_loopback

    @property
    def is_unspecified(self) -> bool:
        return _unmapped(self.host).is_unspecified

    def __str__(self) -> str:
        if self.host.version == 6:
            return f"[{self.host}]:{self.port}"
        return f"{self.host}:{self.port}"


def _unmapped(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


_BIND_FORM: Final = "expected an address and a port (127.0.0.1:8737 or [::1]:8737)"


def _port(text: str) -> int:
    if not text.isdigit() or not text.isascii() or len(text) > 5:
        raise RuleError(_BIND_FORM)
    port = int(text)
    if not 1 <= port <= 65535:
        raise RuleError("the port must be between 1 and 65535")
    return port


def parse_bind(text: str) -> Bind:
    """`address:port` or `[v6 address]:port`; `localhost` stands for 127.0.0.1."""
    if text.startswith("["):
        close = text.find("]")
        if close < 0 or text[close + 1 : close + 2] != ":":
            raise RuleError(_BIND_FORM)
        host_text, port_text = text[1:close], text[close + 2 :]
        try:
            host: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.IPv6Address(host_text)
        except ValueError:
            raise RuleError(_BIND_FORM) from None
        return Bind(host=host, port=_port(port_text))
    host_text, sep, port_text = text.rpartition(":")
    if not sep or ":" in host_text:
        raise RuleError(_BIND_FORM)
    if host_text.lower() == "localhost":
        host_text = "127.0.0.1"
    try:
        host = ipaddress.IPv4Address(host_text)
    except ValueError:
        raise RuleError(_BIND_FORM) from None
    return Bind(host=host, port=_port(port_text))


def validate_allowed_host(text: str) -> None:
    """A Host value: a name or an address, with an optional port."""
    host, port = text, ""
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise RuleError("expected a host name or host:port")
        host, rest = text[1:close], text[close + 1 :]
        if rest and not rest.startswith(":"):
            raise RuleError("expected a host name or host:port")
        port = rest[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise RuleError("expected a host name or host:port") from None
    else:
        if text.count(":") == 1:
            host, _, port = text.partition(":")
        elif ":" in text:
            raise RuleError("expected a host name or host:port")
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            parse_host_name(host)
    if port or text.endswith(":"):
        try:
            _port(port)
        except RuleError:
            raise RuleError(
                "expected a host name or host:port, with a port from 1 to 65535"
            ) from None


def validate_origin(text: str) -> None:
    """`null`, or a scheme, a host and an optional port (`:*` for any), nothing more."""
    if text == "null":
        return
    scheme, sep, rest = text.partition("://")
    if not sep or not re.fullmatch(r"[a-z][a-z0-9+.-]*", scheme) or not rest:
        raise RuleError("expected an origin with a scheme (https://host.example) or null")
    if any(c in rest for c in "/?#@"):
        raise RuleError("an origin is a scheme, a host and a port, without a path")
    wildcard = rest.endswith(":*")
    validate_allowed_host(rest[:-2] if wildcard else rest)


def _split_url(text: str, what: str) -> tuple[str, str]:
    try:
        parts = urlsplit(text)
        host = parts.hostname
        parts.port  # noqa: B018 (raises on a port that is not a number)
    except ValueError:
        raise RuleError(f"expected {what}") from None
    if not parts.scheme or host is None or not parts.netloc:
        raise RuleError(f"expected {what}")
    if parts.username is not None or parts.password is not None:
        raise RuleError("the URL must not carry a user or a password")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in text):
        raise RuleError(f"expected {what}")
    return parts.scheme.lower(), host


def validate_base_url(text: str) -> None:
    """An absolute https URL; plain http only to a loopback host (`rypsok.shared.hosts`).

    No query and no fragment: the driver appends its own path and parameters. The host is
    read no more laxly than web_fetch reads one: a name without an empty label or a root
    dot, an address written in full (four decimal numbers, or IPv6 in brackets), and a
    port from 1 to 65535.
    """
    scheme, host = _split_url(text, "an absolute URL (https://wiki.example/w/api.php)")
    if "?" in text or "#" in text:
        raise RuleError("a base_url has no query and no fragment: the engine adds its own")
    _validate_url_host(text, host)
    if scheme == "https":
        return
    if scheme == "http":
        if is_loopback_host(host):
            return
        raise RuleError("plain http is admitted only to a loopback host; use https")
    raise RuleError("expected an https URL")


def _validate_url_host(text: str, host: str) -> None:
    """The host and port of a URL `_split_url` read, as web_fetch would read them."""
    if urlsplit(text).port == 0:
        raise RuleError("the port must be between 1 and 65535")
    if "[" in urlsplit(text).netloc:
        try:
            address = ipaddress.IPv6Address(host)
        except ValueError:
            raise RuleError("expected an IPv6 address in the brackets") from None
        if address.scope_id is not None:
            raise RuleError("an address without a zone (no %): a zone names an interface")
        return
    if not host.isascii():
        # The name as written must be a name: a form that only UTS #46 maps to one (a
        # fullwidth letter, a capital) is not read by the engine client's URL parser.
        try:
            idna.encode(host)
        except (idna.IDNAError, UnicodeError, ValueError):
            raise RuleError(
                "the URL's host is not a valid name; write it in lower case, or in its "
                "ASCII form (xn--...)"
            ) from None
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        name = parse_host_name(host, what="the URL's host")
        if _ends_in_number(name):
            # A browser and web_fetch read such a host as an address (127.1 is 127.0.0.1).
            raise RuleError(
                "an address is written in full, as four decimal numbers (127.0.0.1)"
            ) from None


def validate_proxy(text: str) -> None:
    """An http or https proxy URL (credentials in it are allowed: it is never printed)."""
    try:
        parts = urlsplit(text)
        host = parts.hostname
        parts.port  # noqa: B018
    except ValueError:
        raise RuleError("expected a proxy URL (http://proxy.example:3128)") from None
    if parts.scheme.lower() not in ("http", "https") or not host:
        raise RuleError("expected a proxy URL with the scheme http or https")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in text):
        raise RuleError("expected a proxy URL (http://proxy.example:3128)")
