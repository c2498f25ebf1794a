"""The two forms of a result's URL: the returned URL and the comparison key.

The returned URL (REQ-RANK-003) is the engine's URL changed as little as possible: known
tracking parameters removed (the query is rebuilt only when one was removed), the host
written in its ASCII (IDNA) form, and nothing else. The comparison key (REQ-RANK-002) is
derived from the returned URL by rules that never change which resource is named; it is used
for equality and ordering only, never returned and never fetched.

The parsing is done by hand on purpose: a general URL library re-serializes what it parses,
and the returned URL must keep the engine's bytes.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from typing import NamedTuple

import attrs
import idna

from rypsok.core.egress.names import literal_refusal
from rypsok.core.model import Reason

__all__ = [
    "MAX_URL_CHARS",
    "TRACKING_PARAMETERS",
    "NormalizedUrl",
    "comparison_key",
    "normalize_url",
    "returned_url",
    "url_host",
]

MAX_URL_CHARS = 2048  # LIM-F9

# Parameters that only say where a click came from; a reviewable constant (RFC 008).
TRACKING_PARAMETERS: frozenset[str] = frozenset(
    {
        "utm_source",
        "utm_medium",
        "utm_campaign",
        "utm_term",
        "utm_content",
        "utm_id",
        "fbclid",
        "gclid",
        "dclid",
        "msclkid",
        "mc_cid",
        "mc_eid",
        "igshid",
        "yclid",
        "_hsenc",
        "_hsmi",
        "ref_src",
    }
)

_DEFAULT_PORTS = {"http": 80, "https": 443}
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?\Z")


class _Parts(NamedTuple):
    """A parsed URL (internal: a tuple, built on every result at far less cost than a
    frozen attrs class)."""

    scheme: str  # lower-cased: http or https
    host: str  # ASCII, lower-cased for names, bracketed for IPv6
    port: str | None  # digits, or None when absent or empty
    rest_path: str  # from the end of the authority to the query or fragment
    query: str | None  # without the "?"
    fragment: str | None  # without the "#"
    authority_prefix_len: int  # where the host starts in the original text
    authority_end: int  # where the authority ends in the original text
    host_text: str  # the host as the engine wrote it


@attrs.frozen(kw_only=True)
class NormalizedUrl:
    """A result URL that passed REQ-RANK-003: what is returned and what is compared."""

    url: str
    key: str
    https: bool


_FORBIDDEN_ASCII = re.compile(r"[\x00-\x20\x7f]")
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zs", "Zl", "Zp", "Co", "Cn"})


def _has_forbidden_char(url: str) -> bool:
    # Controls, whitespace and format characters never belong in a URL a caller is shown:
    # they are how invisible text or a second line would be smuggled in.
    if _FORBIDDEN_ASCII.search(url) is not None:
        return True
    if url.isascii():
        return False
    return any(not ch.isascii() and unicodedata.category(ch) in _FORBIDDEN_CATEGORIES for ch in url)


def _ascii_host(host: str) -> str | None:
    """The host in ASCII form, lower-cased; None when web_fetch would refuse it."""
    if host.startswith("["):
        if not host.endswith("]"):
            return None
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return None
        return host.lower()
    if not host:
        return None
    name = host[:-1] if host.endswith(".") else host
    if not name:
        return None
    if not name.isascii():
        try:
            ascii_name = idna.encode(name, uts46=True, transitional=False).decode("ascii")
        except (idna.IDNAError, UnicodeError, ValueError):
            return None
    else:
        ascii_name = name.lower()
    labels = ascii_name.split(".")
    if any(not label or len(label) > 63 or _LABEL.match(label) is None for label in labels):
        return None
    if len(ascii_name) > 253:
        return None
    return ascii_name + ("." if host.endswith(".") else "")


def _parse(url: str) -> _Parts | None:
    match = _SCHEME.match(url)
    if match is None:
        return None
    scheme = match.group(1).lower()
    if scheme not in _DEFAULT_PORTS:
        return None
    start = match.end()
    if url[start : start + 2] != "//":
        return None
    auth_start = start + 2
    auth_end = len(url)
    for sep in "/?#":
        pos = url.find(sep, auth_start)
        if pos != -1:
            auth_end = min(auth_end, pos)
    authority = url[auth_start:auth_end]
    if "@" in authority:
        # A URL with credentials is never shown: web_fetch refuses it, and the caller
        # must not be handed a secret an engine happened to index.
        return None
    host_text = authority
    port: str | None = None
    if authority.startswith("["):
        close = authority.find("]")
        if close == -1:
            return None
        host_text = authority[: close + 1]
        tail = authority[close + 1 :]
        if tail:
            if not tail.startswith(":"):
                return None
            port = tail[1:]
    elif ":" in authority:
        host_text, port = authority.rsplit(":", 1)
    if port is not None:
        if port == "":
            port = None
        elif not port.isdigit() or not port.isascii() or int(port) > 65535:
            return None
    host = _ascii_host(host_text)
    if host is None:
        return None
    rest = url[auth_end:]
    fragment: str | None = None
    if "#" in rest:
        rest, fragment = rest.split("#", 1)
    query: str | None = None
    if "?" in rest:
        rest, query = rest.split("?", 1)
    return _Parts(
        scheme=scheme,
        host=host,
        port=port,
        rest_path=rest,
        query=query,
        fragment=fragment,
        authority_prefix_len=auth_start,
        authority_end=auth_end,
        host_text=host_text,
    )


def _decode_name(name: str) -> str:
    if "%" not in name:
        return name
    return _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), name)


def _without_tracking(query: str) -> str | None:
    """The query with tracking parameters removed; None when none was there."""
    pieces = query.split("&")
    kept = [p for p in pieces if _decode_name(p.split("=", 1)[0]) not in TRACKING_PARAMETERS]
    if len(kept) == len(pieces):
        return None
    return "&".join(kept)


def _returned(
    url: str, operator_hosts: frozenset[str] = frozenset()
) -> tuple[str, _Parts, str | None] | Reason:
    """The returned URL, its parts and its query without tracking parameters (None when
    it had none to remove, or no query), or the reason it is dropped."""
    if _has_forbidden_char(url):
        return Reason.URL_INVALID
    parts = _parse(url)
    if parts is None:
        return Reason.URL_INVALID
    if parts.host not in operator_hosts and literal_refusal(parts.host) is not None:
        return Reason.URL_INVALID
    out = url
    cleaned = None
    if parts.query is not None:
        cleaned = _without_tracking(parts.query)
        if cleaned is not None:
            head = url[: parts.authority_end] + parts.rest_path
            tail = "" if parts.fragment is None else "#" + parts.fragment
            out = head + ("?" + cleaned if cleaned else "") + tail
    if parts.host_text != parts.host and not parts.host_text.isascii():
        start = parts.authority_prefix_len
        out = out[:start] + parts.host + out[start + len(parts.host_text) :]
    if len(out) > MAX_URL_CHARS:
        return Reason.URL_TOO_LONG
    return out, parts, cleaned


def returned_url(url: str) -> str | Reason:
    """The URL the caller is shown, or the reason the result is dropped.

    Reason.URL_INVALID: not an http(s) URL, credentials, a host web_fetch would refuse (an
    empty label, a character a name cannot hold, an address literal that its default policy
    refuses without any lookup: 127.0.0.1, 10.0.0.1, [::1], 169.254.169.254), a bad port,
    an invisible character.
    Reason.URL_TOO_LONG: the returned form exceeds LIM-F9 characters.
    """
    out = _returned(url)
    return out if isinstance(out, Reason) else out[0]


def _normalize_percent(text: str) -> str:
    """Percent-encoding in one form: upper-case hex, unreserved characters decoded,
    non-ASCII characters encoded as UTF-8, a stray "%" escaped."""
    if "%" not in text and text.isascii():
        return text
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "%":
            if _PERCENT.match(text, i):
                value = int(text[i + 1 : i + 3], 16)
                decoded = chr(value)
                out.append(decoded if decoded in _UNRESERVED else f"%{value:02X}")
                i += 3
            else:
                # A stray "%" is written as its escape, so that decoding cannot make a
                # new escape out of what follows and the key stays idempotent.
                out.append("%25")
                i += 1
            continue
        if not ch.isascii():
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _key(parts: _Parts, cleaned: str | None) -> str:
    """The comparison key; `cleaned` is `_without_tracking(parts.query)` (None without a
    query), worked out once for both forms of the URL."""
    port = None if parts.port is None else int(parts.port)
    if port is None or port == _DEFAULT_PORTS[parts.scheme]:
        head = "https://" + parts.host
    else:
        head = f"{parts.scheme}://{parts.host}:{port}"
    key = head + (_normalize_percent(parts.rest_path) or "/")
    if parts.query is not None:
        query = parts.query if cleaned is None else cleaned
        if cleaned is None or cleaned:
            key += "?" + _normalize_percent(query)
    return key


def comparison_key(url: str) -> str:
    """The comparison key of a returned URL (REQ-RANK-002).

    http and https name one resource when each is on its default port, so their keys are
    equal; the host is lower-case ASCII; a default port, the fragment and tracking
    parameters are gone; percent-encoding has one form; an empty path is "/". Nothing else
    is folded: not "www.", not a trailing slash, not the order of query parameters, not the
    case of the path.
    """
    parts = _parse(url)
    if parts is None:
        raise ValueError("comparison_key takes a URL that returned_url accepted")
    return _key(parts, None if parts.query is None else _without_tracking(parts.query))


def url_host(url: str) -> str | None:
    """The host of an http(s) URL in the form `normalize_url` compares with `operator_hosts`
    (ASCII, lower-case, IPv6 in brackets), or None when it has none."""
    parts = _parse(url)
    return None if parts is None else parts.host


def normalize_url(url: str, operator_hosts: frozenset[str] = frozenset()) -> NormalizedUrl | Reason:
    """Both forms of an engine's URL, or the reason the result is dropped.

    `operator_hosts` are the hosts of the engines' configured base_url (`url_host`): an
    address the operator wrote for an engine (a private MediaWiki that links to itself) is
    the operator's word, as the engine client admits it; every other address literal that
    web_fetch's default policy refuses makes the URL invalid (`returned_url`).
    """
    out = _returned(url, operator_hosts)
    if isinstance(out, Reason):
        return out
    shown, parts, cleaned = out
    # The key of the engine's URL equals the key of the returned URL: the returned URL
    # differs only by tracking parameters and the host's ASCII form, which the key drops
    # and uses anyway.
    return NormalizedUrl(url=shown, key=_key(parts, cleaned), https=parts.scheme == "https")
