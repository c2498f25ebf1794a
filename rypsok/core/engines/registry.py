"""The registry: configured engines resolved to drivers (REQ-ENG-003, REQ-ENG-004, REQ-OPS-003).

An engine whose key cannot be read is inactive (disabled_reason no_credential), not an
error: the process starts with the engines it can use and says which it cannot. The key is
read once, at startup, by `rypsok.config.secrets.engine_credential`, the function `check`
uses too, so that `check` and `serve` say the same of every engine. No message or log line
carries the key; the log names the variable only when it looks like a variable name.

Implements REQ-STATUS-001, REQ-STATUS-002, REQ-OBS-001, REQ-MAIN-004, LIM-S13 and LIM-G1.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import attrs
import trio

from rypsok.config.messages import ConfigError
from rypsok.config.schema import EngineConfig
from rypsok.config.secrets import engine_credential
from rypsok.core.engines.arxiv import ArxivEngine
from rypsok.core.engines.base import Engine
from rypsok.core.engines.brave import BraveEngine
from rypsok.core.engines.circuit import Circuit
from rypsok.core.engines.crossref import CrossrefEngine
from rypsok.core.engines.duckduckgo import DuckDuckGoEngine
from rypsok.core.engines.hackernews import HackerNewsEngine
from rypsok.core.engines.latency import LatencyWindow
from rypsok.core.engines.recent import RecentRequests
from rypsok.core.engines.searxng import SearxngEngine
from rypsok.core.engines.stackexchange import StackExchangeEngine
from rypsok.core.engines.wikipedia import WikipediaEngine
from rypsok.core.model import (
    Category,
    DisabledReason,
    EngineState,
    EngineStatus,
    RecentFailures,
)
from rypsok.core.pacing import EngineLimiter
from rypsok.core.telemetry import log
from rypsok.shared.drivers import DRIVER_TYPES as TRAITS
from rypsok.shared.drivers import SHIPPED_TYPES

if TYPE_CHECKING:
    from collections.abc import Mapping

    from rypsok.config.schema import Config
    from rypsok.core.engines.client import EngineClient
    from rypsok.shared.secret import Secret

__all__ = [
    "DRIVER_TYPES",
    "RegisteredEngine",
    "Registry",
    "RegistryError",
    "active_entry",
    "build_registry",
    "status_entries",
]

# The types this release has a driver for, from the one table of driver types.
DRIVER_TYPES: Final = SHIPPED_TYPES
_VARIABLE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")


class RegistryError(ConfigError):
    """A configured engine that no driver can serve; the message names keys, not values.

    A configuration error: `serve` reports it as it reports one the loader found, and exits
    with the configuration's status, never with an uncaught exception."""


@attrs.frozen(kw_only=True)
class RegisteredEngine:
    """One `[engines.<id>]` table as the process uses it.

    `engine`, `circuit`, `limiter`, `latency` and `recent` are set for an active engine and
    None for one that is disabled or inactive.
    """

    id: str
    config: EngineConfig
    engine: Engine | None
    disabled_reason: DisabledReason | None
    credential_state: str
    circuit: Circuit | None = None
    limiter: EngineLimiter | None = None
    latency: LatencyWindow | None = None
    recent: RecentRequests | None = None

    @property
    def active(self) -> bool:
        return self.engine is not None


@attrs.frozen(kw_only=True)
class Registry:
    entries: tuple[RegisteredEngine, ...]  # in configuration order

    def active(self) -> tuple[RegisteredEngine, ...]:
        return tuple(e for e in self.entries if e.engine is not None)

    def get(self, engine_id: str) -> RegisteredEngine | None:
        return next((e for e in self.entries if e.id == engine_id), None)

    def served_categories(self) -> tuple[Category, ...]:
        """The categories of the active engines, in the order of the Category enumeration."""
        served = {c for e in self.active() for c in e.config.categories}
        return tuple(c for c in Category if c in served)


def _inactive_fields(cfg: EngineConfig) -> dict[str, object]:
    fields: dict[str, object] = {"engine": cfg.id, "reason": str(DisabledReason.NO_CREDENTIAL)}
    if cfg.api_key_env is not None and _VARIABLE.match(cfg.api_key_env):
        fields["variable"] = cfg.api_key_env
    if cfg.api_key_file is not None:
        fields["source"] = "api_key_file"
    return fields


def _inactive(cfg: EngineConfig, reason: DisabledReason, state: str) -> RegisteredEngine:
    return RegisteredEngine(
        id=cfg.id, config=cfg, engine=None, disabled_reason=reason, credential_state=state
    )


