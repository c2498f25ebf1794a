"""The configuration schema: one frozen attrs class per table, defaults from the limits table.

Loading, range checks and messages live in `rypsok.config.load`; this module only says what
a valid configuration holds. A `Config()` built with no arguments is the configuration of
"no file at all" except for the engines, which `rypsok.config.load` fills with the two
default engines when the file has no `[engines.*]` table.
"""

from __future__ import annotations

from typing import Final, cast

import attrs

from rypsok.shared.vocabulary import Category, SafeSearch

__all__ = [
    "CacheConfig",
    "CallerConfig",
    "Config",
    "EgressConfig",
    "EngineConfig",
    "FetchConfig",
    "HttpAuthConfig",
    "HttpConfig",
    "LimitsConfig",
    "LoggingConfig",
    "PrivacyConfig",
    "ResilienceConfig",
    "ScrapingConfig",
    "SearchConfig",
    "ServiceConfig",
    "StatusConfig",
    "int_range",
    "ranged",
    "ranged_keys",
]

# The metadata key of an integer field with a fixed range: (low, high), both accepted.
_RANGE: Final = "rypsok.range"
PREFERENCE_MAX: Final = 2**32 - 1


def ranged(default: int, low: int, high: int) -> int:
    """An integer key whose range is fixed: the reader (`rypsok.config.validate`) refuses a
    value outside `low` to `high` with the message of the Configuration chapter. The range
    lives here, beside the default, so that the two are written once."""
    return attrs.field(default=default, metadata={_RANGE: (low, high)})


def int_range(cls: type, name: str) -> tuple[int, int, int]:
    """The default, the low end and the high end of a `ranged` field."""
    field = attrs.fields_dict(cls)[name]
    low, high = field.metadata[_RANGE]
    return cast("int", field.default), low, high


def ranged_keys(cls: type) -> tuple[str, ...]:
    """The `ranged` fields of a table's class, in the class's order."""
    return tuple(f.name for f in attrs.fields(cls) if _RANGE in f.metadata)


@attrs.frozen(kw_only=True)
class CallerConfig:
    id: str
    token_env: str | None = None
    token_file: str | None = None


@attrs.frozen(kw_only=True)
class HttpAuthConfig:
    callers: tuple[CallerConfig, ...] = ()


@attrs.frozen(kw_only=True)
class HttpConfig:
    bind: str = "127.0.0.1:8737"
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    legacy_revisions: bool = True
    max_connections: int = ranged(64, 1, 4096)  # LIM-H1
    max_request_bytes: int = ranged(65536, 4096, 1048576)  # LIM-H2
    idle_timeout_s: int = ranged(60, 5, 600)  # LIM-H3
    head_timeout_s: int = 10  # below idle_timeout_s
    max_streams: int = ranged(16, 1, 256)  # LIM-H4
    max_sessions: int = ranged(256, 1, 2048)  # LIM-H6
    request_timeout_s: int = 30  # LIM-H5
    auth: HttpAuthConfig = attrs.field(factory=HttpAuthConfig)


@attrs.frozen(kw_only=True)
class MetricsConfig:
    """`[service.metrics]`: the Prometheus exposition on a bind of its own (off when the
    table is absent); an operator's token by `token_env` or `token_file`, or none."""

    bind: str = "127.0.0.1:9464"
    token_env: str | None = None
    token_file: str | None = None


@attrs.frozen(kw_only=True)
class ServiceConfig:
    structured_content: bool = True
    user_agent_contact: str = ""
    shutdown_ms: int = ranged(3000, 500, 10000)  # LIM-O1
    http: HttpConfig = attrs.field(factory=HttpConfig)
    metrics: MetricsConfig | None = None


@attrs.frozen(kw_only=True)
class SearchConfig:
    languages: tuple[str, ...] = ("en",)
    region: str = "US"
    safe_search: SafeSearch = SafeSearch.MODERATE
    max_results: int = 5  # LIM-S2
    max_results_ceiling: int = ranged(20, 1, 20)  # LIM-S2
    query_max_chars: int = ranged(400, 1, 600)  # LIM-S1
    deadline_ms: int = ranged(2500, 500, 10000)  # LIM-S4
    engine_timeout_ms: int = 2000  # LIM-S5
    connect_timeout_ms: int = ranged(1000, 200, 5000)  # LIM-S12
    reserve_ms: int = ranged(200, 50, 1000)  # LIM-S6
    engines_per_request: int = ranged(8, 1, 16)  # LIM-S8
    results_per_engine: int = ranged(10, 5, 20)  # LIM-S3
    snippet_max_chars: int = ranged(300, 50, 1000)  # LIM-S9
    title_max_chars: int = ranged(150, 50, 300)  # LIM-S10
    drop_flagged_results: bool = False
    engine_attribution: bool = False


