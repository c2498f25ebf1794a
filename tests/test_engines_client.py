"""EngineClient: the engine profile of the egress rules, over real loopback sockets."""

from __future__ import annotations

import gc
import gzip
import random
import zlib

import httpx
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from provider_network import ProviderNetwork, tls_for
from reachable import strings_reachable_from

import rypsok
from rypsok.core.egress.policy import DEFAULT_PORTS, read_url
from rypsok.core.egress.testing import MapResolver
from rypsok.core.egress.vocabulary import Refusal
from rypsok.core.engines.base import EngineFailure
from rypsok.core.engines.client import (
    EngineClient,
    EngineOrigin,
    parse_base_url,
    parse_retry_after,
    user_agent,
)
from rypsok.core.model import Reason
from testkit.servers import Reply, serve_http

MIB = 1024 * 1024
PROVIDER = "api.provider-of-search.net"


def _origin(url: str) -> EngineOrigin:
    return EngineOrigin.parse(url)


async def test_req_cmp_004_user_agent_names_version_project_and_contact() -> None:
    async with serve_http({"/x": Reply(body=b"{}")}) as server:
        async with EngineClient(contact="ops@example.org") as http:
            await http.get(_origin(server.url), "/x", params=[], headers={}, max_bytes=MIB)
        async with EngineClient(contact="") as http:
            await http.get(_origin(server.url), "/x", params=[], headers={}, max_bytes=MIB)
    version = rypsok.__version__
    assert server.requests[0].header("user-agent") == (
        f"rypsok/{version} (+https://github.com/nabbisen/rypsok; ops@example.org)"
    )
    assert server.requests[1].header("user-agent") == (
        f"rypsok/{version} (+https://github.com/nabbisen/rypsok)"
    )


def test_req_cmp_004_a_contact_that_would_break_the_header_is_refused() -> None:
    with pytest.raises(ValueError, match="user_agent_contact"):
        user_agent("ops@example.org\r\nX-Injected: 1")


def test_req_sec_017_plain_http_only_on_a_loopback_host() -> None:
    assert EngineOrigin.parse("http://127.0.0.1:8080").scheme == "http"
    assert EngineOrigin.parse("http://[::1]:8080").host == "::1"
    assert EngineOrigin.parse("http://localhost").host == "localhost"
    for url in ("http://wiki.example.org", "http://10.0.0.1", "ftp://127.0.0.1"):
        with pytest.raises(ValueError, match="engine"):
            EngineOrigin.parse(url)


async def test_req_sec_017_a_redirect_is_not_followed_and_the_credential_stays_home() -> None:
    async with serve_http({"/elsewhere": Reply(body=b"{}")}) as other:
        redirect = Reply(status=302, headers=(("Location", f"{other.url}/elsewhere"),))
        async with serve_http({"/search": redirect}, tls=tls_for(PROVIDER)) as engine:
            network = ProviderNetwork({PROVIDER: engine})
            async with EngineClient(**network.http_options()) as http:
                response = await http.get(
                    EngineOrigin(scheme="https", host=PROVIDER),
                    "/search",
                    params=[("q", "x")],
                    headers={"X-Subscription-Token": "token-123"},
                    max_bytes=MIB,
                )
    assert response.status == 302
    assert other.requests == []
    assert network.hosts_dialled == [PROVIDER]
    assert engine.requests[0].header("x-subscription-token") == "token-123"
    assert engine.requests[0].header("host") == PROVIDER


