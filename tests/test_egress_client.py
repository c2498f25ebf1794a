"""The fetch client and the engine profile (REQ-SEC-005, REQ-SEC-009, REQ-SEC-017,
REQ-FETCH-007, REQ-SEC-008, and the trust store of the deployment page, audit F-3).

Requests go to local servers through the production client, reached by an allow rule added
in code and a test resolver; the recording network backend keeps every attempt on loopback.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

import httpcore
import pytest
from fetch_helpers import loopback_client, target_of

from rypsok.core.egress import (
    ClientBuildError,
    EgressPolicy,
    EgressRefused,
    Refusal,
    build_fetch_client,
    engine_origin_refusal,
    trust_store_context,
)
from rypsok.core.egress.clients import EgressTransport
from rypsok.core.egress.policy import Denial
from rypsok.core.egress.testing import MapResolver, RecordingBackend
from rypsok.core.engines.client import EngineOrigin
from rypsok.core.fetch.body import read_bounded
from testkit.servers import Reply, serve_http

if TYPE_CHECKING:
    from pathlib import Path

    from rypsok.core.egress import FetchClient


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _client(port: int, network_backend: RecordingBackend) -> FetchClient:
    return loopback_client(port, network_backend, names={"other.example.net": ["10.9.9.9"]})


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "CONNECT"])
async def test_req_sec_009_only_get_is_sent(method: str) -> None:
    # The pool's one entry refuses any other method before a connection is made.
    async with serve_http({"/p": Reply(body=b"x")}) as server:
        network_backend = RecordingBackend()
        policy = EgressPolicy(allow_http=True, ports=frozenset({server.port})).with_allow(
            "127.0.0.1"
        )
        transport = EgressTransport(
            policy,
            ssl_context=trust_store_context(),
            resolver=MapResolver({"example.org": ["127.0.0.1"]}),
            network_backend=network_backend,
        )
        url = httpcore.URL(scheme=b"http", host=b"example.org", port=server.port, target=b"/p")
        with pytest.raises(EgressRefused) as caught:
            await transport.handle_core(httpcore.Request(method.encode(), url))
        await transport.aclose()
    assert caught.value.refusal is Refusal.METHOD
    assert network_backend.attempts == []
    assert server.requests == []


async def test_req_sec_009_the_request_carries_only_rypsoks_headers() -> None:
    async with serve_http({"/p": Reply(body=b"x")}) as server:
        port = _port(server.url)
        async with _client(port, RecordingBackend()) as client:
            target = target_of(client, f"http://example.org:{port}/p")
            async with client.stream(target) as r:
                await read_bounded(r, 1 << 20)
    request = server.requests[0]
    assert request.method == "GET"
    assert {name.lower() for name, _value in request.headers} == {
        "host",
        "user-agent",
        "accept",
        "accept-encoding",
    }
    assert request.header("user-agent") == "rypsok/0 (+test)"
    assert request.header("host") == f"example.org:{port}"
    assert request.header("accept") is not None
    # The codings the body reader decodes under its bound, and no other.
    assert request.header("accept-encoding") == "gzip, deflate"


async def test_req_fetch_007_no_cookie_is_kept_or_sent() -> None:
    setting = Reply(
        body=b"x",
        headers=(
            ("Set-Cookie", "session=abc; Path=/"),
            ("Set-Cookie", "other=1; Domain=example.org; Path=/"),
        ),
    )
    async with serve_http({"/p": setting}) as server:
        port = _port(server.url)
        async with _client(port, RecordingBackend()) as client:
            target = target_of(client, f"http://example.org:{port}/p")
            for _ in range(3):
                async with client.stream(target) as r:
                    await read_bounded(r, 1 << 20)
    assert len(server.requests) == 3
    assert all(request.header("cookie") is None for request in server.requests)
    assert all(request.header("authorization") is None for request in server.requests)


async def test_req_sec_008_a_redirect_is_returned_never_followed_and_its_target_is_judged() -> None:
    moved = Reply(status=302, headers=(("Location", "http://127.0.0.1:1/admin"),))
    async with serve_http({"/moved": moved}) as server:
        port = _port(server.url)
        network_backend = RecordingBackend()
        async with _client(port, network_backend) as client:
            async with client.stream(target_of(client, f"http://example.org:{port}/moved")) as r:
                assert r.status_code == 302
                location = r.headers.get("location", "")
            # The pipeline judges the target with the same profile before any request.
            judged = client.policy.judge_url(location, upgrade_http=False)
    assert isinstance(judged, Denial)
    assert judged.refusal is Refusal.PORT
    assert len(server.requests) == 1
    assert network_backend.attempts == [(ipaddress.ip_address("127.0.0.1"), port)]


async def test_req_sec_008_a_redirect_to_a_name_with_private_addresses_fails_as_network() -> None:
    async with serve_http({"/p": Reply(body=b"x")}) as server:
        port = _port(server.url)
        network_backend = RecordingBackend()
        async with _client(port, network_backend) as client:
            target = target_of(client, f"http://other.example.net:{port}/p")
            with pytest.raises(EgressRefused) as caught:
                async with client.stream(target):
                    pass
    assert caught.value.refusal is Refusal.PRIVATE
    assert network_backend.attempts == []


def _write_ca(path: Path) -> None:
    # A real root from the system bundle, so that the file holds one certificate.
    bundle = trust_store_context().get_ca_certs(binary_form=True)
    import ssl

    path.write_text(ssl.DER_cert_to_PEM_cert(bundle[0]))


def test_req_ops_001_the_trust_store_is_the_systems_and_no_bundled_roots(tmp_path: Path) -> None:
    one = tmp_path / "one.pem"
    _write_ca(one)
    # SSL_CERT_FILE replaces the system locations: exactly its one root is trusted, so no
    # bundle of the library's own (certifi) is loaded beside it.
    context = trust_store_context({"SSL_CERT_FILE": str(one)})
    assert len(context.get_ca_certs()) == 1
    assert context.verify_mode.name == "CERT_REQUIRED"
    assert context.check_hostname


@pytest.mark.parametrize(
    ("environ", "why"),
    [
        ({"SSL_CERT_FILE": "/nonexistent/ca.pem"}, "SSL_CERT_FILE names a file that does not"),
        ({"SSL_CERT_DIR": "/nonexistent/certs"}, "SSL_CERT_DIR names a directory"),
    ],
)
def test_req_ops_001_a_missing_trust_store_is_named_once_at_start(
    environ: dict[str, str], why: str
) -> None:
    with pytest.raises(ClientBuildError) as caught:
        trust_store_context(environ)
    text = str(caught.value)
    assert text.startswith("the HTTP client could not be built: ")
    assert why in text
    assert text.count("could not be built") == 1
    assert "nonexistent" not in text


def test_req_ops_001_a_file_without_certificates_is_named(tmp_path: Path) -> None:
    empty = tmp_path / "empty.pem"
    empty.write_text("not a certificate\n")
    with pytest.raises(ClientBuildError, match="without readable certificates"):
        trust_store_context({"SSL_CERT_FILE": str(empty)})


async def test_req_ops_001_the_fetch_client_is_not_built_without_a_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", "/nonexistent/ca.pem")
    with pytest.raises(ClientBuildError):
        build_fetch_client(EgressPolicy(), user_agent="rypsok/test")


@pytest.mark.parametrize(
    ("scheme", "host", "refusal"),
    [
        ("https", "api.search.brave.com", None),
        ("https", "10.0.0.5", None),  # an endpoint the operator configured explicitly
        ("http", "localhost", None),
        ("http", "127.0.0.1", None),
        ("http", "[::1]", None),
        ("http", "::ffff:127.0.0.1", None),
        ("http", "10.0.0.5", Refusal.SCHEME),
        ("http", "wiki.example.org", Refusal.SCHEME),
        ("http", "0x7f.1", Refusal.SCHEME),
        ("ftp", "example.org", Refusal.SCHEME),
        ("ftp", "127.0.0.1", Refusal.SCHEME),  # loopback admits plain http, no other scheme
        ("http", "LOCALHOST", None),
        # One answer to "loopback" (rypsok.shared.hosts), the configuration's: a name with a
        # root dot is not localhost, whose hosts-file answer a resolver need not give it.
        ("http", "localhost.", Refusal.SCHEME),
        ("http", "localhost..", Refusal.SCHEME),
        ("http", "localhostX", Refusal.SCHEME),
        ("http", "X127.0.0.1", Refusal.SCHEME),  # only the brackets are dropped
        ("https", "", Refusal.MALFORMED_HOST),
    ],
)
def test_req_sec_017_the_engine_profile_is_judged_by_the_same_component(
    scheme: str, host: str, refusal: Refusal | None
) -> None:
    assert engine_origin_refusal(scheme, host) is refusal
    # The engine client's origin applies exactly that judgment (REQ-SEC-005).
    if refusal is None:
        EngineOrigin(scheme=scheme, host=host)
    else:
        with pytest.raises(ValueError, match=r"engine origin|engine on a loopback"):
            EngineOrigin(scheme=scheme, host=host)


async def test_req_sec_005_fetch_and_robots_requests_share_one_profile() -> None:
    # robots.txt is read with the same client as the page: the same refusals apply to it.
    async with serve_http({"/robots.txt": Reply(body=b"User-agent: *\n")}) as server:
        port = _port(server.url)
        network_backend = RecordingBackend()
        async with _client(port, network_backend) as client:
            async with client.stream(
                target_of(client, f"http://example.org:{port}/robots.txt")
            ) as r:
                assert r.status_code == 200
            refused = client.policy.judge_url(f"http://169.254.169.254:{port}/robots.txt")
    assert isinstance(refused, Denial)
    assert refused.refusal is Refusal.METADATA


@pytest.mark.usefixtures("keep_exception_hooks")
def test_req_ops_001_serve_without_a_trust_store_exits_1_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rypsok import cli

    monkeypatch.delenv("RYPSOK_CONFIG", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", "/nonexistent/ca.pem")
    code = cli.main(["serve", "--transport", "stdio"])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert err.splitlines() == [
        "rypsok: the HTTP client could not be built: SSL_CERT_FILE names a file that does not exist"
    ]


async def test_req_sec_006_the_client_of_a_configuration_applies_its_rules(
    tmp_path: Path,
) -> None:
    # Through the real loader: the [egress] and [fetch] keys become the profile, and the
    # test's own server is reached by an allow rule added in code, not by the file.
    from rypsok.config.check import validate
    from rypsok.core.fetch.egress_port import FetchNetwork, build_fetch_egress
    from rypsok.shared.identity import user_agent

    async with serve_http({"/p": Reply(body=b"x")}) as server:
        port = _port(server.url)
        path = tmp_path / "rypsok.toml"
        path.write_text(
            "config_version = 1\n"
            "[service]\n"
            'user_agent_contact = "ops@example.org"\n'
            "[fetch]\n"
            f"ports = [80, 443, {port}]\n"
            "connect_timeout_ms = 700\n"
            "[egress]\n"
            "allow_http = true\n"
            'allow = ["wiki.corp.example.org"]\n'
            'deny = ["*.blocked.example.org"]\n'
        )
        config = validate(str(path), {}).config
        network_backend = RecordingBackend()
        resolver = MapResolver(
            {"example.org": ["127.0.0.1"], "wiki.corp.example.org": ["10.1.1.1"]}
        )
        network = FetchNetwork(
            extra_allow=("127.0.0.1",), resolver=resolver, network_backend=network_backend
        )
        agent = user_agent(config.service.user_agent_contact)
        _policy, built = build_fetch_egress(config, network, user_agent=agent)
        async with built as client:
            policy = client.policy
            async with client.stream(target_of(client, f"http://example.org:{port}/p")) as r:
                assert r.status_code == 200
            # The file's allow rule admits its private host (dialled, stopped by the
            # recording network backend); its deny rule and the built-in table still refuse.
            with pytest.raises(httpcore.ConnectError):
                async with client.stream(target_of(client, "http://wiki.corp.example.org/")):
                    pass
    assert policy.connect_timeout_s == pytest.approx(0.7)
    assert policy.allow_http
    denied = policy.judge_url("https://a.blocked.example.org/")
    assert isinstance(denied, Denial)
    assert denied.refusal is Refusal.DENY_RULE
    assert "ops@example.org" in str(server.requests[0].header("user-agent"))
    assert network_backend.attempts == [
        (ipaddress.ip_address("127.0.0.1"), port),
        (ipaddress.ip_address("10.1.1.1"), 80),
    ]
