"""`python -m conformance.launch --config FILE --route HOST=PORT ...`: rypsok over stdio with
its engines routed to local fixture servers, built by the same serve code as `rypsok serve`.

`--fetch-site HOST=PORT --fetch-ca FILE` lets web_fetch read the fixture site: HOST resolves
to 127.0.0.1 and is admitted by an allow rule added in code (the production policy
otherwise), a connection to HOST's port 443 goes to PORT on loopback, and the site's TLS
certificate is checked against FILE alone.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import ssl
import sys
from typing import TYPE_CHECKING

from conformance.instant import InstantEngine
from conformance.routing import RoutingTransport
from rypsok.config.load import load_config
from rypsok.core import telemetry
from rypsok.core.egress import TcpConnector
from rypsok.core.egress.testing import MapResolver
from rypsok.core.services import FetchNetwork
from rypsok.mcp.stdio import run_stdio

if TYPE_CHECKING:
    import trio

    from rypsok.core.egress.ranges import Address

LOOPBACK = "127.0.0.1"


class LoopbackPorts:
    """Connects only to 127.0.0.1, with the HTTPS port replaced by the fixture site's."""

    def __init__(self, https_port: int) -> None:
        self._https_port = https_port
        self._inner = TcpConnector()

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        if address != ipaddress.ip_address(LOOPBACK):
            raise OSError("the conformance harness connects to loopback only")
        return await self._inner.connect(address, self._https_port if port == 443 else port)


def _fetch_network(site: str | None, ca_file: str | None) -> FetchNetwork | None:
    if site is None or ca_file is None:
        return None
    host, _, port = site.partition("=")
    return FetchNetwork(
        extra_allow=(host,),
        resolver=MapResolver({host: [LOOPBACK]}),
        connector=LoopbackPorts(int(port)),
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
    parser.add_argument("--fetch-site", metavar="HOST=PORT")
    parser.add_argument("--fetch-ca", metavar="FILE")
    args = parser.parse_args(argv)
    routes = {}
    for route in args.route:
        host, _, port = route.partition("=")
        routes[host] = int(port)
    env = dict(os.environ)
    config = load_config(args.config, env)
    telemetry.install_excepthook()
    telemetry.configure(config.logging.level, config.logging.log_queries)
    engines = [InstantEngine(engine_id) for engine_id in args.instant_engine] or None
    return run_stdio(
        config,
        env,
        engine_transport=RoutingTransport(routes),
        engines=engines,
        fetch_network=_fetch_network(args.fetch_site, args.fetch_ca),
    )


if __name__ == "__main__":
    sys.exit(main())
