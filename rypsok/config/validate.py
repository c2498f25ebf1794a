"""The configuration's tables, in the order of the Configuration chapter (REQ-CFG-005).

`Validator.config` turns the parsed file into a `Config` or raises the first ConfigError;
dependent ranges are checked after the keys they depend on, and a default that no longer
fits is reported on the key the author wrote.

Implements REQ-MAIN-003.
"""

from __future__ import annotations

import enum
import functools
import math
import re
import types
import typing
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs

from rypsok.config.coordination import read_coordination
from rypsok.config.messages import ConfigError, kind_of, with_place
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
from rypsok.config.schema import Config
from rypsok.config.toml import format_path
from rypsok.config.tooling import tool_settings
from rypsok.shared.drivers import DRIVER_TYPES
from rypsok.shared.tooldefs import LIM_I1_CHARS, definition_chars
from rypsok.shared.vocabulary import Category, SafeSearch

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import cattrs

__all__ = ["CONFIG_VERSION", "Validator"]

CONFIG_VERSION: Final = 1
_CATEGORIES: Final = tuple(c.value for c in Category)
_SAFE_SEARCH: Final = tuple(s.value for s in SafeSearch)
_LANGUAGE: Final = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8}){0,3}")
_REGION: Final = re.compile(r"[A-Z]{2}")
_PREFERENCE_MAX: Final = 2**32 - 1

