"""The configuration's tables, in the order of the Configuration chapter (REQ-CFG-005).

`Validator.config` turns the parsed file into a `Config` or raises the first ConfigError;
dependent ranges are checked after the keys they depend on, and a default that no longer
fits is reported on the key the author wrote.

Implements REQ-MAIN-003.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Final

from rypsok.config.coordination import read_coordination
from rypsok.config.messages import ConfigError, kind_of, with_place
from rypsok.config.metrics import read_metrics
from rypsok.config.reader import PRINTABLE_KEY, Reader, Table
from rypsok.config.rules import (
    RuleError,
    is_env_name,
    is_identifier,
    parse_bind,
    parse_egress_rule,
    validate_allowed_host,
    validate_base_url,
    validate_origin,
    validate_proxy,
)
from rypsok.config.schema import (
    CacheConfig,
    CallerConfig,
    Config,
    CoordinationConfig,
    EgressConfig,
    EngineConfig,
    FetchConfig,
    HttpAuthConfig,
    HttpConfig,
    LimitsConfig,
    LoggingConfig,
    MetricsConfig,
    PrivacyConfig,
    ResilienceConfig,
    ScrapingConfig,
    SearchConfig,
    ServiceConfig,
    StatusConfig,
    default_engines,
    ranged_keys,
)
from rypsok.config.toml import format_path
from rypsok.config.tooling import tool_settings
from rypsok.shared.drivers import DRIVER_TYPES
from rypsok.shared.tooldefs import LIM_I1_CHARS, definition_chars
from rypsok.shared.vocabulary import Category, SafeSearch

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["CONFIG_VERSION", "Validator"]

CONFIG_VERSION: Final = 1
_CATEGORIES: Final = tuple(c.value for c in Category)
_SAFE_SEARCH: Final = tuple(s.value for s in SafeSearch)
_LANGUAGE: Final = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8}){0,3}")
_REGION: Final = re.compile(r"[A-Z]{2}")


class Validator(Reader):
    def config(self, data: dict[str, Any]) -> Config:
        """The whole file, table by table, in the order of the Configuration chapter."""
        root = Table(self, (), data)
        root.known(
            keys={"config_version"},
            tables={
                "service",
                "search",
                "fetch",
                "egress",
                "limits",
                "resilience",
                "privacy",
                "logging",
                "status",
                "cache",
                "scraping",
                "coordination",
                "engines",
            },
        )
        version = self.version(data)
        search = self.search(root.sub("search", SearchConfig))
        fetch = self.fetch(root.sub("fetch", FetchConfig))
        egress = self.egress(root.sub("egress", EgressConfig))
        service = self.service(
            root.sub("service", ServiceConfig), fetch_deadline_ms=fetch.deadline_ms
        )
        limits = LimitsConfig(**self.ranged_ints(root.sub("limits", LimitsConfig)))
        resilience = self.resilience(root.sub("resilience", ResilienceConfig))
        privacy, logging, status = self.switches(root)
        cache = self.cache(root.sub("cache", CacheConfig))
        scraping_table = root.sub("scraping", ScrapingConfig)
        scraping_table.known(keys={"enabled"})
        scraping = ScrapingConfig(enabled=scraping_table.get_bool("enabled"))
        engines = self.engines(root.sub("engines"), scraping_on=scraping.enabled)
        coordination: CoordinationConfig | None = None
        if "coordination" in data:
            coordination = read_coordination(
                root.sub("coordination", CoordinationConfig), env_name=_env_name, path=_path
            )
        self.ports_need_allow(fetch.ports, egress.allow)
        config = Config(
            config_version=version,
            service=service,
            search=search,
            fetch=fetch,
            egress=egress,
            limits=limits,
            resilience=resilience,
            privacy=privacy,
            logging=logging,
            status=status,
            cache=cache,
            scraping=scraping,
            coordination=coordination,
            engines=default_engines() if engines is None else engines,
        )
        self.definitions_fit(config)
        return config

    def version(self, data: dict[str, Any]) -> int:
        if "config_version" not in data:
            raise ConfigError("config_version: required; this release reads config_version = 1")
        version = data["config_version"]
        if not isinstance(version, int) or isinstance(version, bool):
            raise self.fail(
                ("config_version",), f"expected the integer 1, found {kind_of(version)}"
            )
        if version != CONFIG_VERSION:
            raise self.fail(
                ("config_version",), "this release reads version 1, found another version"
            )
        return version

    def switches(self, root: Table) -> tuple[PrivacyConfig, LoggingConfig, StatusConfig]:
        """The tables of one or two choices: [privacy], [logging], [status]."""
        privacy_table = root.sub("privacy", PrivacyConfig)
        privacy_table.known(keys={"secret_detection"})
        privacy = PrivacyConfig(
            secret_detection=privacy_table.get_choice(
                "secret_detection", ("off", "warn", "mask", "refuse")
            )
        )
        logging_table = root.sub("logging", LoggingConfig)
        logging_table.known(keys={"level", "log_queries"})
        logging = LoggingConfig(
            level=logging_table.get_choice("level", ("error", "warn", "info", "debug")),
            log_queries=logging_table.get_bool("log_queries"),
        )
        status_table = root.sub("status", StatusConfig)
        status_table.known(keys={"enabled"})
        return privacy, logging, StatusConfig(enabled=status_table.get_bool("enabled"))

    def definitions_fit(self, config: Config) -> None:
        """LIM-I1: the tool definitions this file would serve, measured as the protocol layer
        builds them. The enabled engines' categories are the most it can serve (an engine
        without its key serves none); of the keys the definitions depend on, only the
        languages can grow them past the bound, since the rest is bounded and small."""
        size = definition_chars(
            tool_settings(
                config, {str(c) for e in config.engines if e.enabled for c in e.categories}
            )
        )
        if size > LIM_I1_CHARS:
            raise self.fail(
                ("search", "languages"),
                f"the tool definitions would be {size} characters, more than the "
                f"{LIM_I1_CHARS} allowed (LIM-I1); list fewer languages",
            )

    def ranged_ints(
        self,
        table: Table,
        *,
        others: frozenset[str] = frozenset(),
        tables: frozenset[str] = frozenset(),
    ) -> dict[str, Any]:
        """The integers of the table's class that have a fixed range (the schema's `ranged`
        fields), once no key outside them, `others` and `tables` is set."""
        assert table.schema is not None
        table.known(keys={*ranged_keys(table.schema), *others}, tables=tables)
        return table.get_ranged_ints()

    def search(self, t: Table) -> SearchConfig:
        out = self.ranged_ints(
            t,
            others=frozenset(
                {
                    "languages",
                    "region",
                    "safe_search",
                    "max_results",
                    "engine_timeout_ms",
                    "drop_flagged_results",
                    "engine_attribution",
                }
            ),
        )
        ceiling = out["max_results_ceiling"]
        results = t.default("max_results")
        out["max_results"] = t.get_dependent_int(
            "max_results",
            results,
            1,
            ceiling,
            set_key="max_results_ceiling",
            unfit=f"must be at least {results} (search.max_results, default {results})",
            why=f"search.max_results_ceiling {ceiling}",
        )
        budget = out["deadline_ms"] - out["reserve_ms"]
        if budget < 100:
            raise self.fail(
                (*t.path, "reserve_ms"),
                f"must leave at least 100 ms for search.engine_timeout_ms (search.deadline_ms "
                f"{out['deadline_ms']} minus search.reserve_ms {out['reserve_ms']})",
            )
        set_key = "deadline_ms" if "deadline_ms" in t.data else "reserve_ms"
        timeout = t.default("engine_timeout_ms")
        out["engine_timeout_ms"] = t.get_dependent_int(
            "engine_timeout_ms",
            timeout,
            100,
            budget,
            set_key=set_key,
            unfit=f"must be at least {timeout + out['reserve_ms']} (search.engine_timeout_ms, "
            f"default {timeout}, plus search.reserve_ms {out['reserve_ms']})"
            if set_key == "deadline_ms"
            else f"must be at most {out['deadline_ms'] - timeout} (search.deadline_ms "
            f"{out['deadline_ms']} minus search.engine_timeout_ms, default {timeout})",
            why=f"search.deadline_ms {out['deadline_ms']} minus search.reserve_ms "
            f"{out['reserve_ms']}",
        )
        out["languages"] = t.get_texts("languages", check=_language, non_empty=True, unique=True)
        out["region"] = t.get_text("region", check=_region)
        out["safe_search"] = SafeSearch(t.get_choice("safe_search", _SAFE_SEARCH))
        out["drop_flagged_results"] = t.get_bool("drop_flagged_results")
        out["engine_attribution"] = t.get_bool("engine_attribution")
        return SearchConfig(**out)

    def fetch(self, t: Table) -> FetchConfig:
        out = self.ranged_ints(
            t,
            others=frozenset(
                {"max_chars", "ports", "robots_txt", "follow_cross_host_redirects", "strict_mode"}
            ),
        )
        ceiling = out["max_chars_ceiling"]
        chars = t.default("max_chars")
        out["max_chars"] = t.get_dependent_int(
            "max_chars",
            chars,
            500,
            ceiling,
            set_key="max_chars_ceiling",
            unfit=f"must be at least {chars} (fetch.max_chars, default {chars})",
            why=f"fetch.max_chars_ceiling {ceiling}",
        )
        out["ports"] = t.get_ints("ports", 1, 65535)
        out["robots_txt"] = t.get_bool("robots_txt")
        out["follow_cross_host_redirects"] = t.get_bool("follow_cross_host_redirects")
        out["strict_mode"] = t.get_bool("strict_mode")
        return FetchConfig(**out)

    def egress(self, t: Table) -> EgressConfig:
        t.known(keys={"allow_http", "allow", "deny", "proxy"})
        return EgressConfig(
            allow_http=t.get_bool("allow_http"),
            allow=t.get_texts("allow", check=parse_egress_rule),
            deny=t.get_texts("deny", check=parse_egress_rule),
            proxy=t.get_text("proxy", check=_proxy),
        )

    def ports_need_allow(self, ports: Sequence[int], allow: Sequence[str]) -> None:
        for index, port in enumerate(ports):
            if port not in (80, 443) and not allow:
                raise self.fail(
                    ("fetch", "ports", index),
                    "a port other than 80 and 443 needs an egress.allow rule",
                )

    def service(self, t: Table, *, fetch_deadline_ms: int) -> ServiceConfig:
        t.known(
            keys={"structured_content", "user_agent_contact", "shutdown_ms"},
            tables={"http", "metrics"},
        )
        out: dict[str, Any] = {
            "structured_content": t.get_bool("structured_content"),
            "user_agent_contact": t.get_text("user_agent_contact", check=_contact),
            "shutdown_ms": t.get_ranged("shutdown_ms"),
        }
        h = t.sub("http", HttpConfig)
        http = self.ranged_ints(
            h,
            others=frozenset(
                {
                    "bind",
                    "allowed_hosts",
                    "allowed_origins",
                    "legacy_revisions",
                    "request_timeout_s",
                    "head_timeout_s",
                }
            ),
            tables=frozenset({"auth"}),
        )
        http["request_timeout_s"] = self.request_timeout(h, fetch_deadline_ms)
        # Below the idle time: a connection that has begun a request is not
        # waiting for one. Unset, 10 s, or the idle time less 1 s when that is shorter.
        idle = http["idle_timeout_s"]
        head_ceiling = min(HEAD_TIMEOUT_MAX_S, idle - 1)
        http["head_timeout_s"] = h.get_int(
            "head_timeout_s",
            min(h.default("head_timeout_s"), head_ceiling),
            1,
            head_ceiling,
            why=f"service.http.idle_timeout_s {idle} minus 1 s"
            if head_ceiling < HEAD_TIMEOUT_MAX_S
            else None,
        )
        http["bind"] = h.get_text("bind", check=parse_bind)
        http["allowed_hosts"] = h.get_texts("allowed_hosts", check=validate_allowed_host)
        http["allowed_origins"] = h.get_texts("allowed_origins", check=validate_origin)
        http["legacy_revisions"] = h.get_bool("legacy_revisions")
        auth = h.sub("auth", HttpAuthConfig)
        auth.known(keys={"callers"})
        callers = self.callers(auth)
        http["auth"] = HttpAuthConfig(callers=callers)
        bind = parse_bind(http["bind"])
        if not bind.is_loopback and not callers:
            raise self.fail(
                (*h.path, "bind"),
                "a non-loopback bind needs [service.http.auth] callers",
                placed=False,
            )
        if bind.is_unspecified and not http["allowed_hosts"]:
            raise self.fail(
                (*h.path, "bind"),
                "a bind on an unspecified address (0.0.0.0, ::) needs service.http.allowed_hosts",
                placed=False,
            )
        out["http"] = HttpConfig(**http)
        if "metrics" in t.data:
            out["metrics"] = read_metrics(
                t.sub("metrics", MetricsConfig),
                mcp_bind=http["bind"],
                env_name=_env_name,
                path=_path,
            )
        return ServiceConfig(**out)

    def request_timeout(self, h: Table, fetch_deadline_ms: int) -> int:
        """LIM-H5, at least the fetch deadline plus 2 s, so that a web_fetch call is answered
        before its request's time is up."""
        least = max(3, math.ceil((fetch_deadline_ms + 2000) / 1000))
        if least > 600:  # fetch.deadline_ms is at most 30000, so this is never reached
            raise self.fail(("fetch", "deadline_ms"), "leaves no room for request_timeout_s")
        request_s = h.default("request_timeout_s")
        if "request_timeout_s" not in h.data and least > request_s:
            raise self.fail(
                ("fetch", "deadline_ms"),
                f"must be at most {(request_s - 2) * 1000} (service.http.request_timeout_s, "
                f"default {request_s} s, minus 2 s)",
            )
        return h.get_int(
            "request_timeout_s",
            request_s,
            least,
            600,
            why=f"fetch.deadline_ms {fetch_deadline_ms} plus 2 s",
        )

    def callers(self, auth: Table) -> tuple[CallerConfig, ...]:
        path = (*auth.path, "callers")
        raw = auth.data.get("callers", [])
        if not isinstance(raw, list):
            raise self.fail(
                path,
                f"expected an array of tables ([[service.http.auth.callers]]), "
                f"found {kind_of(raw)}",
            )
        callers: list[CallerConfig] = []
        seen: set[str] = set()
        for index, item in enumerate(raw):
            c = self.table(item, (*path, index), CallerConfig)
            if "token" in c.data:
                raise self.fail((*c.path, "token"), "give the token by token_env or token_file")
            c.known(keys={"id", "token_env", "token_file"})
            if "id" not in c.data:
                raise self.missing(
                    (*c.path, "id"), "required; lowercase letters, digits and underscores"
                )
            caller_id = c.get_text("id", "", check=_identifier)
            if caller_id in seen:
                raise self.fail((*c.path, "id"), "defined more than once")
            seen.add(caller_id)
            token_env = c.get_text("token_env", check=_env_name)
            token_file = c.get_text("token_file", check=_path)
            if token_env is None and token_file is None:
                raise self.missing(
                    (*c.path, "token_env"), "required, or token_file instead; give exactly one"
                )
            if token_env is not None and token_file is not None:
                raise self.fail(
                    (*c.path, "token_file"), "give one of token_env or token_file, not both"
                )
            callers.append(CallerConfig(id=caller_id, token_env=token_env, token_file=token_file))
        return tuple(callers)

    def resilience(self, t: Table) -> ResilienceConfig:
        t.known(keys={"failures_to_open", "first_cooldown_s", "max_cooldown_s"})
        longest = t.get_ranged("max_cooldown_s")
        first_max = min(600, longest)
        first = t.default("first_cooldown_s")
        t.default_fits(
            "first_cooldown_s",
            first,
            10,
            first_max,
            "max_cooldown_s",
            f"must be at least {first} (resilience.first_cooldown_s, default {first})",
        )
        return ResilienceConfig(
            failures_to_open=t.get_ranged("failures_to_open"),
            first_cooldown_s=t.get_int(
                "first_cooldown_s",
                first,
                10,
                first_max,
                why=f"resilience.max_cooldown_s {longest}" if longest < 600 else None,
            ),
            max_cooldown_s=longest,
        )

    def cache(self, t: Table) -> CacheConfig:
        t.known(keys={"enabled", *ranged_keys(CacheConfig)})
        enabled = t.get_bool("enabled")
        return CacheConfig(enabled=enabled, **t.get_ranged_ints())

    def engines(self, t: Table, *, scraping_on: bool) -> tuple[EngineConfig, ...] | None:
        if not t.data:
            return None  # no [engines.*] table: the two default engines
        engines: list[EngineConfig] = []
        for engine_id, raw in t.data.items():
            path = (*t.path, engine_id)
            if not is_identifier(engine_id):
                shown = format_path(path) if PRINTABLE_KEY.fullmatch(engine_id) else "engines"
                raise ConfigError(
                    with_place(
                        f"{shown}: an engine id is lowercase letters, digits and underscores, "
                        "starting with a letter",
                        self.place(path),
                    )
                )
            engines.append(self.engine(self.table(raw, path, EngineConfig), engine_id, scraping_on))
        arxiv = [e.id for e in engines if e.type == "arxiv" and e.enabled]
        if len(arxiv) > 1:
            # arXiv's terms allow one request every three seconds on one connection; each
            # engine has its own limiter, so a second enabled arxiv engine would double it.
            raise self.fail(
                (*t.path, arxiv[1], "type"),
                "only one arxiv engine can be enabled: the provider allows one request "
                "every three seconds on one connection",
            )
        return tuple(engines)

    def engine(self, e: Table, engine_id: str, scraping_on: bool) -> EngineConfig:
        if "api_key" in e.data:
            raise self.fail((*e.path, "api_key"), "give the secret by api_key_env or api_key_file")
        e.known(
            keys={
                "type",
                "enabled",
                "categories",
                "preference",
                "api_key_env",
                "api_key_file",
                "endpoint",
                "base_url",
                "site",
            }
        )
        if "type" not in e.data:
            raise self.missing((*e.path, "type"), f"required; one of {', '.join(DRIVER_TYPES)}")
        kind = e.data["type"]
        if not isinstance(kind, str):
            raise self.fail(
                (*e.path, "type"),
                f"expected one of {', '.join(DRIVER_TYPES)}, found {kind_of(kind)}",
            )
        traits = DRIVER_TYPES.get(kind)
        if traits is None:
            error = self.fail((*e.path, "type"), "no such driver")
            raise ConfigError(f"{error}; the driver types are {', '.join(DRIVER_TYPES)}")
        if traits.scrapes and not scraping_on:
            # The book gives this sentence word for word (Tutorial 5): it names the engine's
            # table, the type and the operator's responsibility, and carries no place.
            raise ConfigError(
                f'{format_path(e.path)}: type "{kind}" scrapes a human-facing interface; '
                "it runs only with [scraping] enabled = true, at the operator's risk under the "
                "provider's terms"
            )
        if "categories" not in e.data:
            raise self.missing(
                (*e.path, "categories"), f"required; at least one of {', '.join(_CATEGORIES)}"
            )
        categories = e.get_texts(
            "categories",
            (),
            check=_category,
            non_empty=True,
            unique=True,
            words=", ".join(_CATEGORIES),
        )
        out: dict[str, Any] = {
            "id": engine_id,
            "type": kind,
            "categories": tuple(Category(c) for c in categories),
            "enabled": e.get_bool("enabled"),
            "preference": e.get_ranged("preference"),
            "api_key_env": e.get_text("api_key_env", check=_env_name),
            "api_key_file": e.get_text("api_key_file", check=_path),
        }
        if not traits.keyed:
            for key in ("api_key_env", "api_key_file"):
                if out[key] is not None:
                    raise self.fail((*e.path, key), f"the {kind} driver takes no credential")
        elif out["api_key_env"] is not None and out["api_key_file"] is not None:
            raise self.fail(
                (*e.path, "api_key_file"), "give one of api_key_env or api_key_file, not both"
            )
        if "endpoint" in e.data and not traits.has_endpoint:
            raise self.fail((*e.path, "endpoint"), "only the brave driver has an endpoint")
        out["endpoint"] = e.get_choice("endpoint", ("web", "news"))
        if "base_url" in e.data and not traits.has_base_url:
            raise self.fail((*e.path, "base_url"), "only the wikipedia driver has a base_url")
        out["base_url"] = e.get_text("base_url", check=validate_base_url)
        if traits.base_url_required and out["base_url"] is None:
            raise self.missing(
                (*e.path, "base_url"),
                f"required; the address of the operator's own {kind} instance",
            )
        if "site" in e.data and not traits.has_site:
            raise self.fail((*e.path, "site"), "only the stackexchange driver has a site")
        out["site"] = e.get_text("site", check=_site)
        return EngineConfig(**out)


