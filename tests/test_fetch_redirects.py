"""Redirects (REQ-FETCH-006, LIM-F7, REQ-SEC-008) through the real pipeline."""

from __future__ import annotations

from typing import Any

import pytest
from fetch_helpers import Authority, fetch_config, fetching_rypsok
from fetch_sites import Page, serve_site

from rypsok.core.model import DetailReason, ErrorKind, FetchRequest, ToolError

ARTICLE = (
    "<html><head><title>AdmittedURL</title></head><body><article><p>The page a redirect leads "
    "to, with enough words to be the main block.</p></article></body></html>"
)
OPEN = Page.text("User-agent: *\nAllow: /\n")


async def fetch(rypsok: Any, url: str, **kwargs: Any) -> Any:
    try:
        return await rypsok.fetch(FetchRequest(url=url, **kwargs))
    except ToolError as error:
        return error


def config(extra: str = "") -> Any:
    return fetch_config("[egress]\nallow_http = true\n" + extra)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_req_fetch_006_same_host_redirects_are_followed(status: int) -> None:
    routes = {
        "/robots.txt": OPEN,
        "/old": Page.redirect("/middle", status),
        "/middle": Page.redirect("http://same.org/new?x=1", status),
        "/new?x=1": Page.html(ARTICLE),
    }
    async with serve_site(routes) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"same.org": site})
        async with rypsok:
            response = await fetch(rypsok, "http://same.org/old")
    assert response.url == "http://same.org/new?x=1"
    assert response.title == "AdmittedURL"


async def test_req_fetch_006_lim_f7_at_most_max_redirects_are_followed() -> None:
    routes = {"/robots.txt": OPEN, "/p": Page.html(ARTICLE)}
    for hop in range(3):
        routes[f"/r{hop}"] = Page.redirect(f"/r{hop + 1}")
    routes["/r3"] = Page.redirect("/p")
    async with serve_site(routes) as site:
        rypsok, _, _ = fetching_rypsok(config("[fetch]\nmax_redirects = 4\n"), {"hops.org": site})
        async with rypsok:
            four = await fetch(rypsok, "http://hops.org/r0")
        rypsok, _, _ = fetching_rypsok(config("[fetch]\nmax_redirects = 3\n"), {"hops.org": site})
        async with rypsok:
            five = await fetch(rypsok, "http://hops.org/r0")
    assert four.title == "AdmittedURL"
    assert isinstance(five, ToolError)
    assert five.kind is ErrorKind.UNAVAILABLE
    assert "more than 3" in five.message


async def test_req_fetch_006_a_cross_host_target_that_passes_is_redirected() -> None:
    target = "https://elsewhere.org/article?id=7"
    async with serve_site({"/robots.txt": OPEN, "/moved": Page.redirect(target)}) as site:
        rypsok, _network_backend, resolver = fetching_rypsok(config(), {"start.org": site})
        async with rypsok:
            error = await fetch(rypsok, "http://start.org/moved")
    assert isinstance(error, ToolError)
    assert error.kind is ErrorKind.REDIRECTED
    assert error.detail.location == target
    assert error.message == "the page moved to another host; see detail.location"
    assert "elsewhere.org" not in resolver.lookups  # not followed


@pytest.mark.parametrize(
    ("location", "reason"),
    [
        ("http://10.0.0.1/admin", DetailReason.EGRESS),
        ("http://127.0.0.1:8080/", DetailReason.EGRESS),
        ("http://[::ffff:169.254.169.254]/", DetailReason.EGRESS),
        ("http://localhost/", DetailReason.EGRESS),
        ("https://elsewhere.org:8443/", DetailReason.EGRESS),
        # The book: a redirect target that is not https nor an allowed http URL is scheme.
        ("ftp://elsewhere.org/file", DetailReason.SCHEME),
        ("javascript:alert(1)", DetailReason.SCHEME),
        ("http://user:pw@elsewhere.org/", DetailReason.EGRESS),
        ("https://elsewhere.org/" + "a" * 2048, DetailReason.EGRESS),
    ],
)
async def test_req_fetch_006_req_sec_008_a_refused_target_is_denied_and_undisclosed(
    location: str, reason: DetailReason
) -> None:
    async with serve_site({"/robots.txt": OPEN, "/go": Page.redirect(location)}) as site:
        rypsok, network_backend, _ = fetching_rypsok(config(), {"start.org": site})
        async with rypsok:
            error = await fetch(rypsok, "http://start.org/go")
    assert isinstance(error, ToolError)
    assert (error.kind, error.detail.reason) == (ErrorKind.DENIED, reason)
    assert error.detail.location is None
    assert location not in str(error.to_json())
    assert {str(address) for address, _ in network_backend.attempts} == {site.address}