T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)


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
        search = self.search(root.sub("search"))
        fetch = self.fetch(root.sub("fetch"))
        egress = self.egress(root.sub("egress"))
        service = self.service(root.sub("service"), fetch_deadline_ms=fetch["deadline_ms"])
        limits = self.simple_ints(root.sub("limits"), _LIMITS)
        resilience = self.resilience(root.sub("resilience"))
        privacy_table = root.sub("privacy")
        privacy_table.known(keys={"secret_detection"})
        privacy = {
            "secret_detection": privacy_table.get_choice(
                "secret_detection", "refuse", ("off", "warn", "mask", "refuse")
            )
        }
        logging_table = root.sub("logging")
        logging_table.known(keys={"level", "log_queries"})
        logging = {
            "level": logging_table.get_choice("level", "info", ("error", "warn", "info", "debug")),
            "log_queries": logging_table.get_bool("log_queries", False),
        }
        status_table = root.sub("status")
        status_table.known(keys={"enabled"})
        status = {"enabled": status_table.get_bool("enabled", True)}
        cache = self.cache(root.sub("cache"))
        scraping_table = root.sub("scraping")
        scraping_table.known(keys={"enabled"})
        scraping = {"enabled": scraping_table.get_bool("enabled", False)}
        engines = self.engines(root.sub("engines"), scraping_on=scraping["enabled"])
        coordination = None
        if "coordination" in data:
            coordination = read_coordination(
                root.sub("coordination"), env_name=_env_name, path=_path
            )
        self.ports_need_allow(fetch["ports"], egress["allow"])
        structured: dict[str, Any] = {
            "config_version": version,
            "service": service,
            "search": search,
            "fetch": fetch,
            "egress": egress,
            "limits": limits,
            "resilience": resilience,
            "privacy": privacy,
            "logging": logging,
            "status": status,
            "cache": cache,
            "scraping": scraping,
        }
        if engines is not None:
            structured["engines"] = engines
        if coordination is not None:
            structured["coordination"] = coordination
        config = _structure_config(structured)
        self.definitions_fit(config)
        return config

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

    def simple_ints(
        self,
        table: Table,
        spec: Mapping[str, tuple[int, int, int]],
        *,
        others: frozenset[str] = frozenset(),
        tables: frozenset[str] = frozenset(),
    ) -> dict[str, Any]:
        """The integers of `spec`, once no key outside `spec`, `others` and `tables` is set."""
        table.known(keys=set(spec) | others, tables=tables)
        return {key: table.get_int(key, *bounds) for key, bounds in spec.items()}

    def search(self, t: Table) -> dict[str, Any]:
        out = self.simple_ints(
            t,
            _SEARCH_INTS,
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
        out["max_results"] = t.get_dependent_int(
            "max_results",
            5,
            1,
            ceiling,
            set_key="max_results_ceiling",
            unfit="must be at least 5 (search.max_results, default 5)",
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
        out["engine_timeout_ms"] = t.get_dependent_int(
            "engine_timeout_ms",
            2000,
            100,
            budget,
            set_key=set_key,
            unfit=f"must be at least {2000 + out['reserve_ms']} (search.engine_timeout_ms, default "
            f"2000, plus search.reserve_ms {out['reserve_ms']})"
            if set_key == "deadline_ms"
            else f"must be at most {out['deadline_ms'] - 2000} (search.deadline_ms "
            f"{out['deadline_ms']} minus search.engine_timeout_ms, default 2000)",
            why=f"search.deadline_ms {out['deadline_ms']} minus search.reserve_ms "
            f"{out['reserve_ms']}",
        )
        languages = t.get_texts("languages", ["en"], check=_language, non_empty=True, unique=True)
        out["languages"] = languages
        out["region"] = t.get_text("region", "US", check=_region)
        out["safe_search"] = t.get_choice("safe_search", "moderate", _SAFE_SEARCH)
        out["drop_flagged_results"] = t.get_bool("drop_flagged_results", False)
        out["engine_attribution"] = t.get_bool("engine_attribution", False)
        return out

    def fetch(self, t: Table) -> dict[str, Any]:
        out = self.simple_ints(
            t,
            _FETCH_INTS,
            others=frozenset(
                {"max_chars", "ports", "robots_txt", "follow_cross_host_redirects", "strict_mode"}
            ),
        )
        ceiling = out["max_chars_ceiling"]
        out["max_chars"] = t.get_dependent_int(
            "max_chars",
            3000,
            500,
            ceiling,
            set_key="max_chars_ceiling",
            unfit="must be at least 3000 (fetch.max_chars, default 3000)",
            why=f"fetch.max_chars_ceiling {ceiling}",
        )
        out["ports"] = t.get_ints("ports", [80, 443], 1, 65535)
        out["robots_txt"] = t.get_bool("robots_txt", True)
        out["follow_cross_host_redirects"] = t.get_bool("follow_cross_host_redirects", False)
        out["strict_mode"] = t.get_bool("strict_mode", False)
        return out

    def egress(self, t: Table) -> dict[str, Any]:
        t.known(keys={"allow_http", "allow", "deny", "proxy"})
        return {
            "allow_http": t.get_bool("allow_http", False),
            "allow": t.get_texts("allow", [], check=parse_egress_rule),
            "deny": t.get_texts("deny", [], check=parse_egress_rule),
            "proxy": t.get_text("proxy", "", check=_proxy),
        }

    def ports_need_allow(self, ports: list[int], allow: list[str]) -> None:
        for index, port in enumerate(ports):
            if port not in (80, 443) and not allow:
                raise self.fail(
                    ("fetch", "ports", index),
                    "a port other than 80 and 443 needs an egress.allow rule",
                )

    def service(self, t: Table, *, fetch_deadline_ms: int) -> dict[str, Any]:
        t.known(keys={"structured_content", "user_agent_contact", "shutdown_ms"}, tables={"http"})
        out: dict[str, Any] = {
            "structured_content": t.get_bool("structured_content", True),
            "user_agent_contact": t.get_text("user_agent_contact", "", check=_contact),
            "shutdown_ms": t.get_int("shutdown_ms", 3000, 500, 10000),
        }
        h = t.sub("http")
        http = self.simple_ints(
            h,
            _HTTP_INTS,
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
        least = max(3, math.ceil((fetch_deadline_ms + 2000) / 1000))
        if least > 600:  # fetch.deadline_ms is at most 30000, so this is never reached
            raise self.fail(("fetch", "deadline_ms"), "leaves no room for request_timeout_s")
        if "request_timeout_s" not in h.data and least > 30:
            raise self.fail(
                ("fetch", "deadline_ms"),
                "must be at most 28000 (service.http.request_timeout_s, default 30 s, minus 2 s)",
            )
        http["request_timeout_s"] = h.get_int(
            "request_timeout_s",
            30,
            least,
            600,
            why=f"fetch.deadline_ms {fetch_deadline_ms} plus 2 s",
        )
        # Below the idle time (issue 18.2): a connection that has begun a request is not
        # waiting for one. Unset, 10 s, or the idle time less 1 s when that is shorter.
        idle = http["idle_timeout_s"]
        head_ceiling = min(HEAD_TIMEOUT_MAX_S, idle - 1)
        http["head_timeout_s"] = h.get_int(
            "head_timeout_s",
            min(HEAD_TIMEOUT_DEFAULT_S, head_ceiling),
            1,
            head_ceiling,
            why=f"service.http.idle_timeout_s {idle} minus 1 s"
            if head_ceiling < HEAD_TIMEOUT_MAX_S
            else None,
        )
        http["bind"] = h.get_text("bind", "127.0.0.1:8737", check=parse_bind)
        http["allowed_hosts"] = h.get_texts("allowed_hosts", [], check=validate_allowed_host)
        http["allowed_origins"] = h.get_texts("allowed_origins", [], check=validate_origin)
        http["legacy_revisions"] = h.get_bool("legacy_revisions", True)
        auth = h.sub("auth")
        auth.known(keys={"callers"})
        callers = self.callers(auth)
        http["auth"] = {"callers": callers}
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
        out["http"] = http
        return out

    def callers(self, auth: Table) -> list[dict[str, Any]]:
        path = (*auth.path, "callers")
        raw = auth.data.get("callers", [])
        if not isinstance(raw, list):
            raise self.fail(
                path,
                f"expected an array of tables ([[service.http.auth.callers]]), "
                f"found {kind_of(raw)}",
            )
        callers: list[dict[str, Any]] = []
        seen: set[str] = set()
        for index, item in enumerate(raw):
            c = self.table(item, (*path, index))
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
            token_env = c.get_text("token_env", None, check=_env_name)
            token_file = c.get_text("token_file", None, check=_path)
            if token_env is None and token_file is None:
                raise self.missing(
                    (*c.path, "token_env"), "required, or token_file instead; give exactly one"
                )
            if token_env is not None and token_file is not None:
                raise self.fail(
                    (*c.path, "token_file"), "give one of token_env or token_file, not both"
                )
            callers.append({"id": caller_id, "token_env": token_env, "token_file": token_file})
        return callers

    def resilience(self, t: Table) -> dict[str, Any]:
        t.known(keys={"failures_to_open", "first_cooldown_s", "max_cooldown_s"})
        longest = t.get_int("max_cooldown_s", 900, 10, 3600)
        first_max = min(600, longest)
        t.default_fits(
            "first_cooldown_s",
            60,
            10,
            first_max,
            "max_cooldown_s",
            "must be at least 60 (resilience.first_cooldown_s, default 60)",
        )
        return {
            "failures_to_open": t.get_int("failures_to_open", 3, 1, 10),
            "first_cooldown_s": t.get_int(
                "first_cooldown_s",
                60,
                10,
                first_max,
                why=f"resilience.max_cooldown_s {longest}" if longest < 600 else None,
            ),
            "max_cooldown_s": longest,
        }

    def cache(self, t: Table) -> dict[str, Any]:
        t.known(keys={"enabled", "ttl_s", "max_entries", "max_entry_bytes"})
        return {
            "enabled": t.get_bool("enabled", False),
            "ttl_s": t.get_int("ttl_s", 300, 10, 3600),
            "max_entries": t.get_int("max_entries", 1000, 1, 100000),
            "max_entry_bytes": t.get_int("max_entry_bytes", 32768, 1024, 1048576),
        }

    def engines(self, t: Table, *, scraping_on: bool) -> list[dict[str, Any]] | None:
        if not t.data:
            return None  # no [engines.*] table: the two default engines
        engines: list[dict[str, Any]] = []
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
            engines.append(self.engine(self.table(raw, path), engine_id, scraping_on))
        arxiv = [e["id"] for e in engines if e["type"] == "arxiv" and e["enabled"]]
        if len(arxiv) > 1:
            # arXiv's terms allow one request every three seconds on one connection; each
            # engine has its own limiter, so a second enabled arxiv engine would double it.
            raise self.fail(
                (*t.path, arxiv[1], "type"),
                "only one arxiv engine can be enabled: the provider allows one request "
                "every three seconds on one connection",
            )
        return engines

    def engine(self, e: Table, engine_id: str, scraping_on: bool) -> dict[str, Any]:
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
            raise self.fail((*e.path, "type"), "no such driver")
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
            [],
            check=_category,
            non_empty=True,
            unique=True,
            words=", ".join(_CATEGORIES),
        )
        out: dict[str, Any] = {
            "id": engine_id,
            "type": kind,
            "categories": categories,
            "enabled": e.get_bool("enabled", True),
            "preference": e.get_int("preference", 100, 0, _PREFERENCE_MAX),
            "api_key_env": e.get_text("api_key_env", None, check=_env_name),
            "api_key_file": e.get_text("api_key_file", None, check=_path),
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
        out["endpoint"] = e.get_choice("endpoint", "web", ("web", "news"))
        if "base_url" in e.data and not traits.has_base_url:
            raise self.fail((*e.path, "base_url"), "only the wikipedia driver has a base_url")
        out["base_url"] = e.get_text("base_url", None, check=validate_base_url)
        if traits.base_url_required and out["base_url"] is None:
            raise self.missing(
                (*e.path, "base_url"),
                f"required; the address of the operator's own {kind} instance",
            )
        if "site" in e.data and not traits.has_site:
            raise self.fail((*e.path, "site"), "only the stackexchange driver has a site")
        out["site"] = e.get_text("site", "stackoverflow", check=_site)
        return out


# Integer keys without a dependent range: default, low, high (the limits table).
_SEARCH_INTS: Final = {
    "max_results_ceiling": (20, 1, 20),
    "query_max_chars": (400, 1, 600),
    "deadline_ms": (2500, 500, 10000),
    "connect_timeout_ms": (1000, 200, 5000),
    "reserve_ms": (200, 50, 1000),
    "engines_per_request": (8, 1, 16),
    "results_per_engine": (10, 5, 20),
    "snippet_max_chars": (300, 50, 1000),
    "title_max_chars": (150, 50, 300),
}
_FETCH_INTS: Final = {
    "max_chars_ceiling": (20000, 500, 100000),
    "max_bytes": (5242880, 65536, 10485760),
    "deadline_ms": (10000, 1000, 30000),
    "connect_timeout_ms": (3000, 500, 10000),
    "max_redirects": (5, 0, 10),
}
HEAD_TIMEOUT_DEFAULT_S: Final = 10
HEAD_TIMEOUT_MAX_S: Final = 60
_HTTP_INTS: Final = {
    "max_connections": (64, 1, 4096),
    "max_request_bytes": (65536, 4096, 1048576),
    "idle_timeout_s": (60, 5, 600),
    "max_streams": (16, 1, 256),
    "max_sessions": (256, 1, 2048),
}
_LIMITS: Final = {
    "outbound_in_flight": (32, 1, 256),
    "per_engine_in_flight": (2, 1, 8),
    "fetches_in_flight": (4, 1, 64),
    "parsing_in_flight": (2, 1, 16),
    "web_search_per_minute": (60, 1, 6000),
    "web_fetch_per_minute": (30, 1, 6000),
    "engine_status_per_minute": (30, 1, 6000),
    "strict_mode_urls": (10000, 100, 1000000),
    "robots_cache_entries": (1000, 10, 100000),
}


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


# -- structuring into the frozen classes -----------------------------------------------------


def _strict(kind: type[T]) -> Callable[[object, type], T]:
    def hook(value: object, _: type) -> T:
        # cattrs would coerce (int("5"), bool("false")); the validator already produced the
        # exact kinds, so anything else is a bug to surface, not to paper over.
        if type(value) is not kind:
            raise TypeError(f"expected {kind.__name__}, found {type(value).__name__}")
        return value

    return hook


@functools.cache
def _converter() -> cattrs.Converter:
    """The cattrs converter, built when a configuration is not of the exact kinds."""
    import cattrs

    converter = cattrs.Converter(forbid_extra_keys=True)
    for kind in (int, str, bool):
        converter.register_structure_hook(kind, _strict(kind))
    # The vocabularies subclass str: without their own hooks the str hook above would keep
    # the plain text instead of the enumeration member.
    for vocabulary in (Category, SafeSearch):
        converter.register_structure_hook(vocabulary, _member(vocabulary))
    return converter


def _member(vocabulary: type[E]) -> Callable[[object, type], E]:
    def hook(value: object, _: type) -> E:
        if type(value) is not str:
            raise TypeError(f"expected str, found {type(value).__name__}")
        return vocabulary(value)

    return hook


# -- the exact kinds, without cattrs -------------------------------------------------------
#
# What the validator hands over is always of the exact kinds (dicts for tables, lists for
# arrays, int, str and bool, the vocabularies' texts). For such values cattrs's structuring
# with the hooks above is a plain construction: an attrs class from the keys present (the
# others keep their defaults), a tuple from a list, None for an optional left out, a member
# from its text. That is done here directly: cattrs imports and generates a function per class
# (about 20 ms of a start). Anything else (a kind not exact, an extra key, a member that does
# not exist, a type this does not know) goes to cattrs, which builds it or raises as before.


class _NotExact(Exception):
    pass


_Build = typing.Callable[[object], object]


def _structure_config(structured: dict[str, Any]) -> Config:
    try:
        config: Config = _structure(structured, Config)
    except (_NotExact, TypeError, ValueError):
        # Not of the exact kinds, a key missing (the class's TypeError) or a member that does
        # not exist (the vocabulary's ValueError): cattrs builds it or raises as it always
        # did. Anything else is a defect of the direct path and is not hidden.
        return _converter().structure(structured, Config)
    return config


def _structure(value: object, cls: Any) -> Any:
    if type(value) is not dict:
        raise _NotExact
    names, plan = _plan(cls)
    if not value.keys() <= names:
        raise _NotExact
    return cls(**{name: build(value[name]) for name, build in plan if name in value})


@functools.cache
def _plan(cls: Any) -> tuple[frozenset[str], tuple[tuple[str, _Build], ...]]:
    hints = typing.get_type_hints(cls)
    plan = tuple((field.name, _builder(hints[field.name])) for field in attrs.fields(cls))
    return frozenset(name for name, _ in plan), plan


def _builder(kind: Any) -> _Build:
    if kind in (int, str, bool):
        return functools.partial(_exact, kind)
    if kind in (Category, SafeSearch):
        return functools.partial(_vocabulary, kind)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is types.UnionType and len(args) == 2 and type(None) in args:
        (inner,) = (arg for arg in args if arg is not type(None))
        return functools.partial(_optional, _builder(inner))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return functools.partial(_tuple, _builder(args[0]))
    if isinstance(kind, type) and attrs.has(kind):
        return functools.partial(_nested, kind)
    raise _NotExact


def _exact(kind: type, value: object) -> object:
    if type(value) is not kind:
        raise _NotExact
    return value


def _vocabulary(vocabulary: type[enum.Enum], value: object) -> object:
    if type(value) is not str:
        raise _NotExact
    return vocabulary(value)


def _optional(build: _Build, value: object) -> object:
    return None if value is None else build(value)


def _tuple(build: _Build, value: object) -> object:
    if type(value) is not list and type(value) is not tuple:
        raise _NotExact
    return tuple(build(item) for item in value)


def _nested(cls: type, value: object) -> object:
    return _structure(value, cls)
