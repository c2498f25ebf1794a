"""The secret check reads through percent-encoding (REQ-PRIV-002).

A site decodes `%20`, `%3A`, `%3D` before it reads a URL, so a credential behind an escape,
or written with escapes, reaches it as plainly as one written out. Every credential here is
synthetic, built at run time (test_secret_scan.py's corpus and builders).
"""

from __future__ import annotations

import base64
import random
import string
from typing import Any
from urllib.parse import quote

import pytest
from fetch_helpers import fetch_config, fetching_rypsok
from fetch_sites import Page, serve_site
from hypothesis import given, settings
from hypothesis import strategies as st
from search_fakes import FakeEngine, engine_config, make_config, results
from test_secret_scan import ORDINARY, _credentials

from rypsok.core.model import (
    DetailReason,
    ErrorKind,
    FetchRequest,
    NoticeCode,
    SearchRequest,
    SecretKind,
    ToolError,
)
from rypsok.core.secret_scan import find_secret, find_secrets, mask_secrets
from rypsok.core.services import Rypsok

ALNUM = string.ascii_letters + string.digits
ARTICLE = (
    "<html><head><title>Page</title></head><body><article><p>Readable article text that "
    "is long enough to be the main block of this page.</p></article></body></html>"
)


def body(seed: str, alphabet: str, n: int) -> str:
    rng = random.Random(seed)
    chars = [rng.choice(alphabet) for _ in range(n)]
    chars[1], chars[5], chars[9] = rng.choice("0123456789"), "q", "Q"
    return "".join(chars)


def github() -> str:
    return "gh" + "p_" + body("gh", ALNUM, 36)


def telegram() -> str:
    return "123456789" + ":" + body("tg", ALNUM + "-_", 35)


def basic_value() -> str:
    return base64.b64encode(b"deploy:" + body("pw", ALNUM, 12).encode()).decode()


def private_key_body() -> str:
    return body("pk", ALNUM + "+/", 64)


def percent_all(text: str) -> str:
    return "".join(f"%{byte:02X}" for byte in text.encode())


async def fetch(rypsok: Any, url: str) -> Any:
    try:
        return await rypsok.fetch(FetchRequest(url=url))
    except ToolError as error:
        return error


def url_cases() -> list[Any]:
    token = github()
    key = private_key_body()
    prefix_key = "https://site.org/k?pem="
    return [
        pytest.param(f"https://site.org/s?q=my%20token%20{token}", "q=my%20token%20", id="%20"),
        pytest.param(f"https://site.org/s?q=token%3A{token}", "q=token%3A", id="%3A"),
        pytest.param(f"https://site.org/s?q=token%3D{token}", "q=token%3D", id="%3D"),
        pytest.param(f"https://site.org/s?q=x%2520{token}", "q=x%2520", id="%2520"),
        pytest.param(f"https://site.org/s?q={percent_all(token)}", "q=", id="all-escaped"),
        pytest.param(
            f"https://api.site.org/bot{telegram()}/getMe", "https://api.site.org/bot", id="bot"
        ),
        pytest.param(
            f"https://site.org/h?a=Authorization:%20Basic%20{quote(basic_value(), safe='')}",
            "https://site.org/h?a=Authorization:%20Basic%20",
            id="basic",
        ),
        pytest.param(
            prefix_key
            + quote(f"-----BEGIN RSA PRIVATE KEY-----\n{key}\n-----END RSA PRIVATE KEY-----"),
            prefix_key,
            id="private-key",
        ),
    ]


@pytest.mark.parametrize(("url", "before"), url_cases())
async def test_req_priv_002_a_secret_behind_an_escape_never_reaches_the_site(
    url: str, before: str
) -> None:
    async with serve_site({"/robots.txt": Page.text(""), "/s": Page.html(ARTICLE)}) as site:
        rypsok, network_backend, resolver = fetching_rypsok(
            fetch_config(), {"site.org": site, "api.site.org": site}
        )
        async with rypsok:
            error = await fetch(rypsok, url)
    assert isinstance(error, ToolError)
    assert (error.kind, error.detail.reason) == (ErrorKind.DENIED, DetailReason.SECRET_IN_URL)
    # The position is in the URL as the caller wrote it.
    start = url.index(before) + len(before)
    assert error.detail.position == start
    assert url[start:] not in error.message
    assert site.paths() == []
    assert network_backend.attempts == []
    assert resolver.lookups == []