HEAD_TIMEOUT_MAX_S: Final = 60


# -- the forms of texts --------------------------------------------------------------------


def _language(text: str) -> None:
    if _LANGUAGE.fullmatch(text) is None:
        raise RuleError("expected a language tag (en, ja, pt-BR), found text that is not one")


def _region(text: str) -> None:
    if _REGION.fullmatch(text) is None:
        raise RuleError("expected two uppercase letters (US, JP), found text that is not that")


def _category(text: str) -> None:
    if text not in _CATEGORIES:
        raise RuleError(f"expected one of {', '.join(_CATEGORIES)}, found an unknown word")


def _identifier(text: str) -> None:
    if not is_identifier(text):
        raise RuleError(
            "expected lowercase letters, digits and underscores, starting with a letter, "
            "found text that is not such an identifier"
        )


def _env_name(text: str) -> None:
    if not is_env_name(text):
        raise RuleError("the value is not the name of an environment variable (it is not shown)")


_SITE: Final = re.compile(r"[a-z0-9][a-z0-9.-]{0,63}")


def _site(text: str) -> None:
    # A Stack Exchange site's api_site_parameter (stackoverflow, superuser, math).
    if _SITE.fullmatch(text) is None:
        raise RuleError("expected a Stack Exchange site name (stackoverflow, superuser)")


def _path(text: str) -> None:
    if not text or "\x00" in text:
        raise RuleError("expected the path of a file, found text that is not one")


def _proxy(text: str) -> None:
    if text:
        validate_proxy(text)


def _contact(text: str) -> None:
    # It goes into the User-Agent header: printable ASCII, no characters of the header's
    # own syntax, and short.
    if len(text) > 200 or any(not (0x20 <= ord(c) < 0x7F) or c in "();" for c in text):
        raise RuleError(
            "expected a URL or an address of at most 200 printable ASCII characters, "
            "without parentheses or semicolons"
        )
