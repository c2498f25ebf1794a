"""Engines on the process's one outbound stack: the connect-time egress judgment.

An engine dials only what its configured endpoint admits, judged on the address actually
dialled: a default endpoint must resolve to a public address, a host the operator wrote in
a `base_url` (or a loopback address) is admitted as written. And no engine or page request
opens a connection any other way than through the egress backend.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
import trio
from search_fakes import capture_logs

from rypsok.config.load import load_config_text
from rypsok.core.egress import backend as egress_backend
from rypsok.core.egress.testing import MapResolver, RecordingBackend
from rypsok.core.engines.base import EngineFailure
from rypsok.core.engines.client import EngineClient, EngineOrigin
from rypsok.core.model import FetchRequest, Reason, SearchRequest
from rypsok.core.services import FetchNetwork, Rypsok
from testkit.mediawiki import FixtureWiki
from testkit.servers import Reply, serve_http

MIB = 1024 * 1024


async def _refused(http: EngineClient, origin: EngineOrigin) -> Reason:
    with pytest.raises(EngineFailure) as caught:
        await http.get(origin, "/search", params=[("q", "x")], headers={}, max_bytes=MIB)
    return caught.value.failure_class


@pytest.mark.parametrize("address", ["10.0.0.5", "127.0.0.1", "169.254.169.254", "::1", "fc00::1"])
async def test_req_sec_005_a_default_endpoint_resolving_off_the_internet_is_never_dialled(
    address: str,
) -> None:
    # A provider's name answered with a private or loopback address (a rebinding resolver,
    # a hostile network): the engine is refused before any connection is attempted.
    resolver = MapResolver({"api.provider-of-search.net": [address]})
    network_backend = RecordingBackend()
    async with EngineClient(resolver=resolver, network_backend=network_backend) as http:
        origin = EngineOrigin(scheme="https", host="api.provider-of-search.net")
        assert await _refused(http, origin) is Reason.REQUEST_FAILURE
    assert resolver.lookups == ["api.provider-of-search.net"]
    assert network_backend.attempts == []


async def test_req_sec_005_a_public_address_of_a_default_endpoint_is_dialled() -> None:
    resolver = MapResolver({"api.provider-of-search.net": ["93.184.215.14"]})
    network_backend = RecordingBackend()  # refuses off loopback: the attempt is what is asserted
    async with EngineClient(resolver=resolver, network_backend=network_backend) as http:
        origin = EngineOrigin(scheme="https", host="api.provider-of-search.net")
        assert await _refused(http, origin) is Reason.REQUEST_FAILURE
    assert network_backend.attempts == [(ipaddress.ip_address("93.184.215.14"), 443)]


async def test_req_sec_005_a_host_the_operator_wrote_is_dialled_at_its_private_address() -> None:
    # A SearXNG instance on the operator's own network, named in its base_url.
    resolver = MapResolver({"searx.internal.example.net": ["10.0.0.5"]})
    network_backend = RecordingBackend()
    async with EngineClient(
        resolver=resolver,
        network_backend=network_backend,
        operator_hosts=["searx.internal.example.net"],
    ) as http:
        origin = EngineOrigin(scheme="https", host="searx.internal.example.net")
        await _refused(http, origin)  # the recording network backend stops at the attempt
    assert network_backend.attempts == [(ipaddress.ip_address("10.0.0.5"), 443)]


async def test_req_sec_005_from_config_the_base_url_hosts_are_the_operators() -> None:
    config = load_config_text(
        'config_version = 1\n[engines.wiki]\ntype = "wikipedia"\ncategories = ["general"]\n'
        'base_url = "https://wiki.internal.example.net/w"\n',
        {},
    )
    resolver = MapResolver({"wiki.internal.example.net": ["10.1.2.3"]})
    network_backend = RecordingBackend()
    http = EngineClient.from_config(config)
    written = EngineClient(
        resolver=resolver, network_backend=network_backend, operator_hosts=http._operator_hosts
    )
    async with written:
        await _refused(written, EngineOrigin(scheme="https", host="wiki.internal.example.net"))
    await http.aclose()
    assert network_backend.attempts == [(ipaddress.ip_address("10.1.2.3"), 443)]


async def test_req_sec_005_engines_and_pages_open_every_connection_through_the_egress_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every TCP connection the process opens during a search and a fetch is counted twice:
    # by Trio (anything at all) and by the egress backend's network_backend. They must agree.
    opened: list[tuple[str, int]] = []
    dialled: list[tuple[str, int]] = []
    real_open = trio.open_tcp_stream

    async def counting_open(host: Any, port: int, **kwargs: Any) -> trio.SocketStream:
        opened.append((str(host), port))
        return await real_open(host, port, **kwargs)

    real_connect = egress_backend.TcpBackend.connect

    async def counting_connect(self: Any, address: Any, port: int) -> trio.abc.Stream:
        dialled.append((str(address), port))
        return await real_connect(self, address, port)

    monkeypatch.setattr(trio, "open_tcp_stream", counting_open)
    monkeypatch.setattr(egress_backend.TcpBackend, "connect", counting_connect)
    wiki = FixtureWiki()
    page = Reply(
        headers=(("Content-Type", "text/html; charset=utf-8"),),
        body=b"<html><head><title>Rust</title></head><body><main><h1>Rust</h1>"
        + b"<p>A language empowering everyone to build reliable software.</p>" * 5
        + b"</main></body></html>",
    )
    async with trio.open_nursery() as nursery, serve_http({"/page": page}) as site:
        wiki_port = await nursery.start(wiki.serve)
        config = load_config_text(
            'config_version = 1\n[egress]\nallow_http = true\nallow = ["127.0.0.1"]\n'
            f"[fetch]\nports = [80, 443, {site.port}]\n"
            '[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general"]\n'
            f'base_url = "http://127.0.0.1:{wiki_port}/w"\n',
            {},
        )
        network = FetchNetwork(extra_allow=("127.0.0.1",))
        with capture_logs():
            async with Rypsok(config, env={}, fetch_network=network) as service:
                found = await service.search(SearchRequest(query="rust"))
                read = await service.fetch(FetchRequest(url=f"{site.url}/page"))
        nursery.cancel_scope.cancel()
    assert found.results
    assert "empowering" in read.content
    assert len(dialled) >= 2  # the engine, and the page (with its robots.txt)
    assert sorted(opened) == sorted(dialled)
