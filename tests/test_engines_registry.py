"""The registry: drivers for configured engines, credentials by reference, engine_status."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

import attrs
import pytest

from rypsok.config.schema import Config, EngineConfig, LimitsConfig, ScrapingConfig
from rypsok.core import telemetry
from rypsok.core.engines.brave import BraveEngine
from rypsok.core.engines.client import EngineClient
from rypsok.core.engines.registry import RegistryError, build_registry, status_entries
from rypsok.core.engines.wikipedia import WikipediaEngine
from rypsok.core.model import Category, DisabledReason, EngineState, Reason

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

KEY = "BSA-secret-value-0123456789"


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    telemetry.configure("debug", stream=stream)
    try:
        yield stream
    finally:
        telemetry.configure()


def _records(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def _http() -> EngineClient:
    return EngineClient()


def test_req_ops_003_defaults_wikipedia_active_brave_inactive_without_key(
    log_stream: io.StringIO,
) -> None:
    registry = build_registry(Config(), {}, http=_http())
    wiki, brave = registry.entries
    assert (wiki.id, brave.id) == ("wikipedia", "brave")
    assert isinstance(wiki.engine, WikipediaEngine)
    assert wiki.disabled_reason is None
    assert wiki.credential_state == "no credential needed"
    assert wiki.circuit is not None
    assert wiki.limiter is not None
    assert wiki.latency is not None
    assert brave.engine is None
    assert brave.disabled_reason is DisabledReason.NO_CREDENTIAL
    assert brave.credential_state == (
        "inactive: environment variable BRAVE_API_KEY is unset or empty"
    )
    assert brave.circuit is None
    inactive = [r for r in _records(log_stream) if r["event"] == "engine_inactive"]
    assert len(inactive) == 1
    assert inactive[0]["engine"] == "brave"
    assert inactive[0]["variable"] == "BRAVE_API_KEY"


def test_req_cfg_004_key_from_the_environment_is_used_and_never_shown(
    log_stream: io.StringIO,
) -> None:
    registry = build_registry(Config(), {"BRAVE_API_KEY": f"  {KEY}\n"}, http=_http())
    brave = registry.entries[1]
    assert isinstance(brave.engine, BraveEngine)
    assert brave.credential_state == "credential resolved"
    assert brave.disabled_reason is None
    everything = repr(registry) + log_stream.getvalue()
    assert KEY not in everything


def test_req_cfg_004_an_empty_variable_is_no_credential() -> None:
    registry = build_registry(Config(), {"BRAVE_API_KEY": "   "}, http=_http())
    assert registry.entries[1].disabled_reason is DisabledReason.NO_CREDENTIAL


def _brave_config(**kw: str) -> Config:
    return Config(
        engines=(EngineConfig(id="brave", type="brave", categories=(Category.NEWS,), **kw),)
    )


def test_req_cfg_004_key_from_a_file_is_trimmed(tmp_path: Path, log_stream: io.StringIO) -> None:
    path = tmp_path / "brave.key"
    path.write_text(f"\n{KEY}  \n")
    registry = build_registry(_brave_config(api_key_file=str(path)), {}, http=_http())
    entry = registry.entries[0]
    assert isinstance(entry.engine, BraveEngine)
    assert entry.credential_state == "credential resolved"
    assert KEY not in log_stream.getvalue() + repr(registry)


def test_req_cfg_004_an_unreadable_file_makes_the_engine_inactive(
    tmp_path: Path, log_stream: io.StringIO
) -> None:
    missing = tmp_path / "secret-dir" / "nope.key"
    registry = build_registry(_brave_config(api_key_file=str(missing)), {}, http=_http())
    entry = registry.entries[0]
    assert entry.engine is None
    assert entry.disabled_reason is DisabledReason.NO_CREDENTIAL
    assert entry.credential_state == "inactive: credential file: the file does not exist"
    assert "secret-dir" not in log_stream.getvalue()
    empty = tmp_path / "empty.key"
    empty.write_text(" \n")
    entry = build_registry(_brave_config(api_key_file=str(empty)), {}, http=_http()).entries[0]
    assert entry.credential_state == "inactive: the credential file is empty"


def test_req_eng_003_a_disabled_engine_is_disabled_and_its_key_not_read() -> None:
    config = Config(
        engines=(
            EngineConfig(id="wiki", type="wikipedia", categories=(Category.SCIENCE,)),
            EngineConfig(
                id="brave",
                type="brave",
                categories=(Category.GENERAL,),
                enabled=False,
                api_key_env="BRAVE_API_KEY",
            ),
        )
    )
    registry = build_registry(config, {"BRAVE_API_KEY": KEY}, http=_http())
    entry = registry.entries[1]
    assert entry.engine is None
    assert entry.disabled_reason is DisabledReason.DISABLED
    assert registry.served_categories() == (Category.SCIENCE,)


def test_req_eng_004_entries_keep_configuration_order_and_categories_follow_the_enum() -> None:
    config = Config(
        engines=(
            EngineConfig(id="zeta", type="wikipedia", categories=(Category.SCIENCE,)),
            EngineConfig(
                id="alpha",
                type="brave",
                categories=(Category.NEWS, Category.GENERAL),
                endpoint="news",
                api_key_env="K",
            ),
            EngineConfig(id="mid", type="wikipedia", categories=(Category.CODE,), enabled=False),
        )
    )
    registry = build_registry(config, {"K": KEY}, http=_http())
    assert [e.id for e in registry.entries] == ["zeta", "alpha", "mid"]
    assert registry.served_categories() == (Category.GENERAL, Category.NEWS, Category.SCIENCE)
    alpha = registry.get("alpha")
    assert alpha is not None
    assert isinstance(alpha.engine, BraveEngine)
    assert alpha.engine.endpoint == "news"


def test_req_eng_004_a_type_without_driver_is_refused() -> None:
    config = Config(engines=(EngineConfig(id="x", type="google", categories=(Category.GENERAL,)),))
    with pytest.raises(RegistryError, match=r"engines\.x\.type"):
        build_registry(config, {}, http=_http())


def test_req_eng_013_duckduckgo_runs_only_behind_the_switch_and_says_so(
    log_stream: io.StringIO,
) -> None:
    engines = (EngineConfig(id="ddg", type="duckduckgo", categories=(Category.GENERAL,)),)
    with pytest.raises(RegistryError, match="scraping"):
        build_registry(Config(engines=engines), {}, http=_http())
    assert not [r for r in _records(log_stream) if r["event"] == "scraping_enabled"]
    config = Config(engines=engines, scraping=ScrapingConfig(enabled=True))
    entry = build_registry(config, {}, http=_http()).entries[0]
    assert entry.active
    assert entry.engine is not None
    assert entry.engine.record.scrapes
    assert entry.disabled_reason is None
    logged = [r for r in _records(log_stream) if r["event"] == "scraping_enabled"]
    assert len(logged) == 1
    assert logged[0]["engine"] == "ddg"
    assert logged[0]["level"] == "warn"


def test_req_eng_013_duckduckgo_is_never_in_the_default_set() -> None:
    registry = build_registry(Config(), {"BRAVE_API_KEY": KEY}, http=_http())
    assert [e.config.type for e in registry.entries] == ["wikipedia", "brave"]


def test_req_cmp_002_each_engine_has_its_own_limiter_with_lim_c2() -> None:
    config = attrs.evolve(Config(), limits=LimitsConfig(per_engine_in_flight=1))
    registry = build_registry(config, {"BRAVE_API_KEY": KEY}, http=_http())
    wiki, brave = registry.entries
    assert wiki.limiter is not None
    assert brave.limiter is not None
    assert wiki.limiter is not brave.limiter
    assert wiki.circuit is not brave.circuit
    assert (wiki.limiter.concurrency, brave.limiter.concurrency) == (1, 1)


def test_req_status_001_engine_status_in_identifier_order_with_state_and_latency() -> None:
    config = Config(
        engines=(
            EngineConfig(id="wikipedia", type="wikipedia", categories=(Category.GENERAL,)),
            EngineConfig(
                id="brave",
                type="brave",
                categories=(Category.GENERAL,),
                api_key_env="BRAVE_API_KEY",
            ),
            EngineConfig(
                id="archive", type="wikipedia", categories=(Category.GENERAL,), enabled=False
            ),
        )
    )
    registry = build_registry(config, {}, http=_http())
    wiki = registry.get("wikipedia")
    assert wiki is not None
    assert wiki.latency is not None
    assert wiki.circuit is not None
    wiki.latency.record(0.180)
    listed = [s.to_json() for s in status_entries(registry)]
    assert listed == [
        {"id": "archive", "state": "disabled", "latency_ms": None, "reason": "disabled"},
        {"id": "brave", "state": "disabled", "latency_ms": None, "reason": "no_credential"},
        {"id": "wikipedia", "state": "closed", "latency_ms": 180},
    ]
    for _ in range(3):
        ticket = wiki.circuit.admit(0)
        assert ticket is not None
        wiki.circuit.failed(ticket, Reason.TIMEOUT, 0)
    assert status_entries(registry)[2].state is EngineState.OPEN
    probe = wiki.circuit.admit(10_000)
    assert probe is not None
    assert status_entries(registry)[2].state is EngineState.HALF_OPEN
    assert status_entries(registry)[2].reason is None


@pytest.mark.parametrize("kind", ["wikipedia", "brave", "duckduckgo"])
def test_req_eng_010_each_driver_type_has_one_set_of_traits_that_its_record_shows(
    kind: str,
) -> None:
    # The configuration and the registry read the same table; a shipped driver's admission
    # record carries the same credential, scraping and caching traits.
    from rypsok.config.drivers import DRIVER_TYPES as CONFIG_VIEW
    from rypsok.shared.drivers import DRIVER_TYPES, SHIPPED_TYPES

    traits = DRIVER_TYPES[kind]
    assert CONFIG_VIEW[kind] is traits
    cfg = EngineConfig(
        id="e", type=kind, categories=(Category.GENERAL,), api_key_env="K" if traits.keyed else None
    )
    config = Config(engines=(cfg,), scraping=ScrapingConfig(enabled=traits.scrapes))
    (entry,) = build_registry(config, {"K": KEY}, http=_http()).entries
    assert (kind in SHIPPED_TYPES) is traits.shipped is (entry.engine is not None)
    if entry.engine is not None:
        record = entry.engine.record
        assert (record.needs_credential, record.scrapes, record.cacheable) == (
            traits.keyed,
            traits.scrapes,
            traits.cacheable,
        )