async def test_req_priv_002_an_escaped_secret_is_masked_before_it_is_sent() -> None:
    token = github()
    url = f"http://site.org/s?q=my%20token%20{token}"
    masked, _ = mask_secrets("/s?q=my%20token%20" + token)
    routes = {
        "/robots.txt": Page.text(""),
        masked: Page.html(ARTICLE),
        masked.replace("[", "%5B").replace("]", "%5D"): Page.html(ARTICLE),
    }
    config = fetch_config('[privacy]\nsecret_detection = "mask"\n[egress]\nallow_http = true\n')
    async with serve_site(routes) as site:
        rypsok, _, _ = fetching_rypsok(config, {"site.org": site})
        async with rypsok:
            answer = await fetch(rypsok, url)
    assert not isinstance(answer, ToolError), answer
    assert [(n.code, n.count) for n in answer.notices] == [(NoticeCode.CREDENTIAL_MASKED, 1)]
    assert len(site.seen) == 2
    assert all(token not in seen.path for seen in site.seen)


async def test_req_priv_002_a_query_with_an_escaped_secret_asks_no_engine() -> None:
    # A pasted URL in a query carries its escapes; the engine would receive the token.
    engine = FakeEngine("alpha", results("a", 1))
    query = f"why does https://site.org/?t=x%3D{github()} fail"
    async with Rypsok(make_config(engine_config("alpha")), engines=[engine]) as rypsok:
        with pytest.raises(ToolError) as raised:
            await rypsok.search(SearchRequest(query=query))
    error = raised.value
    assert (error.kind, error.detail.reason) == (ErrorKind.DENIED, DetailReason.SECRET_IN_QUERY)
    assert error.detail.position == query.index("%3D") + 3
    assert engine.queries == []


# --- the tables: escapes, hex digits at the ends of their ranges, decodings ------------------


@pytest.mark.parametrize(
    "escape",
    [
        "%20",
        "%3A",
        "%3a",
        "%3D",
        "%3d",
        "%2F",
        "%2f",
        "%26",
        "%3F",
        "%0A",
        "%09",
        "%21",
        "%2B",
        "%29",
        "%7E",
        "%7c",
        "%E2%80%99",
        "%e2%80%99",
        "%C2%A0",
        "%c2%a0",
        "%E3%80%80",
        "%c2%bb",
    ],
)
def test_req_priv_002_a_separator_escape_before_a_token_is_read_as_the_separator(
    escape: str,
) -> None:
    token = github()
    finding = find_secret("q=x" + escape + token)
    assert finding is not None
    assert (finding.kind, finding.position, finding.end) == (
        SecretKind.GITHUB_TOKEN,
        3 + len(escape),
        3 + len(escape) + len(token),
    )


@pytest.mark.parametrize("not_hex", ["G", "g", "Z", "z", "@", "`"])
def test_req_priv_002_a_percent_sign_without_two_hex_digits_is_no_escape(not_hex: str) -> None:
    # `%2G` is text: its `G` runs into the token, as a letter before `ghp_` always does.
    assert find_secret("q=x%2" + not_hex + "x" + github()) is None


@pytest.mark.parametrize("separator", [" ", "\t", "&", '"', "'", "<", ">", ";", ","])
def test_req_priv_002_an_escaped_placeholder_value_ends_where_the_site_ends_it(
    separator: str,
) -> None:
    # `password=$DB_PASSWORD` then a separator, all escaped: the value the site reads is the
    # placeholder, not a password with a `%` in it.
    for escape in (quote(separator, safe=""), quote(separator, safe="").lower()):
        text = "password=%24DB_PASSWORD" + escape + "in%20the%20docs"
        assert find_secrets(text) == ()
    assert find_secret("password=%24DB%21PASSWORD" + quote(separator, safe="") + "x") is not None


@pytest.mark.parametrize(("plain", "escaped"), [(0, 4), (1, 2), (0, 40)])
def test_req_priv_002_a_credential_at_the_start_with_escapes_in_it_is_found(
    plain: int, escaped: int
) -> None:
    # The first `plain` characters as they are, the next `escaped` ones escaped.
    token = github()
    text = token[:plain] + percent_all(token[plain : plain + escaped]) + token[plain + escaped :]
    finding = find_secret(text)
    assert finding is not None
    assert (finding.position, finding.end) == (0, len(text))


