"""No input a site or a caller controls reaches -32603: property tests through the
real pipeline (the stdio transport in process, the dispatcher, the service, the policy, the
fetch client) against loopback sites.

Every answer must be a tool result the book describes: an ok page, or an error object whose
kind and reason are the book's (the errors table of Tools and responses) and that matches
web_fetch's output schema; never a protocol error, never an error-level log line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jsonschema
import trio
from fetch_helpers import fetch_config, fetching_rypsok
from fetch_sites import Page, Site, serve_site
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_helpers import modern
from search_fakes import capture_logs
from test_fetch_mcp import exchange

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

Answers = tuple[list[dict[str, Any]], dict[str, Any]]

OPEN = Page.text("User-agent: *\nAllow: /\n")
ARTICLE = Page.html(
    "<html><head><title>Target</title></head><body><article><p>The page a redirect leads "
    "to, with enough words to be the main block of the page.</p></article></body></html>"
)

# The book's errors table: each kind and the reasons it may carry (None: no reason key).
BOOK_ERRORS: dict[str, set[str | None]] = {
    "invalid_request": {None},
    "denied": {
        "egress",
        "robots_txt",
        "scheme",
        "strict_mode",
        "credential_in_url",
        "secret_in_url",
    },
    "unavailable": {"network", "deadline", "http_status", "busy", "rate_limited"},
    "redirected": {None},
    "unsupported_content": {"media_type", "extraction_failed"},
    "too_large": {None},
}


async def answers_of(
    sites: dict[str, Site], arguments: list[dict[str, Any]], toml: str = ""
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The answers to one web_fetch call per arguments object, in order, and web_fetch's
    output schema from tools/list (the same process's); `toml` adds tables."""
    config = fetch_config("[egress]\nallow_http = true\n" + toml)
    rypsok, _, _ = fetching_rypsok(config, sites)
    calls = [
        modern("tools/call", request_id=index, name="web_fetch", arguments=given_arguments)
        for index, given_arguments in enumerate(arguments)
    ]
    answers = await exchange(rypsok, config, [modern("tools/list", request_id="list"), *calls])
    tools = {tool["name"]: tool for tool in answers[0]["result"]["tools"]}
    return answers[1:], tools["web_fetch"]["outputSchema"]


def assert_book_answers(main: Callable[[], Awaitable[Answers]]) -> None:
    """Runs `main` with the log captured: every answer is the book's, no error is logged."""
    with capture_logs() as logs:
        answers, schema = trio.run(main)
    for answer in answers:
        assert_book_answer(answer, schema)
    levels = [event["level"] for event in logs.events()]
    assert "error" not in levels, logs.text


def assert_book_answer(answer: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in answer, answer  # -32603 or another protocol error
    body: dict[str, Any] = answer["result"]["structuredContent"]
    jsonschema.Draft202012Validator(schema).validate(body)
    if answer["result"]["isError"]:
        error = body["error"]
        assert error["detail"].get("reason") in BOOK_ERRORS[error["kind"]], error
        if error["kind"] == "invalid_request":
            assert "parameter" in error["detail"] or "allowed" in error["detail"], error
    else:
        assert body["outcome"] == "ok"
    return body


# A site started per example: real sockets, so the real clock; a few calls per example.
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- arbitrary Location values, on a page and on robots.txt ---------------------------------

_PREFIXES = [
    "", "/", "//", "///", "\\\\", "http:", "https:", "http://", "https://", "http:///",
    "javascript:", "data:", "mailto:", "about:", "tel:", "blob:", "ftp://", "file://",
    "http://page.org", "http://page.org:", "http://robots.org/", "http://[", "http://0",
    "https://user@", "?", "#", "%",
]  # fmt: skip
_TEXT = st.text(
    alphabet=st.characters(
        # No CR or LF: they end the header line (a bare CR makes the response no HTTP at all).
        blacklist_characters="\r\n",
        blacklist_categories=("Cs",),
    ),
    max_size=40,
)
LOCATIONS = st.one_of(
    _TEXT,
    st.builds(lambda prefix, rest: prefix + rest, st.sampled_from(_PREFIXES), _TEXT),
)


def _raw(location: str) -> str:
    # The site writes header bytes as given; a text beyond Latin-1 goes out as its UTF-8.
    return location.encode("utf-8").decode("latin-1")


@PROPERTY
@given(locations=st.lists(LOCATIONS, min_size=1, max_size=4), follow=st.booleans())
def test_req_sec_008_req_sec_014_any_location_a_site_sends_gets_a_book_answer(
    locations: list[str], follow: bool
) -> None:
    async def main() -> Answers:
        page_routes = {"/robots.txt": OPEN, "/target": ARTICLE}
        for index, location in enumerate(locations):
            page_routes[f"/r{index}"] = Page.redirect(_raw(location), 302)
        robots_routes = {"/robots.txt": Page.redirect(_raw(locations[0]), 301), "/p": ARTICLE}
        async with (
            serve_site(page_routes) as page_site,
            serve_site(robots_routes, address="127.0.0.2") as robots_site,
        ):
            urls = [f"http://page.org/r{index}" for index in range(len(locations))]
            return await answers_of(
                {"page.org": page_site, "robots.org": robots_site},
                [{"url": url} for url in [*urls, "http://robots.org/p"]],
                f"[fetch]\nfollow_cross_host_redirects = {str(follow).lower()}\n",
            )

    assert_book_answers(main)


# -- arbitrary argument values ----------------------------------------------------------------

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**600), max_value=10**600)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
_URLS = st.one_of(
    st.sampled_from(["SITE", "SITE?q=1", "SITE#f", "http://page.org", ""]),
    st.builds(lambda rest: "http://page.org/" + rest, st.text(max_size=30)),
    st.text(max_size=60),
)
_INTEGERS = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40),
    st.integers(min_value=-5, max_value=30000),
    st.floats(allow_nan=False, allow_infinity=False),
)
ARGUMENTS = st.fixed_dictionaries(
    {},
    optional={
        "url": st.one_of(_URLS, _JSON),
        "max_chars": st.one_of(_INTEGERS, _JSON),
        "start_char": st.one_of(_INTEGERS, _JSON),
    },
).flatmap(
    lambda known: st.dictionaries(st.text(max_size=12), _JSON, max_size=2).map(
        lambda extra: {**extra, **known}
    )
)


