"""The egress policy (REQ-SEC-005 to REQ-SEC-009, REQ-SEC-017; external design §8).

One component, two profiles. The agent-directed profile (web_fetch and its robots.txt
reads) is `EgressPolicy`: `judge_url` decides a URL before any connection is made, and
`judge_address` decides each address at connect time; the network backend calls the same
`judge_address` for every address a name resolves to, so the judgment at validation and at
connection is one function. The engine profile is `engine_origin_refusal`: the configured
endpoint only, https, plain http to a loopback endpoint the operator configured.

Rules apply in the order deny, allow, built-in: a deny rule refuses even what an allow rule
admits; an allow rule admits a destination the built-in table refuses (the operator's own
responsibility, and the only way a test reaches its loopback server: REQ-TEST-005).

Implements LIM-F8.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final
from urllib.parse import urljoin

import attrs

from rypsok.config.rules import EgressRule, parse_egress_rule
from rypsok.core.egress.names import Host, name_refusal, parse_host
from rypsok.core.egress.ranges import (
    Address,
    canonical,
    canonical_network,
    carried_ipv4,
    classify,
)
from rypsok.core.egress.vocabulary import Refusal, detail_reason
from rypsok.shared.hosts import is_loopback_host

if TYPE_CHECKING:
    from collections.abc import Iterable

    from rypsok.config.schema import Config
    from rypsok.core.model import DetailReason

__all__ = [
    "DEFAULT_PORTS",
    "AdmittedURL",
    "Denial",
    "EgressPolicy",
    "ReadURL",
    "encode_path",
    "engine_origin_refusal",
    "read_url",
]

DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_SCHEME_CHARS: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-"
)
# The path and query are sent as written, except that what cannot travel in a request line
# (controls, space, non-ASCII, and the characters browsers always encode) is percent-encoded,
# as a browser and httpx encode it, so that the URL judged is the URL httpx sends.
_SAFE: Final = (
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/%[]|^"
)
_PATH_KEEP: Final = frozenset(_SAFE)
_QUERY_KEEP: Final = frozenset(_SAFE + "?`{}\\")


@attrs.frozen(kw_only=True)
class AdmittedURL:
    """A URL that passed the agent-directed profile, in the form that is requested.

    `host` is the ASCII (A-label) name, lower-case and without the root dot, or the address
    when the URL named one; `port` is always set; `path` is the path and query (never the
    fragment), starting with "/". `upgraded` says that the caller gave a plain http URL,
    that plain http is not allowed, and that this is the https form to try (REQ-FETCH-010).
    `allowed_by_rule` says that an explicit allow rule admitted the host (strict mode
    accepts those URLs too, REQ-SEC-021).
    """

    scheme: str
    host: str
    port: int
    path: str
    address: Address | None = None
    upgraded: bool
    allowed_by_rule: bool

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        if self.port == DEFAULT_PORTS[self.scheme]:
            return host
        return f"{host}:{self.port}"

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.authority}"

    @property
    def url(self) -> str:
        return f"{self.origin}{self.path}"


@attrs.frozen(kw_only=True)
class Denial:
    """A URL the profile refuses: `refusal` is for the operator's log (never the host),
    `reason` for the caller (egress, scheme or credential_in_url)."""

    refusal: Refusal

    @property
    def reason(self) -> DetailReason:
        return detail_reason(self.refusal)


def _name_matches(rule: EgressRule, name: str | None) -> bool:
    if name is None:
        return False
    if rule.host is not None and name == rule.host:
        return True
    return rule.suffix is not None and name.endswith("." + rule.suffix)


def _network_matches(rule: EgressRule, address: Address) -> bool:
    if rule.network is None:
        return False
    # A rule written as ::ffff:a.b.c.d names the IPv4 address, as the address is judged.
    network = canonical_network(rule.network)
    return address.version == network.version and address in network


def _denied_by(rule: EgressRule, name: str | None, address: Address | None) -> bool:
    """A deny rule matches the name, the address in either form, or any IPv4 address an
    IPv6 transition form of it carries (a deny of 10.0.0.0/8 also refuses
    64:ff9b::10.0.0.1 and 2002:a00:1::)."""
    if _name_matches(rule, name):
        return True
    if address is None:
        return False
    forms = (address, canonical(address), *carried_ipv4(address))
    return any(_network_matches(rule, form) for form in forms)


def _split_scheme(url: str) -> tuple[str, str] | None:
    colon = url.find(":")
    if colon < 1 or not url[0].isascii() or not url[0].isalpha():
        return None
    scheme = url[:colon]
    if any(c not in _SCHEME_CHARS for c in scheme):
        return None
    return scheme.lower(), url[colon + 1 :]


def _encode(text: str, keep: frozenset[str]) -> str:
    out: list[str] = []
    for index, char in enumerate(text):
        if char in keep:
            if char == "%" and not _is_escape(text, index):
                out.append("%25")
            else:
                out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
    return "".join(out)


def _is_escape(text: str, index: int) -> bool:
    pair = text[index + 1 : index + 3]
    return len(pair) == 2 and all(c in "0123456789abcdefABCDEF" for c in pair)


def _remove_dot_segments(path: str) -> str:
    # RFC 3986's remove_dot_segments (5.2.4), as a browser applies it: "." and ".."
    # segments (also written %2e) go before the path is sent, so the request line is the one
    # the page's own links would produce.
    segments = path.split("/")[1:]
    out: list[str] = []
    for index, segment in enumerate(segments):
        lowered = segment.lower()
        last = index == len(segments) - 1
        if lowered in (".", "%2e"):
            if last:
                out.append("")
            continue
        if lowered in ("..", ".%2e", "%2e.", "%2e%2e"):
            if out:
                out.pop()
            if last:
                out.append("")
            continue
        out.append(segment)
    return "/" + "/".join(out)


def _path_and_query(rest: str) -> str:
    fragment = rest.find("#")
    if fragment >= 0:
        rest = rest[:fragment]
    path, sep, query = rest.partition("?")
    path = path.replace("\\", "/")
    if not path.startswith("/"):
        path = "/" + path
    out = _remove_dot_segments(_encode(path, _PATH_KEEP))
    if sep:
        out += "?" + _encode(query, _QUERY_KEEP)
    return out


def _port(text: str) -> int | None:
    if not text:
        return None
    if not text.isascii() or not text.isdigit():
        return -1
    digits = text.lstrip("0") or "0"
    if len(digits) > 5 or int(digits) > 65535:
        return -1
    return int(digits)


@attrs.frozen(kw_only=True)
class ReadURL:
    """An http(s) URL as a browser reads it: the scheme, the host (a name in its ASCII form or
    an address), the port (the scheme's default when none is written) and the path and query
    as they are sent (percent-encoded where they must be, dot segments removed, no fragment).
    """

    scheme: str
    host: Host
    port: int
    path: str


def read_url(url: str) -> ReadURL | Refusal:
    """The one reading of an http(s) URL: what the policy judges, what web_fetch sends, and
    how an engine's base_url and an operator's proxy are read; or why it cannot be read."""
    return _parse(url)


def encode_path(path: str) -> str:
    """A path as it is sent: what cannot travel in a request line percent-encoded, as for a
    URL's own path."""
    return _remove_dot_segments(_encode(path, _PATH_KEEP))


def _parse(url: str) -> ReadURL | Refusal:
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        return Refusal.MALFORMED_URL
    try:
        url.encode("utf-8")
    except UnicodeError:  # an unpaired surrogate cannot be sent
        return Refusal.MALFORMED_URL
    split = _split_scheme(url)
    if split is None:
        return Refusal.SCHEME
    scheme, rest = split
    if scheme not in DEFAULT_PORTS:
        return Refusal.SCHEME
    # For http and https a browser skips any run of slashes and backslashes here.
    rest = rest.lstrip("/\\")
    end = len(rest)
    for stop in "/\\?#":
        found = rest.find(stop)
        if found >= 0:
            end = min(end, found)
    authority, rest = rest[:end], rest[end:]
    if "@" in authority:
        return Refusal.CREDENTIALS
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            return Refusal.MALFORMED_HOST
        host_text, tail = authority[: close + 1], authority[close + 1 :]
        if tail and not tail.startswith(":"):
            return Refusal.MALFORMED_URL
        port_text = tail[1:]
    else:
        host_text, _, port_text = authority.partition(":")
    port = _port(port_text)
    if port == -1:
        return Refusal.MALFORMED_URL
    host = parse_host(host_text)
    if isinstance(host, Refusal):
        return host
    return ReadURL(
        scheme=scheme,
        host=host,
        port=DEFAULT_PORTS[scheme] if port is None else port,
        path=_path_and_query(rest),
    )


@attrs.frozen(kw_only=True)
class EgressPolicy:
    """The agent-directed profile, built from `[egress]` and `[fetch]` (never from a caller).

    `connect_timeout_s` is LIM-F6: the network backend bounds resolution and connection
    by it.
    """

    allow: tuple[EgressRule, ...] = ()
    deny: tuple[EgressRule, ...] = ()
    allow_http: bool = False
    ports: frozenset[int] = frozenset({80, 443})
    connect_timeout_s: float = 3.0

    @classmethod
    def from_config(cls, config: Config, *, extra_allow: Iterable[str] = ()) -> EgressPolicy:
        """The profile of a configuration; `extra_allow` adds allow rules in code, which is
        how a test or an embedding host admits its own loopback server (REQ-TEST-005)."""
        return cls(
            allow=tuple(parse_egress_rule(r) for r in (*config.egress.allow, *extra_allow)),
            deny=tuple(parse_egress_rule(r) for r in config.egress.deny),
            allow_http=config.egress.allow_http,
            ports=frozenset(config.fetch.ports),
            connect_timeout_s=config.fetch.connect_timeout_ms / 1000,
        )

    def with_allow(self, *rules: str) -> EgressPolicy:
        """This profile with more allow rules (the same syntax as `egress.allow`)."""
        return attrs.evolve(self, allow=(*self.allow, *(parse_egress_rule(r) for r in rules)))

    def _rules(self, name: str | None, address: Address | None) -> bool | None:
        """False: a deny rule matches; True: an allow rule matches; None: neither.

        An allow rule matches the name, or the address after canonicalization (never the
        IPv4-mapped form itself: `::/0` does not admit ::ffff:127.0.0.1). A network rule
        wider than one address that covers an IPv6 transition form (6to4, NAT64, ...) admits
        it only when every IPv4 address it carries is admitted too, by an allow rule or the
        built-in table; otherwise the table decides, as if no rule matched.
        """
        if any(_denied_by(rule, name, address) for rule in self.deny):
            return False
        if any(_name_matches(rule, name) for rule in self.allow):
            return True
        if address is None:
            return None
        address = canonical(address)
        matching = [rule for rule in self.allow if _network_matches(rule, address)]
        if not matching:
            return None
        if any(rule.network is not None and rule.network.num_addresses == 1 for rule in matching):
            return True  # the operator named exactly this address
        for inner in carried_ipv4(address):
            if classify(inner) is not None and not any(
                _network_matches(rule, inner) for rule in self.allow
            ):
                return None
        return True

    def judge_name(self, name: str) -> Refusal | None:
        """A name before it is resolved: deny, allow, then the built-in name rules."""
        decided = self._rules(name, None)
        if decided is not None:
            return None if decided else Refusal.DENY_RULE
        return name_refusal(name)

    def judge_address(self, address: Address, *, host: str | None = None) -> Refusal | None:
        """One address about to be connected to, for the name `host` (None for a literal).

        A deny rule for the name or the address refuses; an allow rule for either admits;
        otherwise the built-in table decides. None means the address may be connected to.
        """
        decided = self._rules(host, address)
        if decided is not None:
            return None if decided else Refusal.DENY_RULE
        return classify(address)

    def judge_url(self, url: str, *, upgrade_http: bool = True) -> AdmittedURL | Denial:
        """Judge a URL before any connection: the web_fetch URL or a redirect target.

        A plain http URL when plain http is not allowed becomes the https target to try
        (`upgraded`) when `upgrade_http` is true, and is denied with `scheme` otherwise.
        Never raises, whatever the text.
        """
        parsed = _parse(url)
        if isinstance(parsed, Refusal):
            return Denial(refusal=parsed)
        host = parsed.host
        decided = self._rules(host.name, host.address)
        if decided is False:
            return Denial(refusal=Refusal.DENY_RULE)
        refusal: Refusal | None = None
        if decided is None:
            if host.address is not None:
                refusal = classify(host.address)
            else:
                assert host.name is not None
                refusal = name_refusal(host.name)
        target_host = host.name if host.address is None else str(host.address)
        assert target_host is not None
        if refusal is not None:
            return Denial(refusal=refusal)
        scheme, port, upgraded = parsed.scheme, parsed.port, False
        if scheme == "http" and not self.allow_http:
            if not upgrade_http:
                return Denial(refusal=Refusal.SCHEME)
            scheme, upgraded = "https", True
            if port == DEFAULT_PORTS["http"]:
                port = DEFAULT_PORTS["https"]
        if port not in self.ports:
            return Denial(refusal=Refusal.PORT)
        return AdmittedURL(
            scheme=scheme,
            host=target_host,
            port=port,
            path=parsed.path,
            address=host.address,
            upgraded=upgraded,
            allowed_by_rule=decided is True,
        )

    def judge_redirect(self, current: AdmittedURL, location: str) -> AdmittedURL | Denial:
        """Judge a redirect's Location, relative to the URL that answered (REQ-SEC-008).

        The target is read as a browser reads it (surrounding spaces and controls dropped,
        tabs and newlines removed, `\\` as `/` before the query) and judged like a caller's
        URL, except that plain http is not retried over https: it is denied with `scheme`
        unless plain http is allowed.
        """
        text = location.strip("".join(chr(c) for c in range(0x21)))
        text = text.replace("\t", "").replace("\n", "").replace("\r", "")
        cut = min((i for i in (text.find("?"), text.find("#")) if i >= 0), default=len(text))
        text = text[:cut].replace("\\", "/") + text[cut:]
        try:
            joined = _resolve_reference(current, text)
        except ValueError:
            return Denial(refusal=Refusal.MALFORMED_URL)
        return self.judge_url(joined, upgrade_http=False)


def _resolve_reference(current: AdmittedURL, text: str) -> str:
    """A Location read against the URL that answered (RFC 3986's reference resolution), as
    the WHATWG URL standard reads it.

    `urljoin` differs where it matters: it reads `///host/` and `https:///host/` as a path
    on the current host, where a browser (and `judge_url`) skips every slash and reads a
    new host. So an authority is recognised here first, and only a reference without one
    is left to `urljoin`.
    """
    split = _split_scheme(text)
    if split is not None:
        scheme, rest = split
        if scheme != current.scheme or rest.startswith("//"):
            return text  # absolute: `judge_url` reads it (and refuses other schemes)
        # The current scheme and no authority: a browser reads the rest as relative.
        text = rest
    if text.startswith("//"):
        return f"{current.scheme}:{text}"
    return urljoin(current.url, text)


def engine_origin_refusal(scheme: str, host: str) -> Refusal | None:
    """The engine profile (REQ-SEC-017) for one configured endpoint: https to its host, or
    plain http to a loopback endpoint (the operator's explicit local engine), as the
    configuration admits it: one answer to "loopback", `rypsok.shared.hosts`."""
    if scheme not in DEFAULT_PORTS:
        return Refusal.SCHEME
    if not host:
        return Refusal.MALFORMED_HOST
    if scheme == "https":
        return None
    return None if is_loopback_host(host) else Refusal.SCHEME