def active_entry(cfg: EngineConfig, engine: Engine, state: str, config: Config) -> RegisteredEngine:
    """`engine` serving `cfg`'s table: a fresh circuit, a limiter built from the engine's own
    admission record, and empty latency and recent-request windows."""
    return RegisteredEngine(
        id=cfg.id,
        config=cfg,
        engine=engine,
        disabled_reason=None,
        credential_state=state,
        circuit=Circuit.from_config(cfg.id, config.resilience),
        limiter=EngineLimiter(
            engine.record, per_engine_in_flight=config.limits.per_engine_in_flight
        ),
        latency=LatencyWindow(),
        recent=RecentRequests(),
    )


def build_registry(
    config: Config,
    env: Mapping[str, str],
    *,
    http: EngineClient,
    parse_permits: trio.CapacityLimiter | None = None,
) -> Registry:
    """Resolve every configured engine; raises RegistryError for a type without a driver.

    `parse_permits` are the process's parsing permits (LIM-C5), shared with the fetch
    pipeline; a scraping driver parses its pages under them.
    """
    if parse_permits is None:
        parse_permits = trio.CapacityLimiter(config.limits.parsing_in_flight)
    entries = []
    for cfg in config.engines:
        traits = TRAITS.get(cfg.type)
        if traits is None:
            raise RegistryError(f"engines.{cfg.id}.type: no driver of that type")
        if traits.scrapes and not config.scraping.enabled:
            raise RegistryError(
                f"engines.{cfg.id}.type: a scraping driver needs [scraping] enabled = true"
            )
        if not cfg.enabled:
            entries.append(
                _inactive(
                    cfg, DisabledReason.DISABLED, "disabled by configuration; no credential read"
                )
            )
            continue
        engine: Engine
        credential = engine_credential(cfg, env)
        state = credential.state
        if credential.needed and credential.secret is None:
            log("warn", "engine_inactive", **_inactive_fields(cfg))
            entries.append(_inactive(cfg, DisabledReason.NO_CREDENTIAL, state))
            continue
        try:
            engine = _driver(cfg, config, http, credential.secret, parse_permits)
        except ValueError as exc:
            # The configuration's rules admit only what a driver can serve; a driver that
            # still refuses is reported as the configuration error it is (its message names
            # the key, never the value).
            raise RegistryError(f"engines.{cfg.id}: {exc}") from None
        entries.append(active_entry(cfg, engine, state, config))
    return Registry(entries=tuple(entries))


def _recent(entry: RegisteredEngine) -> RecentFailures | None:
    """The engine's recent failures once it made a request; None before (the field is then
    absent, and a fresh engine's status reads as the book's examples show it)."""
    if entry.recent is None:
        return None
    failures = entry.recent.failures()
    return failures if failures.requests else None


def _driver(
    cfg: EngineConfig,
    config: Config,
    http: EngineClient,
    secret: Secret | None,
    parse_permits: trio.CapacityLimiter,
) -> Engine:
    """The driver of one enabled engine; ValueError when its configuration cannot be served."""
    if cfg.type == "brave":
        assert secret is not None
        return BraveEngine(cfg.id, http, secret, cfg.endpoint)
    if cfg.type == "duckduckgo":
        # The operator's switch covers this engine: say so at every start (Tutorial 5).
        log("warn", "scraping_enabled", engine=cfg.id, type=cfg.type)
        return DuckDuckGoEngine(cfg.id, http, parse_permits)
    if cfg.type == "searxng":
        assert cfg.base_url is not None  # required by the configuration
        return SearxngEngine(cfg.id, http, cfg.base_url, secret)
    if cfg.type == "stackexchange":
        return StackExchangeEngine(
            cfg.id, http, site=cfg.site, api_key=secret, base_url=cfg.base_url
        )
    if cfg.type == "arxiv":
        return ArxivEngine(cfg.id, http, base_url=cfg.base_url)
    if cfg.type == "hackernews":
        return HackerNewsEngine(cfg.id, http, base_url=cfg.base_url)
    if cfg.type == "crossref":
        return CrossrefEngine(
            cfg.id, http, contact=config.service.user_agent_contact, base_url=cfg.base_url
        )
    return WikipediaEngine(cfg.id, http, cfg.base_url)


def status_entries(registry: Registry) -> tuple[EngineStatus, ...]:
    """engine_status's list: identifier order; a reason only for a disabled engine.

    It takes no time: an open circuit stays open until the first call after its cooldown,
    so the state does not depend on when it is read.
    """
    out = []
    for entry in sorted(registry.entries, key=lambda e: e.id):
        if entry.engine is None or entry.circuit is None or entry.latency is None:
            out.append(
                EngineStatus(
                    id=entry.id,
                    state=EngineState.DISABLED,
                    latency_ms=None,
                    reason=entry.disabled_reason or DisabledReason.DISABLED,
                )
            )
            continue
        out.append(
            EngineStatus(
                id=entry.id,
                state=entry.circuit.state(),
                latency_ms=entry.latency.median_ms(),
                recent_failures=_recent(entry),
            )
        )
    return tuple(out)
