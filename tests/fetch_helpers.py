"""Building a rypsok that fetches from local sites through the production egress policy.

Each site listens on its own loopback address (127.0.0.1, 127.0.0.2, ...) and an ephemeral
port. The test resolver maps the site's name to its address; the network backend, below the
policy, carries a connection to the URL's port (80 or 443, the ones the policy judged) to
the site's real port on that address, and records every attempt. A test reaches its sites
only through allow rules it adds in code (REQ-TEST-005). TLS sites present a certificate
for their name from a throw-away authority that only the client of the test trusts.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from rypsok.config.load import load_config_text
from rypsok.core.egress import AdmittedURL, EgressPolicy, build_fetch_client
from rypsok.core.egress.testing import MapResolver, RecordingBackend
from rypsok.core.services import FetchNetwork, Rypsok
from testkit.authority import Authority

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import trio

    from rypsok.config.schema import Config
    from rypsok.core.egress import FetchClient
    from rypsok.core.egress.ranges import Address

__all__ = [
    "Authority",
    "PortMap",
    "fetch_config",
    "fetching_rypsok",
    "loopback_client",
    "target_of",
]


class PortMap:
    """A network backend that sends (address, judged port) to the site listening on the address."""

    def __init__(self, ports: Mapping[str, int]) -> None:
        self.ports = {ipaddress.ip_address(a): p for a, p in ports.items()}
        self.recording = RecordingBackend()

    @property
    def attempts(self) -> list[tuple[Address, int]]:
        return self.recording.attempts

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        return await self.recording.connect(address, self.ports.get(address, port))


def loopback_client(
    port: int,
    network_backend: RecordingBackend | None = None,
    *,
    names: Mapping[str, Sequence[str]] | None = None,
) -> FetchClient:
    """The fetch client alone, with example.org at 127.0.0.1 (and `names` too), plain http
    admitted and `port` allowed besides 80 and 443: for a test server on loopback."""
    policy = EgressPolicy(allow_http=True, ports=frozenset({80, 443, port})).with_allow("127.0.0.1")
    return build_fetch_client(
        policy,
        user_agent="rypsok/0 (+test)",
        resolver=MapResolver({"example.org": ["127.0.0.1"], **(names or {})}),
        network_backend=network_backend if network_backend is not None else RecordingBackend(),
    )


def target_of(client: FetchClient, url: str) -> AdmittedURL:
    """`url` as the client's policy admits it (the test fails when it refuses)."""
    target = client.policy.judge_url(url)
    assert isinstance(target, AdmittedURL)
    return target


def fetch_config(toml: str = "", **_: Any) -> Config:
    """A configuration with no engine reachable (fetch tests never search) plus `toml`."""
    return load_config_text("config_version = 1\n" + toml, {})


def fetching_rypsok(
    config: Config,
    sites: Mapping[str, Any],
    *,
    allow: Sequence[str] | None = None,
    names: Mapping[str, str] | None = None,
    authority: Authority | None = None,
    engines: Sequence[Any] = (),
) -> tuple[Rypsok, PortMap, MapResolver]:
    """A Rypsok whose fetches reach `sites` ({host name: Site}) and nothing else.

    `allow` defaults to the sites' names (added in code, never in the file); `names` maps
    more names to addresses (a name that resolves to a refused address, say).
    """
    answers: dict[str, list[str]] = {name: [site.address] for name, site in sites.items()}
    for name, address in (names or {}).items():
        answers[name] = [address]
    ports = {site.address: site.port for site in sites.values()}
    network_backend = PortMap(ports)
    resolver = MapResolver(answers)
    network = FetchNetwork(
        extra_allow=tuple(sites) if allow is None else tuple(allow),
        resolver=resolver,
        network_backend=network_backend,
        ssl_context=authority.client_context() if authority is not None else None,
    )
    return Rypsok(config, engines=list(engines), fetch_network=network), network_backend, resolver
