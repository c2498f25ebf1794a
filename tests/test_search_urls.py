"""The returned URL (REQ-RANK-003) and the comparison key (REQ-RANK-002)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rypsok.core.model import Reason
from rypsok.core.urls import (
    MAX_URL_CHARS,
    TRACKING_PARAMETERS,
    comparison_key,
    normalize_url,
    returned_url,
)

# The engine's URL and what the caller is shown: byte for byte, except tracking parameters
# removed (the query rebuilt only then) and the host in its ASCII form.
RETURNED = [
    ("https://example.org/page", "https://example.org/page"),
    ("https://example.org/p?a=1&b", "https://example.org/p?a=1&b"),
    ("https://example.org/p?b=2&a=1", "https://example.org/p?b=2&a=1"),
    ("https://example.org/p?q=a+b&r=%20x", "https://example.org/p?q=a+b&r=%20x"),
    ("https://example.org/p?a=1&utm_source=x&b=%7e", "https://example.org/p?a=1&b=%7e"),
    ("https://example.org/p?utm_source=x&utm_medium=y", "https://example.org/p"),
    ("https://example.org/p?utm_source=x#top", "https://example.org/p#top"),
    ("https://example.org/p?gclid=1&fbclid=2&id=3", "https://example.org/p?id=3"),
    ("https://example.org/p?utm%5Fsource=x&k=v", "https://example.org/p?k=v"),
    ("https://example.org/p?utm_sourcex=1", "https://example.org/p?utm_sourcex=1"),
    ("https://example.org/p?UTM_SOURCE=1", "https://example.org/p?UTM_SOURCE=1"),
    ("HTTPS://Example.ORG:443/A/b/?x=1#frag", "HTTPS://Example.ORG:443/A/b/?x=1#frag"),
    ("https://en.wikipedia.org/wiki/Rust_&_Bone", "https://en.wikipedia.org/wiki/Rust_&_Bone"),
    ("https://bücher.example/straße?x=ü", "https://xn--bcher-kva.example/straße?x=ü"),
    ("https://日本.example/", "https://xn--wgv71a.example/"),
    ("http://example.org", "http://example.org"),
    ("https://[2606:4700::ab]:8443/x", "https://[2606:4700::ab]:8443/x"),
    ("https://93.184.216.34/x", "https://93.184.216.34/x"),
    ("https://example.org./x", "https://example.org./x"),
    ("https://example.org/p?", "https://example.org/p?"),
]

INVALID = [
    "ftp://example.org/file",
    "javascript:alert(1)",
    "mailto:someone@example.org",
    "//example.org/no-scheme",
    "/relative/path",
    "https:/example.org/one-slash",
    "https://.example/",
    "https://a..example/",
    "https:///path-only",
    "https://user:password@example.org/",
    "https://user@example.org/",
    "https://example.org:99999/",
    "https://example.org:8o/",
    "https://exa mple.org/",
    "https://example.org/a b",
    "https://example.org/a\u200bb",
    "https://example.org/\nsecond-line",
    "https://ex!ample.org/",
    "https://[not-an-address]/",
    "https://-leading-hyphen.example/",
    "",
]


@pytest.mark.parametrize(("engine_url", "shown"), RETURNED)
def test_req_rank_003_returned_url_table(engine_url: str, shown: str) -> None:
    assert returned_url(engine_url) == shown


@pytest.mark.parametrize("engine_url", INVALID)
def test_req_rank_003_a_url_web_fetch_would_refuse_is_invalid(engine_url: str) -> None:
    assert returned_url(engine_url) is Reason.URL_INVALID


def test_req_rank_003_a_host_web_fetch_would_refuse_is_invalid() -> None:
    assert returned_url("https://.example/") is Reason.URL_INVALID
    assert returned_url("https://example..org/") is Reason.URL_INVALID
    assert returned_url("https://example.org/") == "https://example.org/"


def test_req_ctx_006_a_url_longer_than_lim_f9_is_too_long() -> None:
    head = "https://example.org/"
    at_bound = head + "a" * (MAX_URL_CHARS - len(head))
    assert returned_url(at_bound) == at_bound
    assert returned_url(at_bound + "a") is Reason.URL_TOO_LONG


def test_req_ctx_006_the_bound_applies_after_tracking_parameters_are_removed() -> None:
    head = "https://example.org/"
    body = head + "a" * (MAX_URL_CHARS - len(head))
    assert returned_url(body + "?utm_source=" + "x" * 50) == body


# The audit's pairs (RFC 020, D-8): which URLs name one resource. Merging must never change
# resource identity, so the second table is as important as the first.
SAME = [
    ("https://example.org/a", "HTTPS://EXAMPLE.ORG/a"),
    ("https://example.org/a", "https://example.org:443/a"),
    ("http://example.org/a", "https://example.org/a"),
    ("http://example.org:80/a", "https://example.org/a"),
    ("https://example.org/a#one", "https://example.org/a#two"),
    ("https://example.org/a?utm_source=x&id=1", "https://example.org/a?id=1"),
    ("https://example.org/%7Euser", "https://example.org/~user"),
    ("https://example.org/a%2fb", "https://example.org/a%2Fb"),
    ("https://bücher.example/", "https://xn--bcher-kva.example/"),
    ("https://example.org", "https://example.org/"),
    ("https://example.org/straße", "https://example.org/stra%C3%9Fe"),
    ("https://example.org/p?q=%c3%a9", "https://example.org/p?q=%C3%A9"),
    ("https://example.org:0443/a", "https://example.org/a"),
]

DIFFERENT = [
    ("https://example.org/a", "https://example.org/a/"),
    ("https://www.example.org/a", "https://example.org/a"),
    ("https://example.org/A", "https://example.org/a"),
    ("https://example.org/p?a=1&b=2", "https://example.org/p?b=2&a=1"),
    ("https://example.org/a/b", "https://example.org/a%2Fb"),
    ("https://example.org:8443/a", "https://example.org/a"),
    ("http://example.org:443/a", "https://example.org/a"),
    ("http://example.org:8080/a", "https://example.org:8080/a"),
    ("https://example.org/p?id=1", "https://example.org/p?id=2"),
    ("https://example.org/p?q=a+b", "https://example.org/p?q=a%20b"),
    ("https://example.org/p?a=1%262", "https://example.org/p?a=1&2"),
    ("https://m.example.org/a", "https://example.org/a"),
]


def _key(url: str) -> str:
    shown = returned_url(url)
    assert not isinstance(shown, Reason)
    return comparison_key(shown)


@pytest.mark.parametrize(("one", "other"), SAME)
def test_req_rank_002_the_pairs_of_the_audit_that_merge(one: str, other: str) -> None:
    assert _key(one) == _key(other)


@pytest.mark.parametrize(("one", "other"), DIFFERENT)
def test_req_rank_002_the_pairs_of_the_audit_that_stay_apart(one: str, other: str) -> None:
    assert _key(one) != _key(other)


def test_req_rank_002_the_key_is_never_the_returned_url_of_an_http_result() -> None:
    normalized = normalize_url("http://Example.org/a#x")
    assert not isinstance(normalized, Reason)
    assert normalized.url == "http://Example.org/a#x"
    assert normalized.key == "https://example.org/a"
    assert normalized.https is False


_hosts = st.sampled_from(
    ["example.org", "EXAMPLE.org", "bücher.example", "a-b.example", "[2606:4700::ab]"]
)
_segment = st.text(alphabet=st.sampled_from(list("abcXYZ019-._~%2F!$'()*,;=:@ü&+")), max_size=12)
_query_piece = st.tuples(
    st.sampled_from(["a", "b", "id", "q", "utm_source", "gclid", "x%5Fy"]),
    st.text(alphabet=st.sampled_from(list("abc12%7e+é")), max_size=6),
)


@st.composite
def _urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "HTTPS"]))
    host = draw(_hosts)
    port = draw(st.sampled_from(["", ":", ":80", ":443", ":0443", ":8080", ":08080"]))
    path = "".join("/" + s for s in draw(st.lists(_segment, max_size=4)))
    pieces = draw(st.lists(_query_piece, max_size=4))
    query = ("?" + "&".join(f"{k}={v}" for k, v in pieces)) if pieces else ""
    fragment = draw(st.sampled_from(["", "#", "#top"]))
    return f"{scheme}://{host}{port}{path}{query}{fragment}"


@given(_urls())
def test_req_test_013_the_key_is_idempotent(url: str) -> None:
    shown = returned_url(url)
    assert not isinstance(shown, Reason)
    key = comparison_key(shown)
    assert comparison_key(key) == key
    assert returned_url(shown) == shown
    normalized = normalize_url(url)
    assert not isinstance(normalized, Reason)
    assert (normalized.url, normalized.key) == (shown, key)


@given(_urls(), st.sampled_from(sorted(TRACKING_PARAMETERS)), st.text("abc123", max_size=5))
def test_req_test_013_the_key_is_stable_under_tracking_parameters(
    url: str, name: str, value: str
) -> None:
    shown = returned_url(url)
    assert not isinstance(shown, Reason)
    base, _, fragment = url.partition("#")
    joiner = "&" if "?" in base else "?"
    tracked = f"{base}{joiner}{name}={value}" + (f"#{fragment}" if "#" in url else "")
    tracked_shown = returned_url(tracked)
    assert not isinstance(tracked_shown, Reason)
    assert comparison_key(tracked_shown) == comparison_key(shown)
    assert tracked_shown == shown  # removing the added parameter restores the URL exactly
