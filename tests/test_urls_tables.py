"""The returned URL and the comparison key, table by table (REQ-RANK-002, REQ-RANK-003,
LIM-F9): every tracking parameter, every class of refused character with its range ends,
and both sides of every limit (URL length, host and label length, port).

Written against the survivors of tools/mutation.
"""

from __future__ import annotations

import pytest

from rypsok.core.model import Reason
from rypsok.core.urls import comparison_key, normalize_url, returned_url, url_host

# The reviewable list of RFC 008, written out here on its own.
TRACKING = [
    "utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content", "utm_id", "fbclid",
    "gclid", "dclid", "msclkid", "mc_cid", "mc_eid", "igshid", "yclid", "_hsenc", "_hsmi",
    "ref_src",
]  # fmt: skip


@pytest.mark.parametrize("name", TRACKING)
def test_req_rank_003_every_tracking_parameter_is_removed(name: str) -> None:
    assert returned_url(f"https://example.org/p?a=1&{name}=x&b=2") == (
        "https://example.org/p?a=1&b=2"
    )
    assert returned_url(f"https://example.org/p?{name}") == "https://example.org/p"
    # The key drops it too, and a percent-encoded name is the same name.
    encoded = name.replace("_", "%5F")
    assert comparison_key(f"https://example.org/p?{encoded}=1&a=1") == ("https://example.org/p?a=1")


@pytest.mark.parametrize("name", ["utm", "utm_", "ref", "gclid2", "xfbclid", "UTM_ID"])
def test_req_rank_003_a_parameter_near_a_tracking_name_is_kept(name: str) -> None:
    url = f"https://example.org/p?{name}=1"
    assert returned_url(url) == url
    assert comparison_key(url) == url


# --- characters ------------------------------------------------------------------------------

REFUSED = {
    "C0 first": "\x00",
    "C0 last": "\x1f",
    "space": " ",
    "DEL": "\x7f",
    "C1 first": "\x80",
    "C1 last": "\x9f",
    "soft hyphen (Cf)": "\u00ad",
    "zero width space (Cf)": "\u200b",
    "byte order mark (Cf)": "\ufeff",
    "tag (Cf)": "\U000e0041",
    "NBSP (Zs)": "\u00a0",
    "en quad (Zs)": "\u2000",
    "ideographic space (Zs)": "\u3000",
    "line separator (Zl)": "\u2028",
    "paragraph separator (Zp)": "\u2029",
    "private use first (Co)": "\ue000",
    "private use last (Co)": "\uf8ff",
    "supplementary private use (Co)": "\U000f0000",
    "unassigned (Cn)": "\u0378",
    "noncharacter (Cn)": "\ufdd0",
    "astral unassigned (Cn)": "\U0002fffd",
    "surrogate (Cs)": "\ud800",
}


@pytest.mark.parametrize("char", REFUSED.values(), ids=REFUSED.keys())
@pytest.mark.parametrize("where", ["path", "query", "fragment"])
def test_req_rank_003_a_refused_character_anywhere_makes_the_url_invalid(
    char: str, where: str
) -> None:
    url = {
        "path": f"https://example.org/a{char}b",
        "query": f"https://example.org/a?q={char}",
        "fragment": f"https://example.org/a#{char}",
    }[where]
    assert returned_url(url) == Reason.URL_INVALID
    assert normalize_url(url) == Reason.URL_INVALID


@pytest.mark.parametrize("char", ["!", "~", "é", "ü", "\u4e00", "\U0001f600", "\u0301"])
def test_req_rank_003_visible_characters_next_to_the_refused_ones_are_kept(char: str) -> None:
    url = f"https://example.org/a{char}b?q={char}#{char}"
    assert returned_url(url) == url


# --- limits --------------------------------------------------------------------------------


def test_lim_f9_a_returned_url_of_exactly_2048_characters_is_kept() -> None:
    head = "https://example.org/"
    url = head + "a" * (2048 - len(head))
    assert returned_url(url) == url
    assert returned_url(url + "a") == Reason.URL_TOO_LONG


