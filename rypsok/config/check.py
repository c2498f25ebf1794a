"""`rypsok check`: validate as `serve` does, then say what is in effect and what it costs.

The report is for people (its format may change in a minor version; the exit code does not).
It never prints a token, an API key, the text of an egress rule or a proxy's address.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

import attrs

from rypsok.config.coordination import describe_url, parse_store_url
from rypsok.config.load import ConfigError, ConfigSource, load_source, locate_config
from rypsok.config.metrics import metrics_line
from rypsok.config.rules import parse_bind, parse_egress_rule
from rypsok.config.schema import Config, CoordinationConfig
from rypsok.config.secrets import Credential, engine_credential, file_is_world_readable
from rypsok.shared.drivers import DRIVER_TYPES
from rypsok.shared.vocabulary import Category

if TYPE_CHECKING:
    from collections.abc import Mapping


__all__ = [
    "CheckReport",
    "Validated",
    "report_lines",
    "run_check",
    "validate",
    "warnings",
]

PREFIX = "rypsok: "
# LIM-S7 and LIM-F5: a call's longest duration beyond its configured deadline.
SEARCH_CALL_MARGIN_MS = 300
FETCH_CALL_MARGIN_MS = 1000


@attrs.frozen(kw_only=True)
class Validated:
    source: ConfigSource
    config: Config


def validate(path: str | None, env: Mapping[str, str]) -> Validated:
    """The one validation of `check` and `serve`; raises ConfigError."""
    source = locate_config(path, env)
    return Validated(source=source, config=load_source(source, env))


@attrs.frozen(kw_only=True)
class CheckReport:
    exit_code: int  # 0 valid, 1 refused
    lines: tuple[str, ...]  # each a line for standard error, "rypsok: " included


def run_check(path: str | None, env: Mapping[str, str]) -> CheckReport:
    try:
        validated = validate(path, env)
    except ConfigError as exc:
        return CheckReport(exit_code=1, lines=(PREFIX + str(exc),))
    lines = [f"{validated.source.describe()} is valid"]
    if validated.source.path is None:
        lines = [validated.source.describe()]
    lines += report_lines(validated.config, env)
    lines += [f"warning: {w}" for w in warnings(validated.config, env)]
    return CheckReport(exit_code=0, lines=tuple(PREFIX + line for line in lines))


def _b(value: bool) -> str:
    return "true" if value else "false"


def report_lines(config: Config, env: Mapping[str, str]) -> list[str]:
    """One line per part of the configuration, in the book's order, without the prefix."""
    lines = _search_lines(config) + _engine_lines(config, env) + _part_lines(config)
    if config.coordination is not None:
        lines.append(coordination_line(config.coordination))
        # check reads the configuration only: a store out of reach, a wrong password or a
        # missing permission shows at serve, in its log.
        lines.append(
            "coordination: store not contacted by check (its address, password and "
            "permissions are first tried by serve, which logs coordination_unavailable "
            "with the reason when it cannot use them)"
        )
    if config.service.metrics is not None:
        lines.append(metrics_line(config.service.metrics))
    # Last, as the book shows it: the line that names the build its figure is for.
    lines.append(_memory_line(config))
    return lines


def _search_lines(config: Config) -> list[str]:
    s, f, lim = config.search, config.fetch, config.limits
    return [
        f"search: languages={','.join(s.languages)} region={s.region} "
        f"safe_search={s.safe_search.value} max_results={s.max_results} "
        f"(ceiling {s.max_results_ceiling}) query_max_chars={s.query_max_chars} "
        f"deadline_ms={s.deadline_ms} engine_timeout_ms={s.engine_timeout_ms} "
        f"connect_timeout_ms={s.connect_timeout_ms} reserve_ms={s.reserve_ms} "
        f"engines_per_request={s.engines_per_request} "
        f"results_per_engine={s.results_per_engine} snippet_max_chars={s.snippet_max_chars} "
        f"title_max_chars={s.title_max_chars} "
        f"drop_flagged_results={_b(s.drop_flagged_results)} "
        f"engine_attribution={_b(s.engine_attribution)}",
        "tool rate limits per caller and minute: "
        f"web_search={lim.web_search_per_minute} web_fetch={lim.web_fetch_per_minute} "
        + (
            f"engine_status={lim.engine_status_per_minute}"
            if config.status.enabled
            else "engine_status=not offered"
        ),
        "tool call maxima in ms: "
        f"web_search={s.deadline_ms + SEARCH_CALL_MARGIN_MS} "
        f"web_fetch={f.deadline_ms + FETCH_CALL_MARGIN_MS}; engine_status reads memory only",
    ]