@attrs.frozen(kw_only=True)
class FetchConfig:
    max_chars: int = 3000  # LIM-F1
    max_chars_ceiling: int = ranged(20000, 500, 100000)  # LIM-F2
    max_bytes: int = ranged(5242880, 65536, 10485760)  # LIM-F3
    deadline_ms: int = ranged(10000, 1000, 30000)  # LIM-F4
    connect_timeout_ms: int = ranged(3000, 500, 10000)  # LIM-F6
    max_redirects: int = ranged(5, 0, 10)  # LIM-F7
    ports: tuple[int, ...] = (80, 443)  # LIM-F8
    robots_txt: bool = True
    follow_cross_host_redirects: bool = False
    strict_mode: bool = False
    # A PDF's reading (REQ-PDF-106; book/pdf.md).
    pdf_max_pages: int = ranged(200, 1, 2000)  # LIM-F18
    pdf_max_chars: int = ranged(250000, 10000, 2000000)  # LIM-F19
    pdf_memory_mib: int = ranged(96, 48, 1024)  # LIM-F20
    pdf_workers: int = ranged(2, 1, 8)  # LIM-C10


@attrs.frozen(kw_only=True)
class EgressConfig:
    allow_http: bool = False
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    proxy: str = ""


@attrs.frozen(kw_only=True)
class LimitsConfig:
    outbound_in_flight: int = ranged(32, 1, 256)  # LIM-C1
    per_engine_in_flight: int = ranged(2, 1, 8)  # LIM-C2
    fetches_in_flight: int = ranged(4, 1, 64)  # LIM-C3
    parsing_in_flight: int = ranged(2, 1, 16)  # LIM-C5
    web_search_per_minute: int = ranged(60, 1, 6000)  # LIM-C6
    web_fetch_per_minute: int = ranged(30, 1, 6000)  # LIM-C7
    engine_status_per_minute: int = ranged(30, 1, 6000)  # LIM-C8
    strict_mode_urls: int = ranged(10000, 100, 1000000)  # LIM-F14
    robots_cache_entries: int = ranged(1000, 10, 100000)  # LIM-F15


@attrs.frozen(kw_only=True)
class ResilienceConfig:
    failures_to_open: int = ranged(3, 1, 10)  # LIM-B1
    first_cooldown_s: int = 60  # LIM-B2
    max_cooldown_s: int = ranged(900, 10, 3600)  # LIM-B3


@attrs.frozen(kw_only=True)
class PrivacyConfig:
    secret_detection: str = "refuse"  # LIM-P1: off, warn, mask, refuse


@attrs.frozen(kw_only=True)
class LoggingConfig:
    level: str = "info"  # LIM-P2: error, warn, info, debug
    log_queries: bool = False  # LIM-P3


@attrs.frozen(kw_only=True)
class StatusConfig:
    enabled: bool = True


@attrs.frozen(kw_only=True)
class CacheConfig:
    enabled: bool = False  # LIM-K1
    ttl_s: int = ranged(300, 10, 3600)  # LIM-K2
    max_entries: int = ranged(1000, 1, 100000)  # LIM-K3
    max_entry_bytes: int = ranged(32768, 1024, 1048576)  # LIM-K4


@attrs.frozen(kw_only=True)
class ScrapingConfig:
    enabled: bool = False  # LIM-G1


@attrs.frozen(kw_only=True)
class CoordinationConfig:
    """`[coordination]`: the store several processes share (absent: none is contacted)."""

    url: str
    replicas: int  # the operator's upper bound on processes sharing the store (1-1024)
    password_env: str | None = None
    password_file: str | None = None
    key_prefix: str = "rypsok:"
    timeout_ms: int = ranged(50, 1, 5000)  # a bound on every store round trip


@attrs.frozen(kw_only=True)
class EngineConfig:
    """One `[engines.<id>]` table. Secrets are references: the value is read by the registry."""

    id: str
    type: str  # one of rypsok.shared.drivers.DRIVER_TYPES
    categories: tuple[Category, ...]
    enabled: bool = True
    preference: int = ranged(100, 0, PREFERENCE_MAX)
    api_key_env: str | None = None
    api_key_file: str | None = None
    endpoint: str = "web"  # brave: web, news
    base_url: str | None = None  # wikipedia: a private MediaWiki; API drivers: their root
    site: str = "stackoverflow"  # stackexchange: the site searched


def default_engines() -> tuple[EngineConfig, ...]:
    """The engines of a file without any `[engines.*]` table."""
    return (
        EngineConfig(
            id="wikipedia", type="wikipedia", categories=(Category.GENERAL, Category.SCIENCE)
        ),
        EngineConfig(
            id="brave",
            type="brave",
            categories=(Category.GENERAL, Category.NEWS),
            api_key_env="BRAVE_API_KEY",
        ),
    )


@attrs.frozen(kw_only=True)
class Config:
    config_version: int = 1
    service: ServiceConfig = attrs.field(factory=ServiceConfig)
    search: SearchConfig = attrs.field(factory=SearchConfig)
    fetch: FetchConfig = attrs.field(factory=FetchConfig)
    egress: EgressConfig = attrs.field(factory=EgressConfig)
    limits: LimitsConfig = attrs.field(factory=LimitsConfig)
    resilience: ResilienceConfig = attrs.field(factory=ResilienceConfig)
    privacy: PrivacyConfig = attrs.field(factory=PrivacyConfig)
    logging: LoggingConfig = attrs.field(factory=LoggingConfig)
    status: StatusConfig = attrs.field(factory=StatusConfig)
    cache: CacheConfig = attrs.field(factory=CacheConfig)
    scraping: ScrapingConfig = attrs.field(factory=ScrapingConfig)
    coordination: CoordinationConfig | None = None
    engines: tuple[EngineConfig, ...] = attrs.field(factory=default_engines)
