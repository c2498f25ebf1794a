"""The host of a URL: what it names (a DNS name or an address) and the built-in name rules.

The host is read the way a browser reads it (the WHATWG URL standard's host parser for
http and https), because that is how the address a URL means is decided: a host is
percent-decoded, mapped by UTS #46 (through the `idna` library, non-transitional), and a
host whose last label is a number is an IPv4 address in any of the notations browsers and
`inet_aton` accept: `2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`. An address written
so is judged as the address it means, never as a name. Whatever the parser cannot read is
refused as malformed rather than guessed at.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final
from urllib.parse import unquote_to_bytes

import attrs
import idna

from rypsok.core.egress.ranges import Address, classify
from rypsok.core.egress.vocabulary import Refusal

__all__ = [
    "SPECIAL_USE_SUFFIXES",
    "Host",
    "literal_refusal",
    "name_refusal",
    "parse_host",
    "parse_ipv4_number_form",
]

_LABEL: Final = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_MAX_NAME: Final = 253

# Names that never name a public site: the book's (localhost, *.local, *.internal, *.arpa)
# and the other special-use names of the IANA registry (RFC 6761, 6762, 7686, 9476), plus
# the private-network suffixes ICANN will not delegate (its name-collision decisions).
SPECIAL_USE_SUFFIXES: Final[frozenset[str]] = frozenset(
    {
        "local",  # RFC 6762, multicast DNS
        "internal",  # ICANN, 2024: private use
        "arpa",  # infrastructure, home.arpa (RFC 8375) included
        "localhost",  # RFC 6761
        "invalid",  # RFC 6761
        "test",  # RFC 6761
        "example",  # RFC 6761 (example.com, .org and .net are ordinary names)
        "onion",  # RFC 7686
        "alt",  # RFC 9476
        "home",  # ICANN name collision: not delegated
        "corp",  # ICANN name collision: not delegated
        "mail",  # ICANN name collision: not delegated
        "lan",  # common private use
        "localdomain",  # common private use (localhost.localdomain)
    }
)


@attrs.frozen(kw_only=True)
class Host:
    """A host that could be read: exactly one of `name` (ASCII, lower-case, no root dot)
    and `address` is set."""

    name: str | None = None
    address: Address | None = None

    @property
    def text(self) -> str:
        """The host as it is written in a URL's authority (IPv6 in brackets)."""
        if self.address is None:
            assert self.name is not None
            return self.name
        if self.address.version == 6:
            return f"[{self.address}]"
        return str(self.address)


def _ipv4_number(part: str) -> int | None:
    """One part of the IPv4 forms: decimal, 0x-hexadecimal or 0-octal; None when invalid."""
    if not part:
        return None
    radix = 10
    if part[:2] in ("0x", "0X"):
        part, radix = part[2:], 16
    elif len(part) > 1 and part[0] == "0":
        part, radix = part[1:], 8
    if not part:
        return 0  # "0x" alone is zero
    digits = part.lstrip("0") or "0"
    # The value must fit in 32 bits; a longer digit string is refused before int() is asked
    # to convert it (Python refuses more than 4300 digits, and nothing long is valid).
    if len(digits) > 12:
        return None
    allowed = {10: "0123456789", 8: "01234567", 16: "0123456789abcdefABCDEF"}[radix]
    if any(c not in allowed for c in digits):
        return None
    return int(digits, radix)


def _ends_in_number(labels: list[str]) -> bool:
    # WHATWG: all digits (even an invalid octal such as 08), or any valid number form.
    last = labels[-1]
    if last and last.isascii() and last.isdigit():
        return True
    return _ipv4_number(last) is not None


def parse_ipv4_number_form(text: str) -> ipaddress.IPv4Address | Refusal | None:
    """The IPv4 address a host written in numbers means.

    None: the host does not end in a number, so it is a name. A Refusal (malformed): it ends
    in a number but is no valid address, which a browser refuses too.
    """
    labels = text.split(".")
    if len(labels) > 1 and labels[-1] == "":
        labels.pop()
    if not _ends_in_number(labels):
        return None
    if len(labels) > 4:
        return Refusal.MALFORMED_HOST
    numbers: list[int] = []
    for label in labels:
        value = _ipv4_number(label)
        if value is None:
            return Refusal.MALFORMED_HOST
        numbers.append(value)
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        return Refusal.MALFORMED_HOST
    value = numbers[-1]
    for index, number in enumerate(numbers[:-1]):
        value += number * 256 ** (3 - index)
    return ipaddress.IPv4Address(value)