def _engine_lines(config: Config, env: Mapping[str, str]) -> list[str]:
    lines: list[str] = []
    served: set[str] = set()
    for engine in config.engines:
        credential = engine_credential(engine, env) if engine.enabled else None
        lines.append(_engine_line(config, engine.id, credential))
        if credential is not None and credential.active:
            served.update(c.value for c in engine.categories)
    ordered = [c for c in ("general", "news", "science", "code") if c in served]
    lines.append(
        f"categories served: {','.join(ordered)}"
        if ordered
        else "categories served: none (no enabled engine is active)"
    )
    return lines + _category_lines(config, env)


def _part_lines(config: Config) -> list[str]:
    f, h, lim = config.fetch, config.service.http, config.limits
    return [
        f"service: structured_content={_b(config.service.structured_content)} "
        f"shutdown_ms={config.service.shutdown_ms} "
        f"user_agent_contact={'set' if config.service.user_agent_contact else 'none'} "
        f"engine_status={'offered' if config.status.enabled else 'not offered'} "
        f"allowed_hosts={len(h.allowed_hosts)} allowed_origins={len(h.allowed_origins)}",
        f"service.http: bind={parse_bind(h.bind)} callers={len(h.auth.callers)} "
        f"legacy_revisions={_b(h.legacy_revisions)} max_connections={h.max_connections} "
        f"max_request_bytes={h.max_request_bytes} idle_timeout_s={h.idle_timeout_s} "
        f"head_timeout_s={h.head_timeout_s} max_streams={h.max_streams} "
        f"request_timeout_s={h.request_timeout_s} max_sessions={h.max_sessions}",
        f"fetch: ports={','.join(str(p) for p in f.ports)} max_bytes={f.max_bytes} "
        f"max_chars={f.max_chars} (ceiling {f.max_chars_ceiling}) deadline_ms={f.deadline_ms} "
        f"max_redirects={f.max_redirects} robots_txt={_b(f.robots_txt)} "
        f"follow_cross_host_redirects={_b(f.follow_cross_host_redirects)} "
        f"pdf_max_pages={f.pdf_max_pages} pdf_max_chars={f.pdf_max_chars} "
        f"pdf_memory_mib={f.pdf_memory_mib} pdf_workers={f.pdf_workers}",
        f"egress: allow_rules={len(config.egress.allow)} deny_rules={len(config.egress.deny)} "
        f"allow_http={_b(config.egress.allow_http)} strict_mode={_b(f.strict_mode)} "
        f"proxy={'set' if config.egress.proxy else 'none'}",
        f"privacy: secret_detection={config.privacy.secret_detection}",
        f"logging: level={config.logging.level} log_queries={_b(config.logging.log_queries)}",
        f"cache: enabled={_b(config.cache.enabled)} max_entries={config.cache.max_entries} "
        f"ttl_s={config.cache.ttl_s} max_entry_bytes={config.cache.max_entry_bytes}",
        f"scraping: enabled={_b(config.scraping.enabled)}",
        f"resilience: failures_to_open={config.resilience.failures_to_open} "
        f"first_cooldown_s={config.resilience.first_cooldown_s} "
        f"max_cooldown_s={config.resilience.max_cooldown_s}",
        f"limits: outbound_in_flight={lim.outbound_in_flight} "
        f"per_engine_in_flight={lim.per_engine_in_flight} "
        f"fetches_in_flight={lim.fetches_in_flight} parsing_in_flight={lim.parsing_in_flight} "
        f"strict_mode_urls={lim.strict_mode_urls} "
        f"robots_cache_entries={lim.robots_cache_entries}",
    ]


def _serving(config: Config, env: Mapping[str, str]) -> dict[Category, list[str]]:
    """Per category, in the Category order, the enabled and active engines that serve it."""
    by_category: dict[Category, list[str]] = {c: [] for c in Category}
    for engine in config.engines:
        if engine.enabled and engine_credential(engine, env).active:
            for category in engine.categories:
                by_category[category].append(engine.id)
    return by_category


def _category_lines(config: Config, env: Mapping[str, str]) -> list[str]:
    """One line per category naming the engines a web_search of it asks.

    A category no active engine serves says so on its own line, not as a `warning:` line:
    the book promises no warning for the defaults and the shipped examples, each of which
    leaves some category unserved by choice (decisions/config-check-output).
    """
    return [
        f"category {category.value}: {','.join(engines)}"
        if engines
        else f"category {category.value}: none (no active engine serves it; web_search "
        "does not offer it)"
        for category, engines in _serving(config, env).items()
    ]


def coordination_line(c: CoordinationConfig) -> str:
    """The store without credentials: its address, never a user name or a password."""
    password = "env" if c.password_env else "file" if c.password_file else "none"
    return (
        f"coordination: url={describe_url(parse_store_url(c.url))} key_prefix={c.key_prefix} "
        f"timeout_ms={c.timeout_ms} replicas={c.replicas} password={password}"
    )