async def test_req_fetch_006_req_sec_008_https_to_plain_http_without_allow_http_is_scheme() -> None:
    # The book: denied, scheme when "a redirect target is not https and not an http URL
    # that the operator allows"; the same host, so that nothing but the scheme is refused.
    authority = Authority()
    routes = {"/robots.txt": OPEN, "/go": Page.redirect("http://secure.org/plain", 302)}
    async with serve_site(routes, tls=authority.server_context("secure.org")) as site:
        rypsok, _, _ = fetching_rypsok(fetch_config(), {"secure.org": site}, authority=authority)
        async with rypsok:
            error = await fetch(rypsok, "https://secure.org/go")
    assert isinstance(error, ToolError)
    assert (error.kind, error.detail.reason) == (ErrorKind.DENIED, DetailReason.SCHEME)
    assert "scheme is not allowed" in error.message
    assert site.paths() == ["/robots.txt", "/go"]


async def test_req_fetch_006_a_same_host_redirect_to_a_refused_port_is_denied() -> None:
    async with serve_site(
        {"/robots.txt": OPEN, "/go": Page.redirect("http://start.org:8081/x")}
    ) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"start.org": site})
        async with rypsok:
            error = await fetch(rypsok, "http://start.org/go")
    assert isinstance(error, ToolError)
    assert error.detail.reason is DetailReason.EGRESS


async def test_req_fetch_006_following_cross_host_when_the_operator_allows_it() -> None:
    async with (
        serve_site({"/robots.txt": OPEN, "/go": Page.redirect("http://two.org/p")}) as one,
        serve_site({"/robots.txt": OPEN, "/p": Page.html(ARTICLE)}, address="127.0.0.2") as two,
    ):
        cfg = config("[fetch]\nfollow_cross_host_redirects = true\n")
        rypsok, _, _ = fetching_rypsok(cfg, {"one.org": one, "two.org": two})
        async with rypsok:
            response = await fetch(rypsok, "http://one.org/go")
    assert response.url == "http://two.org/p"
    assert two.paths() == ["/robots.txt", "/p"]


async def test_req_sec_007_a_followed_target_whose_name_resolves_to_a_refused_address() -> None:
    async with serve_site({"/robots.txt": OPEN, "/go": Page.redirect("http://inside.org/")}) as s:
        cfg = config("[fetch]\nfollow_cross_host_redirects = true\n")
        rypsok, network_backend, _ = fetching_rypsok(
            cfg, {"one.org": s}, names={"inside.org": "192.168.0.10"}
        )
        async with rypsok:
            error = await fetch(rypsok, "http://one.org/go")
    assert isinstance(error, ToolError)
    assert (error.kind, error.detail.reason) == (ErrorKind.UNAVAILABLE, DetailReason.NETWORK)
    assert all(str(address) == s.address for address, _ in network_backend.attempts)


async def test_req_sec_007_without_robots_txt_the_page_request_meets_the_refusal_itself() -> None:
    # No robots.txt read goes first: the page's own request is the one refused at connect
    # time, and it is answered as the unreachable site it is, never an internal error.
    async with serve_site({"/go": Page.redirect("http://inside.org/")}) as s:
        cfg = config("[fetch]\nfollow_cross_host_redirects = true\nrobots_txt = false\n")
        rypsok, network_backend, _ = fetching_rypsok(
            cfg, {"one.org": s}, names={"inside.org": "192.168.0.10"}
        )
        async with rypsok:
            error = await fetch(rypsok, "http://one.org/go")
    assert isinstance(error, ToolError)
    assert (error.kind, error.detail.reason) == (ErrorKind.UNAVAILABLE, DetailReason.NETWORK)
    assert all(str(address) == s.address for address, _ in network_backend.attempts)


async def test_req_fetch_006_a_redirect_without_location_or_a_bad_one_is_unavailable() -> None:
    routes = {
        "/robots.txt": OPEN,
        "/nowhere": Page(status=302, headers=(("Content-Type", "text/html"),), body=b"x"),
        "/bad": Page.redirect("http://[bad"),
    }
    async with serve_site(routes) as site:
        rypsok, _, _ = fetching_rypsok(config(), {"odd.org": site})
        async with rypsok:
            for path in ("/nowhere", "/bad"):
                error = await fetch(rypsok, f"http://odd.org{path}")
                assert isinstance(error, ToolError)
                assert error.kind in (ErrorKind.UNAVAILABLE, ErrorKind.DENIED)