def test_lim_f9_the_length_counts_the_url_after_tracking_parameters_and_idna() -> None:
    head = "https://example.org/"
    kept = head + "a" * (2048 - len(head))
    assert returned_url(kept + "?utm_source=" + "x" * 100) == kept
    # The ASCII form of the host is what counts: "ü" becomes "xn--tda".
    uni = "https://ü/"
    long_uni = uni + "a" * (2048 - len("https://xn--tda/"))
    assert returned_url(long_uni) == "https://xn--tda/" + "a" * (2048 - len("https://xn--tda/"))
    assert returned_url(long_uni + "a") == Reason.URL_TOO_LONG


def test_req_rank_003_host_and_label_length_ends() -> None:
    label63 = "a" * 63
    assert returned_url(f"https://{label63}.example/") == f"https://{label63}.example/"
    assert returned_url(f"https://{'a' * 64}.example/") == Reason.URL_INVALID
    # 253 characters of host name: four labels of 63 and one of 1 with dots.
    host253 = ".".join([label63] * 3 + ["a" * 61])
    assert len(host253) == 253
    assert returned_url(f"https://{host253}/") == f"https://{host253}/"
    assert returned_url(f"https://{host253}./") == f"https://{host253}./"
    host254 = ".".join([label63] * 3 + ["a" * 62])
    assert returned_url(f"https://{host254}/") == Reason.URL_INVALID


@pytest.mark.parametrize(
    ("label", "ok"),
    [
        ("a", True),
        ("a-b", True),
        ("a_b", True),
        ("_dmarc", True),
        ("9", True),
        ("-a", False),
        ("a-", False),
        ("a.b", True),
        ("a_", True),
        ("_", True),
        ("a!b", False),
    ],
)
def test_req_rank_003_host_label_characters(label: str, ok: bool) -> None:
    url = f"https://{label}.example/"
    assert returned_url(url) == (url if ok else Reason.URL_INVALID)


@pytest.mark.parametrize(
    ("port", "ok"),
    [("0", True), ("1", True), ("65535", True), ("65536", False), ("", True), ("-1", False),
     ("\u0668\u0660", False), ("８０", False), ("1a", False)],
)  # fmt: skip
def test_req_rank_003_port_ends(port: str, ok: bool) -> None:
    url = f"https://example.org:{port}/x"
    assert returned_url(url) == (url if ok else Reason.URL_INVALID)
    ipv6 = f"https://[2606:4700::1111]:{port}/x"
    assert returned_url(ipv6) == (ipv6 if ok else Reason.URL_INVALID)


@pytest.mark.parametrize(
    "url",
    [
        "https://[::1/",
        "https://[zz::1]/",
        "https://[::1]x/",
        "https://[]/",
        "https://[::1x]/",
        "https://::1/",
        "https://a:b:1/",
        "https://[g::1]/",
        "https://./",
        "https://:80/",
        "https://example.org@/",
        "https:example.org",
        "https:",
        "gopher://example.org/",
        "1http://example.org/",
        "https://xn--.example/",
        "https://\u0300a.example/",
        "https://" + "ü" * 64 + ".example/",
        "https://\u2488.example/",
    ],
)
def test_req_rank_003_hosts_and_authorities_web_fetch_refuses_are_invalid(url: str) -> None:
    assert returned_url(url) == Reason.URL_INVALID
    assert normalize_url(url) == Reason.URL_INVALID


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://[2606:4700::1111]/", "https://[2606:4700::1111]/"),
        ("https://[2606:4700::1111]:/", "https://[2606:4700::1111]:/"),
        ("https://[2606:4700::AB]/", "https://[2606:4700::AB]/"),
        ("https://example.org:/", "https://example.org:/"),
        ("https://example.org?x=1", "https://example.org?x=1"),
        ("https://example.org#f", "https://example.org#f"),
        ("https://example.org/a@b", "https://example.org/a@b"),
        ("https://example.org/p?a?b#c#d", "https://example.org/p?a?b#c#d"),
        ("https://example.org/p#c?d", "https://example.org/p#c?d"),
        ("https://example.org/p?utm_id=1&x=a=b?c#d#e", "https://example.org/p?x=a=b?c#d#e"),
        ("https://ü.example./", "https://xn--tda.example./"),
        ("https://exämple\u3002org/", "https://xn--exmple-cua.org/"),
        ("HtTp://EXAMPLE.org", "HtTp://EXAMPLE.org"),
        # UTS #46 mapping: upper case folded, and ß kept (non-transitional processing).
        ("https://BÜCHER.example/", "https://xn--bcher-kva.example/"),
        ("https://straße.example/", "https://xn--strae-oqa.example/"),
    ],
)
def test_req_rank_003_authority_forms_that_are_kept(url: str, shown: str) -> None:
    assert returned_url(url) == shown