def _memory_line(config: Config) -> str:
    from rypsok.config.memory import estimate  # check's own: serving starts without it

    figure = estimate(config)
    if not figure.measured:
        return (
            f"memory: worst case about {figure.total_mib:.0f} MiB (measured for CPython on "
            f"Linux with glibc; not measured for {figure.build})"
        )
    return f"memory: worst case about {figure.total_mib:.0f} MiB for {figure.build}"


def _engine_line(config: Config, engine_id: str, credential: Credential | None) -> str:
    engine = next(e for e in config.engines if e.id == engine_id)
    parts = [
        f"engine {engine.id}: type={engine.type} enabled={_b(engine.enabled)}",
        f"categories={','.join(c.value for c in engine.categories)}",
        f"preference={engine.preference}",
    ]
    traits = DRIVER_TYPES[engine.type]
    if traits.has_endpoint:
        parts.append(f"endpoint={engine.endpoint}")
    if traits.has_base_url and engine.base_url is not None:
        parts.append("base_url=custom")
    parts.append("disabled by configuration" if credential is None else credential.state)
    return " ".join(parts)


def warnings(config: Config, env: Mapping[str, str]) -> list[str]:
    """The Warnings table's rows that apply, each `<key>: <what happens>; <safer setting>`.

    The memory row compares the estimate with the documented unit's MemoryMax only on the
    build the constants were measured for.
    """
    from rypsok.config.memory import MEMORY_MAX_BYTES, estimate, settings_to_lower

    out: list[str] = []
    figure = estimate(config)
    if figure.measured and figure.total_bytes > MEMORY_MAX_BYTES:
        # The settings of the shares that actually raise this estimate, not a fixed list.
        lower = settings_to_lower(figure, MEMORY_MAX_BYTES)
        named = lower[0] if len(lower) == 1 else ", ".join(lower[:-1]) + " or " + lower[-1]
        out.append(
            f"memory: the worst case of these settings, about {figure.total_mib:.0f} MiB for "
            f"{figure.build}, is above the {MEMORY_MAX_BYTES // (1024 * 1024)} MiB of the "
            f"documented unit's MemoryMax; lower {named}, or raise MemoryMax"
        )
    for index, text in enumerate(config.egress.allow):
        network = parse_egress_rule(text).network
        if network is not None and network.prefixlen < (
            16 if isinstance(network, ipaddress.IPv4Network) else 32
        ):
            out.append(
                f"egress.allow[{index}]: the rule admits a network wider than "
                f"/{16 if network.version == 4 else 32}, private addresses included; "
                "host names, or a narrower network"
            )
    if config.privacy.secret_detection == "off":
        out.append(
            "privacy.secret_detection: a credential in a query or a URL is sent on unchecked; "
            '"refuse", the default'
        )
    if not parse_bind(config.service.http.bind).is_loopback:
        out.append(
            "service.http.bind: the listener speaks plain HTTP, so tokens and traffic cross "
            "the network unencrypted; bind loopback behind a TLS-terminating proxy"
        )
    if config.logging.log_queries:
        out.append("logging.log_queries: query text is written to the debug log; false")
    if not config.fetch.robots_txt:
        out.append("fetch.robots_txt: pages are read whatever the site's robots.txt says; true")
    if config.egress.allow_http:
        out.append("egress.allow_http: pages are read over plain, unencrypted HTTP; false")
    if config.fetch.follow_cross_host_redirects:
        out.append(
            "fetch.follow_cross_host_redirects: a page may lead the fetch to another host "
            "without the caller deciding; false"
        )
    for engine in config.engines:
        if engine.enabled and DRIVER_TYPES[engine.type].scrapes:
            out.append(
                f"engines.{engine.id}: the engine scrapes a human-facing page under the "
                "provider's terms; an engine with an API"
            )
    if config.cache.enabled and not any(
        e.enabled and DRIVER_TYPES[e.type].cacheable for e in config.engines
    ):
        out.append(
            "cache.enabled: the cache is on but no enabled engine allows its results to be "
            "stored; turn the cache off, or enable an engine that allows storage"
        )
    out += _coordination_warnings(config)
    for index, caller in enumerate(config.service.http.auth.callers):
        if caller.token_file is not None and file_is_world_readable(caller.token_file):
            out.append(
                f"service.http.auth.callers[{index}]: the token file is readable by everyone; "
                "chmod 600"
            )
    return out


def _coordination_warnings(config: Config) -> list[str]:
    c = config.coordination
    if c is None:
        return []
    out = []
    url = parse_store_url(c.url)
    if url.scheme == "redis" and not url.loopback:
        out.append(
            "coordination.url: the store's traffic (callers' ids, engines' turns, the "
            "password) crosses the network unencrypted; rediss://, or a store on loopback "
            "or a unix socket"
        )
    if c.password_file is not None and file_is_world_readable(c.password_file):
        out.append(
            "coordination.password_file: the password file is readable by everyone; chmod 600"
        )
    return out