def test_req_priv_002_escapes_decode_to_the_character_they_name() -> None:
    # %30 is the digit 0, which runs into the token: no separator, no finding.
    assert find_secret("q=x%30" + github()) is None


@pytest.mark.parametrize("times", [1, 2, 3])
def test_req_priv_002_a_text_encoded_up_to_three_times_is_decoded(times: int) -> None:
    token = github()
    text = "q=my token " + token
    for _ in range(times):
        text = quote(text, safe="")
    finding = find_secret(text)
    assert finding is not None
    assert (finding.kind, finding.position, finding.end) == (
        SecretKind.GITHUB_TOKEN,
        len(text) - len(token),
        len(text),
    )


def test_req_priv_002_a_text_encoded_four_times_is_decoded_three_times() -> None:
    # A space encoded n times is `%` `25` n-1 times `20`. Three decodings of four leave
    # `%20`, which still hides the separator: the limit is where it is said to be.
    assert find_secret("q=x%" + "25" * 2 + "20" + github()) is not None
    assert find_secret("q=x%" + "25" * 3 + "20" + github()) is None


@pytest.mark.parametrize("escape", ["%E3%83", "%E3%83%84", "%FF", "%C3", "%80", "%9f%9F"])
def test_req_priv_002_a_broken_utf8_escape_before_a_token_is_a_separator(escape: str) -> None:
    # After a letter: only what the escapes decode to stands between it and the token.
    token = github()
    finding = find_secret("q=x" + escape + token)
    assert finding is not None
    assert finding.position == 3 + len(escape)


@pytest.mark.parametrize("broken", ["%E3", "%E3%83", "%C3", "%FF"])
def test_req_priv_002_an_escaped_first_character_after_a_broken_sequence_is_the_start(
    broken: str,
) -> None:
    token = github()
    text = "q=x" + broken + percent_all(token[0]) + token[1:]
    finding = find_secret(text)
    assert finding is not None
    assert (finding.position, finding.end) == (3 + len(broken), len(text))


def test_req_priv_002_the_telegram_path_form_needs_bot_right_before_it() -> None:
    token = telegram()
    for before in ("/bot", "/BOT", "/Bot", "/", " "):
        finding = find_secret("https://api.site.org" + before + token + "/getMe")
        assert finding is not None
        assert finding.kind is SecretKind.TELEGRAM_BOT_TOKEN
    for before in ("/botx", "/abotx", "/x", "/bot12"):
        assert find_secret("https://api.site.org" + before + token + "/getMe") is None


# --- properties ------------------------------------------------------------------------------

CREDENTIALS = _credentials()
_SAFE_PREFIX = st.text(alphabet=string.ascii_letters + " /?=&.-", max_size=20)


@settings(max_examples=300, deadline=None)
@given(
    case=st.sampled_from(CREDENTIALS),
    prefix=_SAFE_PREFIX,
    escaped=st.lists(st.booleans(), min_size=400, max_size=400),
)
def test_req_priv_002_a_credential_with_any_of_its_characters_escaped_is_found(
    case: tuple[SecretKind, str, int, int], prefix: str, escaped: list[bool]
) -> None:
    kind, credential, start, end = case
    # Each character of the credential is written as is or as its escapes; a space before
    # it is written as %20, so that only decoding shows a separator.
    pieces = [percent_all(c) if escaped[i % 400] else c for i, c in enumerate(credential)]
    text = prefix + "%20" + "".join(pieces)
    at = len(prefix) + 3
    finding = find_secret(text)
    assert finding is not None
    assert finding.kind is kind
    assert finding.position == at + sum(len(p) for p in pieces[:start])
    assert finding.end == at + sum(len(p) for p in pieces[:end])
    masked, count = mask_secrets(text)
    assert count >= 1
    assert find_secrets(masked) == ()


@pytest.mark.parametrize("text", ORDINARY)
def test_req_priv_002_ordinary_text_escaped_passes(text: str) -> None:
    assert find_secrets(quote(text, safe="")) == ()
    assert find_secrets(quote(text, safe="/:?=&")) == ()
