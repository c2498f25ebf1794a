"""`python -m conformance.launch --config FILE --route HOST=PORT ...`: rypsok over stdio (or
`--transport http`) with
its engines routed to local fixture servers, built by the same serve code as `rypsok serve`.

`--fetch-site HOST=PORT --fetch-ca FILE` lets web_fetch read the fixture site: HOST resolves
to 127.0.0.1 and is admitted by an allow rule added in code (the production policy
otherwise), a connection to HOST's port 443 goes to PORT on loopback, and the site's TLS
certificate is checked against FILE alone. `HOST=ADDRESS:PORT` puts a site on another
loopback address (one per site, so that four sites are four hosts).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import ssl
import sys
from typing import TYPE_CHECKING

from rypsok.config.load import load_config
from rypsok.core import telemetry
from rypsok.core.egress import TcpBackend
from rypsok.core.egress.testing import MapResolver
from rypsok.core.services import FetchNetwork, Rypsok
from rypsok.mcp.stdio import run_stdio
from rypsok.shared import own_process
from testkit.instant import InstantEngine
from testkit.provider_tls import TlsFronts

if TYPE_CHECKING:
    import trio

    from rypsok.core.egress.ranges import Address

LOOPBACK = "127.0.0.1"


class LoopbackPorts:
    """Connects only to loopback, with each site's HTTPS port replaced by its real one."""

    def __init__(self, https_ports: dict[Address, int]) -> None:
        self._https_ports = https_ports
        self._inner = TcpBackend()

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        if address not in self._https_ports:
            raise OSError("the conformance harness connects to its fixture sites only")
        return await self._inner.connect(
            address, self._https_ports[address] if port == 443 else port
        )


def _fetch_network(sites: list[str], ca_file: str | None) -> FetchNetwork | None:
    """`HOST=PORT` (on 127.0.0.1) or `HOST=ADDRESS:PORT`, one per fixture site."""
    if not sites or ca_file is None:
        return None
    answers: dict[str, list[str]] = {}
    ports: dict[Address, int] = {}
    for site in sites:
        host, _, where = site.partition("=")
        address, _, port = where.rpartition(":")
        address = address or LOOPBACK
        answers[host] = [address]
        ports[ipaddress.ip_address(address)] = int(port)
    return FetchNetwork(
        extra_allow=tuple(answers),
        resolver=MapResolver(answers),
        network_backend=LoopbackPorts(ports),
        ssl_context=ssl.create_default_context(cafile=ca_file),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.launch")
    parser.add_argument("--config", required=True)
    parser.add_argument("--route", action="append", default=[], metavar="HOST=PORT")
    parser.add_argument(
        "--instant-engine", action="append", default=[], metavar="ID",
        help="replace this engine's driver by one answering from memory (the bench)",
    )  # fmt: skip
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--fetch-site", action="append", default=[], metavar="HOST=PORT")
    parser.add_argument("--fetch-ca", metavar="FILE")
    args = parser.parse_args(argv)
    # A process of its own standing for `rypsok serve`: serving tunes it as it tunes the
    # console script's (rypsok.shared.own_process).
    own_process.claim()
    routes = {}
    for route in args.route:
        host, _, port = route.partition("=")
        routes[host] = int(port)
    env = dict(os.environ)
    config = load_config(args.config, env)
    telemetry.install_excepthook()
    telemetry.configure(config.logging.level, config.logging.log_queries)
    engines = [InstantEngine(engine_id) for engine_id in args.instant_engine] or None
    network = _fetch_network(args.fetch_site, args.fetch_ca)
    # The engines reach their fixtures through the production stack, TLS included.
    engines_network = TlsFronts(routes).engine_network if routes else None

    def service() -> Rypsok:
        return Rypsok(
            config,
            env=env,
            engine_network=engines_network,
            engines=engines,
            fetch_network=network,
        )

    if args.transport == "http":
        from rypsok.mcp.listener import run_http

        return run_http(config, env, service=service)
    return run_stdio(config, env, service=service)


if __name__ == "__main__":
    sys.exit(main())