# --- the comparison key ------------------------------------------------------------------------

KEYS = [
    ("http://example.org", "https://example.org/"),
    ("http://example.org:80/a", "https://example.org/a"),
    ("https://example.org:443/a", "https://example.org/a"),
    ("http://example.org:443/a", "http://example.org:443/a"),
    ("https://example.org:80/a", "https://example.org:80/a"),
    ("https://example.org:0080/a", "https://example.org:80/a"),
    ("https://Example.ORG/A", "https://example.org/A"),
    ("https://[2606:4700::AB]:8443/", "https://[2606:4700::ab]:8443/"),
    ("https://example.org/%7e%41%2f%2F", "https://example.org/~A%2F%2F"),
    ("https://example.org/%zz%", "https://example.org/%25zz%25"),
    ("https://example.org/é", "https://example.org/%C3%A9"),
    ("https://example.org/a?b=%c3%a9&c=é", "https://example.org/a?b=%C3%A9&c=%C3%A9"),
    ("https://example.org/a?utm_source=x", "https://example.org/a"),
    ("https://example.org/a?", "https://example.org/a?"),
    ("https://example.org/a?x=1#frag", "https://example.org/a?x=1"),
    ("https://ü.example/", "https://xn--tda.example/"),
]


@pytest.mark.parametrize(("url", "key"), KEYS)
def test_req_rank_002_comparison_key_table(url: str, key: str) -> None:
    assert comparison_key(url) == key
    normalized = normalize_url(url)
    assert not isinstance(normalized, Reason)
    assert normalized.key == key
    assert normalized.https == url.lower().startswith("https")


def test_req_rank_002_comparison_key_refuses_a_url_returned_url_refuses() -> None:
    with pytest.raises(ValueError, match="returned_url"):
        comparison_key("ftp://example.org/")


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1/", "https://[::1]:8443/x", "http://0x7f.1/", "https://10.0.0.1./a"],
)
def test_req_rank_003_an_address_web_fetch_refuses_is_invalid_unless_the_operators(
    url: str,
) -> None:
    assert returned_url(url) == Reason.URL_INVALID
    assert normalize_url(url) == Reason.URL_INVALID
    host = url_host(url)
    assert host is not None
    kept = normalize_url(url, frozenset({host}))
    assert not isinstance(kept, Reason)
    assert kept.url == url
    # Another operator host does not vouch for this one.
    assert normalize_url(url, frozenset({"10.0.0.2", "[::2]"})) == Reason.URL_INVALID


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://EXAMPLE.org:8443/w", "example.org"),
        ("http://127.0.0.1:8080/w", "127.0.0.1"),
        ("http://[::1]:8080/", "[::1]"),
        ("https://bücher.example/", "xn--bcher-kva.example"),
        ("ftp://example.org/", None),
    ],
)
def test_req_rank_003_url_host_is_the_form_normalize_url_compares(
    url: str, host: str | None
) -> None:
    assert url_host(url) == host
