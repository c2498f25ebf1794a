"""The egress component: one policy, two profiles, judged on the URL and at every connect.

Modules: `vocabulary` (refusal classes), `ranges` (the address table), `names` (reading a
host), `policy` (the profiles and their judgments), `backend` (the httpcore network backend
that resolves, judges and connects), `clients` (the trust store and the fetch client).
"""

from rypsok.core.egress.backend import (
    Connector,
    EgressBackend,
    EgressRefused,
    Resolver,
    SystemResolver,
    TcpConnector,
)
from rypsok.core.egress.clients import (
    ClientBuildError,
    FetchClient,
    build_fetch_client,
    build_fetch_client_from_config,
    system_trust_context,
)
from rypsok.core.egress.policy import Denial, EgressPolicy, Target, engine_origin_refusal
from rypsok.core.egress.vocabulary import Refusal, detail_reason

__all__ = [
    "ClientBuildError",
    "Connector",
    "Denial",
    "EgressBackend",
    "EgressPolicy",
    "EgressRefused",
    "FetchClient",
    "Refusal",
    "Resolver",
    "SystemResolver",
    "Target",
    "TcpConnector",
    "build_fetch_client",
    "build_fetch_client_from_config",
    "detail_reason",
    "engine_origin_refusal",
    "system_trust_context",
]
