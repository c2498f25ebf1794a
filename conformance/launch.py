"""`python -m conformance.launch --config FILE --route HOST=PORT ...`: rypsok over stdio (or
`--transport http`) with
its engines routed to local fixture servers, built by the same serve code as `rypsok serve`.
"""

from __future__ import annotations

import argparse
import os
import sys

from conformance.instant import InstantEngine
from conformance.routing import RoutingTransport
from rypsok.config.load import load_config
from rypsok.core import telemetry
from rypsok.mcp.stdio import run_stdio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.launch")
    parser.add_argument("--config", required=True)
    parser.add_argument("--route", action="append", default=[], metavar="HOST=PORT")
    parser.add_argument(
        "--instant-engine", action="append", default=[], metavar="ID",
        help="replace this engine's driver by one answering from memory (the bench)",
    )  # fmt: skip
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
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
    if args.transport == "http":
        from rypsok.mcp.listener import run_http

        return run_http(config, env, engine_transport=RoutingTransport(routes), engines=engines)
    return run_stdio(config, env, engine_transport=RoutingTransport(routes), engines=engines)


if __name__ == "__main__":
    sys.exit(main())
