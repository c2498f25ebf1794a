"""Building a rypsok that fetches from local sites through the production egress policy.

Each site listens on its own loopback address (127.0.0.1, 127.0.0.2, ...) and an ephemeral
port. The test resolver maps the site's name to its address; the connector, below the
policy, carries a connection to the URL's port (80 or 443, the ones the policy judged) to
the site's real port on that address, and records every attempt. A test reaches its sites
only through allow rules it adds in code (REQ-TEST-005). TLS sites present a certificate
for their name from a throw-away authority that only the client of the test trusts.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from typing import TYPE_CHECKING, Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from rypsok.config.load import load_config_text
from rypsok.core.egress.testing import MapResolver, RecordingConnector
from rypsok.core.services import FetchNetwork, Rypsok

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import trio

    from rypsok.config.schema import Config
    from rypsok.core.egress.ranges import Address

__all__ = ["Authority", "PortMap", "fetch_config", "fetching_rypsok"]


class PortMap:
    """A connector that sends (address, judged port) to the site listening on the address."""

    def __init__(self, ports: Mapping[str, int]) -> None:
        self.ports = {ipaddress.ip_address(a): p for a, p in ports.items()}
        self.recording = RecordingConnector()

    @property
    def attempts(self) -> list[tuple[Address, int]]:
        return self.recording.attempts

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        return await self.recording.connect(address, self.ports.get(address, port))


class Authority:
    """A throw-away certificate authority and the server contexts it signs."""

    def __init__(self) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rypsok test authority")])
        now = datetime.datetime.now(datetime.UTC)
        self._name = name
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(
            cadata=self.cert.public_bytes(serialization.Encoding.PEM).decode()
        )
        return context

    def server_context(self, *names: str) -> ssl.SSLContext:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(
                x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        import tempfile

        with tempfile.NamedTemporaryFile() as cert_file, tempfile.NamedTemporaryFile() as key_file:
            cert_file.write(cert.public_bytes(serialization.Encoding.PEM))
            cert_file.flush()
            key_file.write(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
            key_file.flush()
            context.load_cert_chain(cert_file.name, key_file.name)
        return context


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
    connector = PortMap(ports)
    resolver = MapResolver(answers)
    network = FetchNetwork(
        extra_allow=tuple(sites) if allow is None else tuple(allow),
        resolver=resolver,
        connector=connector,
        ssl_context=authority.client_context() if authority is not None else None,
    )
    return Rypsok(config, engines=list(engines), fetch_network=network), connector, resolver
