"""The egress component: one policy, two profiles, judged on the URL and at every connect.

Modules: `vocabulary` (refusal classes), `ranges` (the address table), `names` (reading a
host), `policy` (the profiles and their judgments), `backend` (the httpcore network backend
that resolves, judges and connects), `trust` (the system trust store and each client's TLS
context), `clients` (the fetch client and the pool every client sends through).

The names below load their module when first used: the trust store and the engine
profile are read at start, the backend and the fetch client only by the first fetch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rypsok.shared.lazy import lazy_attributes

if TYPE_CHECKING:
    from rypsok.core.egress.backend import (
        EgressBackend,
        EgressRefused,
        NetworkBackend,
        Resolver,
        SystemResolver,
        TcpBackend,
    )
    from rypsok.core.egress.clients import FetchClient, build_fetch_client
    from rypsok.core.egress.policy import AdmittedURL, Denial, EgressPolicy, engine_origin_refusal
    from rypsok.core.egress.trust import ClientBuildError, trust_store_context
    from rypsok.core.egress.vocabulary import Refusal, detail_reason

__all__ = [
    "AdmittedURL",
    "ClientBuildError",
    "Denial",
    "EgressBackend",
    "EgressPolicy",
    "EgressRefused",
    "FetchClient",
    "NetworkBackend",
    "Refusal",
    "Resolver",
    "SystemResolver",
    "TcpBackend",
    "build_fetch_client",
    "detail_reason",
    "engine_origin_refusal",
    "trust_store_context",
]

_HOMES = {
    "NetworkBackend": "backend",
    "EgressBackend": "backend",
    "EgressRefused": "backend",
    "Resolver": "backend",
    "SystemResolver": "backend",
    "TcpBackend": "backend",
    "FetchClient": "clients",
    "build_fetch_client": "clients",
    "ClientBuildError": "trust",
    "trust_store_context": "trust",
    "Denial": "policy",
    "EgressPolicy": "policy",
    "AdmittedURL": "policy",
    "engine_origin_refusal": "policy",
    "Refusal": "vocabulary",
    "detail_reason": "vocabulary",
}

__getattr__ = lazy_attributes(__name__, _HOMES)