async def test_req_test_015_environment_proxy_variables_are_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with serve_http(default=Reply(body=b"{}")) as proxy:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
            monkeypatch.setenv(name, proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        async with serve_http({"/w/api.php": Reply(body=b"{}")}) as wiki:
            # No injected transport: the production client, with the environment above.
            async with EngineClient() as http:
                response = await http.get(
                    _origin(wiki.url), "/w/api.php", params=[], headers={}, max_bytes=MIB
                )
            # The same environment does reach a client that trusts it: the test can fail.
            async with httpx.AsyncClient(trust_env=True) as trusting:
                await trusting.get(f"{wiki.url}/w/api.php")
    assert response.status == 200
    assert len(wiki.requests) == 1
    assert len(proxy.requests) == 1
    assert proxy.requests[0].target.startswith("http://127.0.0.1")


async def test_req_res_008_the_configured_proxy_carries_engine_requests() -> None:
    # An https engine through the proxy: a CONNECT to the engine's host, nothing resolved or
    # dialled here but the proxy (this proxy answers without tunnelling: no answer follows).
    resolver = MapResolver({})
    async with (
        serve_http(default=Reply(body=b"not a tunnel")) as proxy,
        EngineClient(proxy=proxy.url, resolver=resolver) as http,
    ):
        with pytest.raises(EngineFailure) as caught:
            await http.get(
                EngineOrigin(scheme="https", host="api.provider-of-search.net"),
                "/search",
                params=[("q", "x")],
                headers={},
                max_bytes=MIB,
            )
    assert caught.value.failure_class is Reason.REQUEST_FAILURE
    assert [(r.method, r.target) for r in proxy.requests] == [
        ("CONNECT", "api.provider-of-search.net:443")
    ]
    assert resolver.lookups == []


async def test_req_res_008_a_loopback_engine_is_never_sent_to_the_proxy() -> None:
    # The proxy cannot reach this machine's loopback, and the query must not leave for it.
    async with (
        serve_http(default=Reply(body=b'{"via":"proxy"}')) as proxy,
        serve_http({"/w/api.php": Reply(body=b"{}")}) as wiki,
        EngineClient(proxy=proxy.url) as http,
    ):
        response = await http.get(
            _origin(wiki.url), "/w/api.php", params=[("a", "1")], headers={}, max_bytes=MIB
        )
    assert response.body == b"{}"
    assert proxy.requests == []
    assert wiki.requests[0].target == "/w/api.php?a=1"


def test_req_res_008_a_bad_proxy_is_refused_without_repeating_it() -> None:
    with pytest.raises(ValueError, match=r"egress\.proxy") as caught:
        EngineClient(proxy="gopher://user:secret@proxy")
    assert "secret" not in str(caught.value)


async def test_req_sec_013_a_gzip_bomb_stops_at_the_bound() -> None:
    bomb = gzip.compress(b"\0" * (64 * MIB), compresslevel=9)
    assert len(bomb) < MIB // 8
    reply = Reply(headers=(("Content-Encoding", "gzip"),), body=bomb, chunks=4)
    async with serve_http({"/x": reply}) as server, EngineClient() as http:
        with pytest.raises(EngineFailure) as caught:
            await http.get(_origin(server.url), "/x", params=[], headers={}, max_bytes=MIB)
    assert caught.value.failure_class is Reason.PARSE_FAILURE


async def test_req_sec_013_compressed_bodies_are_counted_after_decompression() -> None:
    payload = b'{"k":"' + b"a" * (MIB - 16) + b'"}'
    assert len(payload) <= MIB
    raw_deflate = zlib.compressobj(wbits=-15)
    deflated = raw_deflate.compress(payload) + raw_deflate.flush()
    routes = {
        "/gzip": Reply(headers=(("Content-Encoding", "gzip"),), body=gzip.compress(payload)),
        "/zlib": Reply(headers=(("Content-Encoding", "deflate"),), body=zlib.compress(payload)),
        "/raw": Reply(headers=(("Content-Encoding", "deflate"),), body=deflated),
        "/over": Reply(
            headers=(("Content-Encoding", "gzip"),),
            body=gzip.compress(payload + b"xxxxxxxxxxxxxxxxx"),
        ),
    }
    async with serve_http(routes) as server, EngineClient() as http:
        for path in ("/gzip", "/zlib", "/raw"):
            response = await http.get(
                _origin(server.url), path, params=[], headers={}, max_bytes=MIB
            )
            assert response.body == payload
        with pytest.raises(EngineFailure):
            await http.get(_origin(server.url), "/over", params=[], headers={}, max_bytes=MIB)
    assert server.requests[0].header("accept-encoding") == "gzip, deflate"


async def test_req_sec_010_an_identity_body_is_bounded_while_streaming() -> None:
    big = b"x" * (MIB + 1)
    routes = {
        "/declared": Reply(body=big),
        "/undeclared": Reply(body=big, content_length=False, chunks=16),
        "/lying": Reply(body=big, headers=(("Content-Length", "10"),), chunks=16),
        "/exact": Reply(body=big[:MIB]),
    }
    async with serve_http(routes) as server, EngineClient() as http:
        for path in ("/declared", "/undeclared"):
            with pytest.raises(EngineFailure) as caught:
                await http.get(_origin(server.url), path, params=[], headers={}, max_bytes=MIB)
            assert caught.value.failure_class is Reason.PARSE_FAILURE
        exact = await http.get(_origin(server.url), "/exact", params=[], headers={}, max_bytes=MIB)
    assert len(exact.body) == MIB


async def test_req_sec_010_an_identity_length_above_the_bound_is_refused_before_the_body() -> None:
    # The answer declares one byte more than the bound and ends after two: refused on the
    # declaration (parse_failure), never read until the connection ends (request_failure).
    declared = Reply(body=b"{}", headers=(("Content-Length", str(MIB + 1)),))
    async with (
        serve_http({"/x": declared}) as plain,
        serve_http({"/x": declared}, tls=tls_for(PROVIDER)) as secured,
    ):
        network = ProviderNetwork({PROVIDER: secured})
        async with EngineClient() as local, EngineClient(**network.http_options()) as provider:
            for http, origin in (
                (local, _origin(plain.url)),
                (provider, EngineOrigin(scheme="https", host=PROVIDER)),
            ):
                with trio.fail_after(5), pytest.raises(EngineFailure) as caught:
                    await http.get(origin, "/x", params=[], headers={}, max_bytes=MIB)
                assert caught.value.failure_class is Reason.PARSE_FAILURE


async def test_req_sec_013_a_compressed_length_above_the_bound_is_read_by_what_it_decodes_to() -> (
    None
):
    # Incompressible bytes grow a little under gzip: the declared length passes the bound,
    # what they decode to does not.
    payload = random.Random(3).randbytes(1000)
    compressed = gzip.compress(payload)
    assert len(compressed) > len(payload)
    reply = Reply(headers=(("Content-Encoding", "gzip"),), body=compressed)
    async with serve_http({"/x": reply}) as server, EngineClient() as http:
        response = await http.get(
            _origin(server.url), "/x", params=[], headers={}, max_bytes=len(payload)
        )
    assert response.body == payload


async def test_req_sec_013_a_corrupt_or_unasked_coding_is_a_parse_failure() -> None:
    routes = {
        "/corrupt": Reply(headers=(("Content-Encoding", "gzip"),), body=b"\x1f\x8bnot gzip"),
        "/truncated": Reply(
            headers=(("Content-Encoding", "gzip"),), body=gzip.compress(b"{}" * 1000)[:-12]
        ),
        "/br": Reply(headers=(("Content-Encoding", "br"),), body=b"\x0b\x02\x80{}\x03"),
    }
    async with serve_http(routes) as server, EngineClient() as http:
        for path in routes:
            with pytest.raises(EngineFailure) as caught:
                await http.get(_origin(server.url), path, params=[], headers={}, max_bytes=MIB)
            assert caught.value.failure_class is Reason.PARSE_FAILURE, path


async def test_req_sec_013_over_tls_the_body_is_bounded_and_decoded_too() -> None:
    # An https provider (the production case): the same decoder and the same failures as
    # over plain http on loopback.
    payload = b'{"k":1}'
    gzipped = (("Content-Encoding", "gzip"),)
    routes = {
        "/gzip": Reply(headers=gzipped, body=gzip.compress(payload)),
        "/bomb": Reply(
            headers=gzipped, body=gzip.compress(b"\0" * (64 * MIB), compresslevel=9), chunks=4
        ),
        "/corrupt": Reply(headers=gzipped, body=b"\x1f\x8bnot gzip"),
        "/truncated": Reply(headers=gzipped, body=gzip.compress(b"{}" * 1000)[:-12]),
        "/br": Reply(headers=(("Content-Encoding", "br"),), body=b"\x0b\x02\x80{}\x03"),
    }
    async with serve_http(routes, tls=tls_for(PROVIDER)) as server:
        network = ProviderNetwork({PROVIDER: server})
        async with EngineClient(**network.http_options()) as http:
            origin = EngineOrigin(scheme="https", host=PROVIDER)
            # A driver cannot ask for a coding the client does not decode under the bound.
            response = await http.get(
                origin, "/gzip", params=[], headers={"Accept-Encoding": "br"}, max_bytes=MIB
            )
            for path in ("/bomb", "/corrupt", "/truncated", "/br"):
                with pytest.raises(EngineFailure) as caught:
                    await http.get(origin, path, params=[], headers={}, max_bytes=MIB)
                assert caught.value.failure_class is Reason.PARSE_FAILURE, path
    assert response.body == payload
    assert server.requests[0].header("accept-encoding") == "gzip, deflate"


async def test_req_sec_011_a_slow_engine_ends_at_the_callers_total() -> None:
    # The total is the caller's scope (the aggregator's LIM-S5): the request ends with it,
    # long before the answer (5 s), as a cancellation or as the read timeout the client
    # takes from what is left of the scope.
    slow = Reply(body=b"{}", delay_s=5)
    async with serve_http({"/slow": slow}) as server, EngineClient() as http:
        failure: Reason | None = None
        start = trio.current_time()
        with trio.move_on_after(0.15) as scope:
            try:
                await http.get(_origin(server.url), "/slow", params=[], headers={}, max_bytes=MIB)
            except EngineFailure as exc:
                failure = exc.failure_class
        elapsed = trio.current_time() - start
    assert scope.cancelled_caught or failure is Reason.TIMEOUT
    assert elapsed < 1.0


async def test_req_sec_011_the_callers_deadline_cancels_and_is_not_a_failure() -> None:
    async with (
        serve_http({"/slow": Reply(body=b"{}", delay_s=5)}) as server,
        EngineClient() as http,
    ):
        with trio.move_on_after(0.1) as scope:
            await http.get(_origin(server.url), "/slow", params=[], headers={}, max_bytes=MIB)
    assert scope.cancelled_caught


async def test_req_eng_006_a_refused_connection_is_a_request_failure() -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    await listeners[0].aclose()  # nothing listens on the port any more
    async with EngineClient() as http:
        with pytest.raises(EngineFailure) as caught:
            await http.get(
                _origin(f"http://127.0.0.1:{port}"), "/", params=[], headers={}, max_bytes=MIB
            )
    assert caught.value.failure_class is Reason.REQUEST_FAILURE


@pytest.mark.parametrize("cap", [1, 2])
async def test_req_sec_012_outbound_requests_in_flight_are_capped(cap: int) -> None:
    async with (
        serve_http({"/x": Reply(body=b"{}", delay_s=0.05)}) as server,
        EngineClient(outbound_in_flight=cap) as http,
        trio.open_nursery() as nursery,
    ):
        for _ in range(4):
            nursery.start_soon(
                lambda: http.get(_origin(server.url), "/x", params=[], headers={}, max_bytes=MIB)
            )
    assert len(server.requests) == 4
    assert server.max_active == cap


def test_req_res_002_retry_after_in_seconds_and_as_a_date() -> None:
    assert parse_retry_after(httpx.Headers({"Retry-After": "30"})) == 30
    assert parse_retry_after(httpx.Headers({"Retry-After": "  7 "})) == 7
    dated = httpx.Headers(
        {"Retry-After": "Wed, 02 Dec 2026 10:01:30 GMT", "Date": "Wed, 02 Dec 2026 10:00:00 GMT"}
    )
    assert parse_retry_after(dated) == 90
    past = httpx.Headers(
        {"Retry-After": "Wed, 02 Dec 2026 09:00:00 GMT", "Date": "Wed, 02 Dec 2026 10:00:00 GMT"}
    )
    assert parse_retry_after(past) == 0
    assert parse_retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert parse_retry_after(httpx.Headers({"Retry-After": "-5"})) is None
    assert parse_retry_after(httpx.Headers({})) is None
    assert parse_retry_after(httpx.Headers({"Retry-After": "9" * 40})) == 86400


async def test_req_sec_011_connect_timeout_and_read_timeout_is_the_time_left() -> None:
    async with EngineClient(connect_timeout_ms=300) as http:
        # The scopes are read by the client, not waited in.
        with trio.move_on_after(2.0):  # noqa: ASYNC100 (the aggregator's LIM-S5 scope)
            first = http._timeout()
        with trio.move_on_after(0.2):  # noqa: ASYNC100 (a deadline nearer than the connect)
            second = http._timeout()
        unbounded = http._timeout()
    assert first["connect"] == pytest.approx(0.3)
    assert 1.9 < first["read"] <= 2.0
    assert first["pool"] == first["read"]
    assert first["write"] == first["read"]
    assert second["read"] <= 0.2
    assert second["connect"] <= 0.2
    assert unbounded == {"connect": pytest.approx(0.3), "read": None, "write": None, "pool": None}


async def test_req_cmp_004_a_driver_cannot_replace_the_user_agent() -> None:
    async with serve_http({"/x": Reply(body=b"{}")}) as server, EngineClient() as http:
        await http.get(
            _origin(server.url),
            "/x",
            params=[],
            headers={"user-agent": "Mozilla/5.0", "Accept-Encoding": "br"},
            max_bytes=MIB,
        )
    sent = server.requests[0].headers
    assert [v for k, v in sent if k == "user-agent"] == [user_agent("")]
    assert [v for k, v in sent if k == "accept-encoding"] == ["gzip, deflate"]


async def test_req_eng_014_a_cookie_an_engine_sets_is_never_sent_back() -> None:
    # The identification of every engine request is the User-Agent alone: a cookie set by
    # one answer (or a redirect) must not ride along on the next request to the same origin.
    cookies = (
        ("Set-Cookie", "session=abc; Path=/"),
        ("Set-Cookie", "tracker=1; Path=/; Max-Age=3600"),
    )
    routes = {
        "/set": Reply(body=b"{}", headers=cookies),
        "/moved": Reply(status=302, headers=(("Location", "/x"), *cookies)),
        "/x": Reply(body=b"{}"),
    }
    async with serve_http(routes) as server, EngineClient() as http:
        origin = _origin(server.url)
        first = await http.get(origin, "/set", params=[], headers={}, max_bytes=MIB)
        moved = await http.get(origin, "/moved", params=[], headers={}, max_bytes=MIB)
        await http.get(origin, "/x", params=[("q", "a")], headers={}, max_bytes=MIB)
    assert first.headers.get_list("set-cookie") == ["session=abc; Path=/", cookies[1][1]]
    assert moved.status == 302
    assert [r.path for r in server.requests] == ["/set", "/moved", "/x"]
    for request in server.requests:
        assert request.header("cookie") is None


def test_req_sec_017_an_ipv4_mapped_loopback_is_loopback() -> None:
    assert EngineOrigin.parse("http://[::ffff:127.0.0.1]:8080").scheme == "http"


async def test_req_sec_011_a_trickling_body_is_cut_by_the_deadline_at_once() -> None:
    body = b"x" * 5000
    reply = Reply(body=body, chunks=50, chunk_delay_s=0.05)
    async with serve_http({"/slow": reply}) as server, EngineClient() as http:
        start = trio.current_time()
        with trio.move_on_after(0.3) as total:  # the aggregator's LIM-S5 scope
            await http.get(_origin(server.url), "/slow", params=[], headers={}, max_bytes=MIB)
        elapsed = trio.current_time() - start
        with trio.move_on_after(0.2) as scope:
            await http.get(_origin(server.url), "/slow", params=[], headers={}, max_bytes=MIB)
        after_cancel = trio.current_time() - start - elapsed
    assert total.cancelled_caught
    assert elapsed < 1.0  # the whole body would take 2.5 s
    assert scope.cancelled_caught
    assert after_cancel < 0.7


# A plain `base_url` is read by hand, so that a mirror's configuration starts without httpx
# (REQ-PERF-005): every such reading equals httpx's.
def _reading(text: str) -> tuple[EngineOrigin, str] | str:
    try:
        return parse_base_url(text)
    except ValueError:
        return "refused"


_LABELS = st.sampled_from(
    ["wiki", "example", "org", "a", "A", "xn--bcher-kva", "127", "0", "1", "255", "256",
     "01", "-a", "a-", "a_b", "localhost", "10", "b\u00fccher", ""]
)  # fmt: skip
_PATH_PIECES = st.sampled_from(
    ["/", "w", "api.php", ".", "..", "_", "~", "-", "%41", "%", " ", "\u00e9", "//", "?q=1",
     "#f", ":", "@", "index.php", "W"]
)  # fmt: skip


@st.composite
def _base_urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "HTTPS", "Http", "ftp"]))
    host = ".".join(draw(st.lists(_LABELS, min_size=1, max_size=4)))
    if draw(st.booleans()):
        host = draw(st.sampled_from(["127.0.0.1", "[::1]", "localhost", "1.2.3", "300.1.1.1"]))
    port = draw(st.sampled_from(["", ":80", ":443", ":8080", ":0443", ":65535", ":65536", ":"]))
    path = "".join(draw(st.lists(_PATH_PIECES, max_size=6)))
    return f"{scheme}://{host}{port}{path}"