@PROPERTY
@given(
    arguments=st.lists(ARGUMENTS, min_size=1, max_size=4),
    secrets=st.sampled_from(["refuse", "mask", "warn", "off"]),
    strict=st.booleans(),
)
def test_req_mcp_004_req_sec_014_any_argument_values_get_a_book_answer(
    arguments: list[dict[str, Any]], secrets: str, strict: bool
) -> None:
    async def main() -> Answers:
        filled = []
        for given_arguments in arguments:
            one = dict(given_arguments)
            if isinstance(one.get("url"), str):
                one["url"] = one["url"].replace("SITE", "http://page.org/p")
            filled.append(one)
        async with serve_site({"/robots.txt": OPEN, "/p": ARTICLE}) as site:
            toml = (
                f'[privacy]\nsecret_detection = "{secrets}"\n'
                f"[fetch]\nstrict_mode = {str(strict).lower()}\n"
            )
            return await answers_of({"page.org": site}, filled, toml)

    assert_book_answers(main)


# -- arbitrary answers: status, headers, body -----------------------------------------------

_HEADER_TEXT = st.one_of(
    _TEXT,
    st.sampled_from(
        [
            "text/html; charset=utf-7", "text/html; charset=x-unknown", "text/html; charset=",
            "text/html; charset=utf-16", "application/xhtml+xml", "text/markdown", "text/plain",
            "image/png", "gzip", "deflate", "br", "gzip, gzip", "identity", "999999999999",
            "-1", "Wed, 21 Oct 2015 07:28:00 GMT", "",
        ]
    ),
)  # fmt: skip
_BODIES = st.one_of(
    st.binary(max_size=300),
    st.sampled_from(
        [
            b"<html><body><p>" + b"words " * 40 + b"</p></body></html>",
            b"\xff\xfe<\x00h\x00t\x00m\x00l\x00>\x00",
            b"\x1f\x8b\x08\x00garbage",
            b"<?xml version='1.0' encoding='latin-1'?><html><body><h1>\xe9</h1></body></html>",
        ]
    ),
)
ANSWERS = st.tuples(
    st.integers(min_value=100, max_value=999),
    st.lists(
        st.tuples(
            st.sampled_from(["Content-Type", "Content-Encoding", "Retry-After", "Location"]),
            _HEADER_TEXT,
        ),
        max_size=3,
    ),
    _BODIES,
)


@PROPERTY
@given(answers=st.lists(ANSWERS, min_size=1, max_size=4))
def test_req_sec_014_any_status_headers_and_body_a_site_sends_get_a_book_answer(
    answers: list[tuple[int, list[tuple[str, str]], bytes]],
) -> None:
    async def main() -> Answers:
        routes = {"/robots.txt": OPEN}
        for index, (status, headers, body) in enumerate(answers):
            raw = tuple((name, _raw(value)) for name, value in headers)
            routes[f"/a{index}"] = Page(status=status, headers=raw, body=body)
        async with serve_site(routes) as site:
            urls = [f"http://page.org/a{index}" for index in range(len(answers))]
            return await answers_of({"page.org": site}, [{"url": url} for url in urls])

    assert_book_answers(main)
