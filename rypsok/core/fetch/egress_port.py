"""How a process reaches the sites it fetches: the egress component's pieces, with the edges a
test, the conformance harness or an embedding host may replace.

The policy stays the production one (REQ-TEST-005): `extra_allow` only adds allow rules in
code, in the syntax of `[egress] allow`; `resolver` and `network_backend` replace the name lookup
and the socket below the policy; `ssl_context` the trust store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

# FetchNetwork's field types are names only: attrs never evaluates them, and importing
# them here would load the fetch client with every process that never fetches.
if TYPE_CHECKING:
    import ssl  # noqa: TC004

    from rypsok.config.schema import Config
    from rypsok.core.egress import EgressPolicy, FetchClient, NetworkBackend, Resolver  # noqa: TC004

__all__ = ["FetchNetwork", "build_fetch_egress"]


@attrs.frozen(kw_only=True)
class FetchNetwork:
    extra_allow: tuple[str, ...] = ()
    resolver: Resolver | None = None
    network_backend: NetworkBackend | None = None
    ssl_context: ssl.SSLContext | None = None


def build_fetch_egress(
    config: Config, network: FetchNetwork, *, user_agent: str
) -> tuple[EgressPolicy, FetchClient]:
    # The backend and the fetch client (httpcore among them) load with the first fetch.
    from rypsok.core.egress import EgressPolicy, build_fetch_client

    policy = EgressPolicy.from_config(config, extra_allow=network.extra_allow)
    client = build_fetch_client(
        policy,
        user_agent=user_agent,
        resolver=network.resolver,
        network_backend=network.network_backend,
        ssl_context=network.ssl_context,
        # One connection per fetch in flight, and one for its robots.txt read.
        max_connections=2 * config.limits.fetches_in_flight,
        deadline_s=config.fetch.deadline_ms / 1000,
    )
    return policy, client