def _ipv6_literal(inside: str) -> Address | Refusal:
    if "%" in inside:
        # A zone names an interface of this host: never a destination on the Internet.
        return Refusal.ZONE_ID
    if not inside.isascii() or not inside:
        return Refusal.MALFORMED_HOST
    try:
        return ipaddress.IPv6Address(inside)
    except ValueError:
        return Refusal.MALFORMED_HOST


def _to_ascii(text: str) -> str | Refusal:
    if text.isascii():
        name = text.lower()
        # An A-label must decode: "xn--" followed by garbage is not a name.
        for label in name.split("."):
            if label.startswith("xn--"):
                try:
                    idna.decode(label)
                except (idna.IDNAError, UnicodeError, ValueError):
                    return Refusal.MALFORMED_HOST
        return name
    try:
        return idna.encode(text, uts46=True, transitional=False).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError):
        return Refusal.MALFORMED_HOST


def parse_host(text: str) -> Host | Refusal:
    """Read the host of an http(s) URL: a name, an address, or why it cannot be read."""
    if text.startswith("["):
        if not text.endswith("]"):
            return Refusal.MALFORMED_HOST
        address = _ipv6_literal(text[1:-1])
        return address if isinstance(address, Refusal) else Host(address=address)
    try:
        decoded = unquote_to_bytes(text).decode("utf-8")
    except UnicodeError:
        return Refusal.MALFORMED_HOST
    if not decoded or any(ord(c) < 0x21 or ord(c) == 0x7F for c in decoded):
        return Refusal.MALFORMED_HOST
    ascii_text = _to_ascii(decoded)
    if isinstance(ascii_text, Refusal):
        return ascii_text
    number_form = parse_ipv4_number_form(ascii_text)
    if isinstance(number_form, ipaddress.IPv4Address):
        return Host(address=number_form)
    if isinstance(number_form, Refusal):
        return number_form
    # One root dot is the same name; anything else empty is a malformed name (the book).
    name = ascii_text[:-1] if ascii_text.endswith(".") else ascii_text
    labels = name.split(".")
    if not name or len(name) > _MAX_NAME or not all(_LABEL.fullmatch(x) for x in labels):
        return Refusal.MALFORMED_HOST
    return Host(name=name)


def name_refusal(name: str) -> Refusal | None:
    """The built-in judgment of a name that `parse_host` produced: a name that never names a
    public site is refused."""
    labels = name.split(".")
    if labels[-1] == "localhost":
        return Refusal.LOCALHOST
    if len(labels) == 1:
        return Refusal.SINGLE_LABEL
    if labels[-1] in SPECIAL_USE_SUFFIXES:
        return Refusal.SPECIAL_USE_NAME
    return None


def literal_refusal(host: str) -> Refusal | None:
    """The built-in judgment of a host written as an address, made without any lookup.

    `host` is a URL's host in ASCII (an IPv6 address in brackets, an IPv4 address in any
    notation a browser reads). The answer is the refusal web_fetch's default policy gives
    it (`classify`, the one address table), a malformed refusal for a host that ends in a
    number but is no address, and None for a name or a globally routable address: a name
    is judged by what it resolves to, which only a fetch finds out.
    """
    address: Address | Refusal | None
    if host.startswith("["):
        if not host.endswith("]"):
            return Refusal.MALFORMED_HOST
        address = _ipv6_literal(host[1:-1])
    else:
        # Every number form starts with a digit (decimal, 0x…, 0…): a last label that does
        # not is a name's, and most hosts are names (this runs on every result URL). Only a
        # shortcut: `parse_ipv4_number_form` alone gives the same answers.
        if not host.rstrip(".").rpartition(".")[2][:1].isdigit():
            return None
        address = parse_ipv4_number_form(host)
    if address is None or isinstance(address, Refusal):
        return address
    return classify(address)
