"""EngineHttp builds its TLS context only for https engines, once, and builds URLs as httpx does.

Over real loopback sockets: a plain-http engine (a private MediaWiki on loopback) never
loads the certificate store; the first https request does, and every client of the process
then shares that one verifying context.
"""

from __future__ import annotations

import ssl
import subprocess
import sys
from functools import partial

import httpx
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from servers import Reply, serve_http

from rypsok.core.engines import http as engine_http
from rypsok.core.engines.base import EngineFailure
from rypsok.core.engines.http import EngineHttp, EngineOrigin
from rypsok.core.model import Reason

MIB = 1024 * 1024


async def test_req_sec_017_a_plain_http_loopback_engine_never_builds_the_tls_context() -> None:
    engine_http._tls_context.cache_clear()
    async with serve_http({"/w/api.php": Reply(body=b"{}")}) as wiki, EngineHttp() as http:
        origin = EngineOrigin.parse(wiki.url)
        for _ in range(3):
            response = await http.get(
                origin, "/w/api.php", params=[("q", "x")], headers={}, max_bytes=MIB
            )
            assert response.status == 200
    assert len(wiki.requests) == 3
    assert engine_http._tls_context.cache_info().currsize == 0


async def test_req_sec_017_an_https_engine_gets_one_shared_verifying_context() -> None:
    engine_http._tls_context.cache_clear()
    accepted: list[int] = []

    async def hang_up(stream: trio.SocketStream) -> None:
        accepted.append(1)
        await stream.aclose()  # no TLS server here: the handshake cannot complete

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, hang_up, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        origin = EngineOrigin(scheme="https", host="127.0.0.1", port=port)
        async with EngineHttp() as first, EngineHttp() as second:
            for http in (first, second):
                with pytest.raises(EngineFailure) as caught:
                    await http.get(origin, "/", params=[], headers={}, max_bytes=MIB)
                assert caught.value.failure_class is Reason.REQUEST_FAILURE
        nursery.cancel_scope.cancel()
    assert len(accepted) == 2
    # Built by the first https request and shared by both clients: one context.
    assert engine_http._tls_context.cache_info().currsize == 1
    assert engine_http._tls_context.cache_info().misses == 1
    context = engine_http._tls_context()
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname is True
    assert context.cert_store_stats()["x509_ca"] > 0


def test_req_sec_017_the_plain_http_pool_context_could_only_refuse_a_handshake() -> None:
    context = engine_http._plain_only_context()
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname is True
    assert context.cert_store_stats()["x509_ca"] == 0


_TEXT = st.text(max_size=40)


@settings(max_examples=400, deadline=None)
@given(
    params=st.lists(st.tuples(_TEXT, _TEXT), max_size=6),
    https=st.booleans(),
    path=st.sampled_from(["/w/api.php", "/res/v1/web/search", "/", "/wiki/index.php"]),
)
def test_req_sec_017_the_query_is_encoded_exactly_as_httpx_encodes_it(
    params: list[tuple[str, str]], https: bool, path: str
) -> None:
    origin = (
        EngineOrigin(scheme="https", host="api.example.test")
        if https
        else EngineOrigin(scheme="http", host="127.0.0.1", port=8080)
    )
    base = origin.url(path)
    try:
        expected = base.copy_merge_params(params)
    except Exception as exc:  # an unpaired surrogate cannot be encoded either way
        with pytest.raises(type(exc)):
            engine_http._with_query(base, params)
        return
    got = engine_http._with_query(base, params)
    assert got == expected
    assert got.raw_path == expected.raw_path
    assert str(got) == str(expected)


def test_req_sec_017_a_cached_engine_url_is_the_one_httpx_builds() -> None:
    origin = EngineOrigin(scheme="http", host="127.0.0.1", port=8080)
    built = httpx.URL(scheme="http", host="127.0.0.1", port=8080, path="/w/api.php")
    assert origin.url("/w/api.php") == built
    assert origin.url("/w/api.php") is origin.url("/w/api.php")
    with pytest.raises(ValueError, match="absolute"):
        origin.url("w/api.php")


@settings(max_examples=400, deadline=None)
@given(
    params=st.lists(st.tuples(_TEXT, _TEXT), max_size=6),
    https=st.booleans(),
    path=st.sampled_from(["/w/api.php", "/res/v1/web/search", "/", "/wiki/index.php"]),
)
def test_req_sec_017_the_request_target_is_the_one_httpx_sends(
    params: list[tuple[str, str]], https: bool, path: str
) -> None:
    # The production client hands httpcore the target itself; it must be byte for byte what
    # httpx's transport sends for the same URL.
    origin = (
        EngineOrigin(scheme="https", host="api.example.test")
        if https
        else EngineOrigin(scheme="http", host="127.0.0.1", port=8080)
    )
    try:
        expected = origin.url(path).copy_merge_params(params)
    except Exception as exc:  # an unpaired surrogate cannot be encoded either way
        with pytest.raises(type(exc)):
            engine_http._target(origin, path, params)
        return
    assert engine_http._target(origin, path, params) == expected.raw_path


async def test_req_sec_017_the_production_client_sends_what_httpx_sends() -> None:
    # The same request over the wire through httpcore directly and through httpx's own
    # client: the same target and the same headers, Host first (cookies aside, never sent).
    params = [("q", "ünï code & more"), ("n", "10"), ("empty", "")]
    async with serve_http({"/w/api.php": Reply(body=b"{}")}) as wiki, EngineHttp() as http:
        origin = EngineOrigin.parse(wiki.url)
        await http.get(
            origin,
            "/w/api.php",
            params=params,
            headers={"Accept": "application/json"},
            max_bytes=MIB,
        )
        async with httpx.AsyncClient(trust_env=False) as client:
            await client.get(
                origin.url("/w/api.php"),
                params=params,
                headers={
                    "Accept": "application/json",
                    "User-Agent": http.user_agent,
                    "Accept-Encoding": "gzip, deflate",
                },
            )
    ours, theirs = wiki.requests
    assert ours.target == theirs.target
    assert ours.headers == theirs.headers
    assert ours.headers[0][0] == "host"


def test_req_perf_005_building_the_engines_client_does_not_import_httpcore() -> None:
    # A host's first message is its handshake: httpcore (about 20 ms to import) waits for
    # the first engine request, as it did inside httpx's own transport.
    code = (
        "import sys; sys.modules.setdefault('httpx._main', None); "
        "import rypsok.cli, rypsok.mcp.stdio; "
        "from rypsok.core.engines.http import EngineHttp; EngineHttp(); "
        "print('httpcore' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