@settings(max_examples=600, deadline=None)
@given(_base_urls())
def test_req_sec_017_a_base_url_is_read_as_the_egress_policy_reads_a_url(text: str) -> None:
    # One reading: the origin and path of a base_url are the parts the policy reads, and
    # the URL an engine builds on them reads back to the same parts.
    read = read_url(text)
    taken = _reading(text)
    if isinstance(read, Refusal) or "?" in text or "#" in text:
        assert taken == "refused"
        return
    if taken == "refused":
        # Read, but not an engine origin: plain http off loopback.
        assert read.scheme == "http"
        return
    assert not isinstance(taken, str)
    origin, path = taken
    assert (origin.scheme, origin.port or DEFAULT_PORTS[origin.scheme]) == (read.scheme, read.port)
    assert origin.host == (read.host.name or str(read.host.address))
    assert path == read.path.rstrip("/")
    again = read_url(origin.url(path or "/"))
    assert not isinstance(again, Refusal)
    assert (again.scheme, again.host, again.port) == (read.scheme, read.host, read.port)
    assert again.path.rstrip("/") == path


_WIKI = EngineOrigin(scheme="https", host="wiki.example.org")


@pytest.mark.parametrize(
    ("text", "origin", "path"),
    [
        ("https://wiki.example.org/w", _WIKI, "/w"),
        ("https://wiki.example.org:443/w/", _WIKI, "/w"),
        (
            "http://127.0.0.1:8080/w/api.php",
            EngineOrigin(scheme="http", host="127.0.0.1", port=8080),
            "/w/api.php",
        ),
        ("https://wiki.example.org", _WIKI, ""),
    ],
)
def test_req_perf_005_the_plain_shapes_read_as_expected(
    text: str, origin: EngineOrigin, path: str
) -> None:
    assert parse_base_url(text) == (origin, path)


async def test_req_priv_003_the_engine_client_keeps_nothing_of_a_query() -> None:
    phrase = "".join(["zq", "unusual", "xw"])  # built at run time: no constant holds it
    async with serve_http({"/w/api.php": Reply(body=b"{}")}) as server:
        http = EngineClient()
        async with http:
            origin = EngineOrigin.parse(server.url)
            params = [("action", "query"), ("srsearch", f"{phrase} words"), ("srlimit", "10")]
            response = await http.get(
                origin, "/w/api.php", params=params, headers={}, max_bytes=1 << 20
            )
            assert response.status == 200
            del params, response
            gc.collect()
            # The request did carry the query; the client, with its pool, keeps none of it.
            assert phrase in server.requests[0].target
            assert [
                s for s in strings_reachable_from(http, into_modules=False) if phrase in s
            ] == []
