"""Loading and validating the configuration (REQ-CFG-001/003/004/005, REQ-MAIN-003)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rypsok.config.load import (
    ConfigError,
    load_config,
    load_config_bytes,
    load_config_text,
    locate_config,
)
from rypsok.config.schema import Config, EngineConfig, default_engines
from rypsok.config.secrets import engine_credential, read_caller_tokens
from rypsok.core.model import Category, SafeSearch
from rypsok.core.telemetry import Secret
from rypsok.shared.drivers import DRIVER_TYPES

TOKEN = "t" * 32


def refuse(text: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config_text(text, env or {}, source="test")
    message = str(info.value)
    assert "\n" not in message
    return message


def v1(body: str) -> str:
    return "config_version = 1\n" + body


# -- locating the file, defaults ------------------------------------------------------------


def test_req_cfg_001_config_flag_wins_over_the_environment(tmp_path):
    flag = tmp_path / "flag.toml"
    flag.write_text(v1("[search]\nmax_results = 7\n"))
    other = tmp_path / "env.toml"
    other.write_text(v1("[search]\nmax_results = 9\n"))
    env = {"RYPSOK_CONFIG": str(other)}
    assert load_config(str(flag), env).search.max_results == 7
    assert load_config(None, env).search.max_results == 9
    assert locate_config(None, env).describe() == f"configuration from RYPSOK_CONFIG {other}"
    assert locate_config(str(flag), env).describe() == f"configuration from --config {flag}"


def test_req_cfg_003_no_file_is_the_defaults_with_the_two_default_engines():
    config = load_config(None, {})
    assert config == Config()
    assert locate_config(None, {}).describe() == "no configuration file: defaults"
    assert [e.id for e in config.engines] == ["wikipedia", "brave"]
    assert config.engines == default_engines()
    brave = config.engines[1]
    assert brave.api_key_env == "BRAVE_API_KEY"
    assert not engine_credential(brave, {}).active
    assert engine_credential(config.engines[0], {}).active


def test_req_cfg_003_every_default_is_the_limits_table():
    c = load_config_text("config_version = 1\n", {}, source="t")
    s, f, h, lim = c.search, c.fetch, c.service.http, c.limits
    assert (s.max_results, s.max_results_ceiling, s.query_max_chars) == (5, 20, 400)
    assert (s.deadline_ms, s.engine_timeout_ms, s.reserve_ms, s.connect_timeout_ms) == (
        2500,
        2000,
        200,
        1000,
    )
    assert (s.engines_per_request, s.results_per_engine) == (8, 10)
    assert (s.snippet_max_chars, s.title_max_chars) == (300, 150)
    assert s.languages == ("en",)
    assert s.region == "US"
    assert s.safe_search is SafeSearch.MODERATE
    assert (f.max_chars, f.max_chars_ceiling, f.max_bytes) == (3000, 20000, 5 * 1024 * 1024)
    assert (f.deadline_ms, f.connect_timeout_ms, f.max_redirects, f.ports) == (
        10000,
        3000,
        5,
        (80, 443),
    )
    assert (h.max_connections, h.max_request_bytes, h.idle_timeout_s) == (64, 65536, 60)
    assert (h.max_streams, h.request_timeout_s, h.max_sessions) == (16, 30, 256)
    assert h.bind == "127.0.0.1:8737"
    assert h.legacy_revisions is True
    assert (lim.outbound_in_flight, lim.per_engine_in_flight, lim.fetches_in_flight) == (32, 2, 4)
    assert (lim.parsing_in_flight, lim.web_search_per_minute) == (2, 60)
    assert (lim.web_fetch_per_minute, lim.engine_status_per_minute) == (30, 30)
    assert (lim.strict_mode_urls, lim.robots_cache_entries) == (10000, 1000)
    assert (c.resilience.failures_to_open, c.resilience.first_cooldown_s) == (3, 60)
    assert c.resilience.max_cooldown_s == 900
    assert c.privacy.secret_detection == "refuse"
    assert (c.logging.level, c.logging.log_queries) == ("info", False)
    assert (c.cache.enabled, c.cache.ttl_s, c.cache.max_entries) == (False, 300, 1000)
    assert c.cache.max_entry_bytes == 32768
    assert c.scraping.enabled is False
    assert c.status.enabled is True
    assert c.service.shutdown_ms == 3000


def test_req_cfg_001_values_are_plain_python_values_and_vocabularies():
    c = load_config_text(
        v1(
            '[search]\nlanguages = ["en", "ja"]\nsafe_search = "strict"\n'
            '[engines.w]\ntype = "wikipedia"\ncategories = ["science"]\n'
        ),
        {},
        source="t",
    )
    assert type(c.search.languages[1]) is str
    assert type(c.search.max_results) is int
    assert c.search.safe_search is SafeSearch.STRICT
    assert c.engines == (EngineConfig(id="w", type="wikipedia", categories=(Category.SCIENCE,)),)
    assert type(c.engines[0].categories[0]) is Category


def test_req_cfg_005_a_missing_file_is_refused_naming_it(tmp_path):
    with pytest.raises(ConfigError, match=r"^configuration from --config .*: no such file$"):
        load_config(str(tmp_path / "absent.toml"), {})


# -- the schema version ----------------------------------------------------------------------


def test_req_main_003_config_version_is_required():
    assert refuse("[search]\nmax_results = 5\n") == (
        "config_version: required; this release reads config_version = 1"
    )


def test_req_main_003_an_unknown_version_is_refused():
    assert refuse("config_version = 2\n") == (
        "config_version: this release reads version 1, found another version (line 1, column 18)"
    )
    assert refuse('config_version = "1"\n').startswith(
        "config_version: expected the integer 1, found text"
    )


# -- wrong kinds and ranges -----------------------------------------------------------------


def test_req_cfg_005_a_wrong_kind_of_value_names_its_key():
    assert refuse(v1('[search]\nmax_results = "five"\n')) == (
        "search.max_results: expected an integer from 1 to 20, found text (line 3, column 15)"
    )
    assert refuse(v1("[search]\nmax_results = 2.5\n")) == (
        "search.max_results: expected an integer from 1 to 20, found a decimal number "
        "(line 3, column 15)"
    )
    assert refuse(v1("[search]\nmax_results = -3\n")) == (
        "search.max_results: expected an integer from 1 to 20, found a negative number "
        "(line 3, column 15)"
    )
    assert refuse(v1("[search]\nmax_results = true\n")) == (
        "search.max_results: expected an integer from 1 to 20, found a boolean (line 3, column 15)"
    )
    assert refuse(v1("[limits]\nfetches_in_flight = 65\n")) == (
        "limits.fetches_in_flight: expected an integer from 1 to 64, found a number above 64 "
        "(line 3, column 21)"
    )
    assert refuse(v1('[fetch]\nrobots_txt = "false"\n')) == (
        "fetch.robots_txt: expected true or false (without quotes), found text (line 3, column 14)"
    )
    assert refuse(v1("[search]\nsafe_search = 1\n")).startswith(
        "search.safe_search: expected one of off, moderate, strict, found an integer"
    )


# The limits table gives no range for these keys (the Configuration chapter does); every
# key with a range in the table is checked against the table in test_config_limits.py.
@pytest.mark.parametrize(
    ("table", "key", "lo", "hi"),
    [
        ("search", "max_results_ceiling", 1, 20),
        ("limits", "strict_mode_urls", 100, 1000000),
        ("limits", "robots_cache_entries", 10, 100000),
        ("resilience", "max_cooldown_s", 10, 3600),
    ],
)
def test_req_cfg_005_ranges_the_limits_table_does_not_give(table, key, lo, hi):
    # Keys whose own range bounds another key's: that key is set to fit.
    companions = {
        "max_results_ceiling": "max_results = 1\n",
        "deadline_ms": "engine_timeout_ms = 100\n" if table == "search" else "",
        "reserve_ms": "engine_timeout_ms = 100\n",
        "max_chars_ceiling": "max_chars = 500\n",
        "max_cooldown_s": "first_cooldown_s = 10\n",
    }

    def text(value: int) -> str:
        body = f"[{table}]\n{key} = {value}\n{companions.get(key, '')}"
        if table == "fetch" and key == "deadline_ms":
            # request_timeout_s must stay at least deadline + 2 s.
            body += "[service.http]\nrequest_timeout_s = 600\n"
        return v1(body)

    def value_of(config: Config) -> int:
        node: object = config
        for part in (*table.split("."), key):
            node = getattr(node, part)
        assert isinstance(node, int)
        return node

    assert value_of(load_config_text(text(lo), {}, source="t")) == lo
    assert value_of(load_config_text(text(hi), {}, source="t")) == hi
    if lo > 0:
        below = refuse(text(lo - 1))
        assert below.startswith(f"{table}.{key}: expected an integer from {lo} to ")
    above = refuse(text(hi + 1))
    assert above.startswith(f"{table}.{key}: expected an integer from ")
    assert "above" in above


def test_req_cfg_005_dependent_range_names_the_other_keys_and_their_values():
    assert refuse(v1("[search]\ndeadline_ms = 500\nengine_timeout_ms = 400\n")) == (
        "search.engine_timeout_ms: must be between 100 and 300 "
        "(search.deadline_ms 500 minus search.reserve_ms 200)"
    )
    assert refuse(v1("[search]\nmax_results_ceiling = 10\nmax_results = 12\n")) == (
        "search.max_results: must be between 1 and 10 (search.max_results_ceiling 10)"
    )
    assert refuse(v1("[fetch]\nmax_chars_ceiling = 1000\nmax_chars = 2000\n")) == (
        "fetch.max_chars: must be between 500 and 1000 (fetch.max_chars_ceiling 1000)"
    )
    assert refuse(v1("[fetch]\ndeadline_ms = 20000\n[service.http]\nrequest_timeout_s = 20\n")) == (
        "service.http.request_timeout_s: must be between 22 and 600 "
        "(fetch.deadline_ms 20000 plus 2 s)"
    )
    assert refuse(v1("[resilience]\nfirst_cooldown_s = 120\nmax_cooldown_s = 100\n")) == (
        "resilience.first_cooldown_s: must be between 10 and 100 (resilience.max_cooldown_s 100)"
    )


def test_req_cfg_005_a_default_outside_its_dependent_range_is_reported_on_the_key_written():
    assert refuse(v1("[resilience]\nmax_cooldown_s = 30\n")) == (
        "resilience.max_cooldown_s: must be at least 60 (resilience.first_cooldown_s, default 60) "
        "(line 3, column 18)"
    )
    assert refuse(v1("[fetch]\ndeadline_ms = 29000\n")).startswith("fetch.deadline_ms: must be")
    assert refuse(v1("[search]\nmax_results_ceiling = 3\n")).startswith(
        "search.max_results_ceiling: must be at least 5"
    )
    assert refuse(v1("[search]\ndeadline_ms = 2000\n")).startswith(
        "search.deadline_ms: must be at least 2200"
    )
    assert refuse(v1("[fetch]\nmax_chars_ceiling = 1000\n")).startswith(
        "fetch.max_chars_ceiling: must be at least 3000"
    )


def test_req_cfg_005_the_connect_timeout_and_the_shutdown_time_are_keys():
    c = load_config_text(
        v1("[search]\nconnect_timeout_ms = 300\n[service]\nshutdown_ms = 800\n"), {}, source="t"
    )
    assert c.search.connect_timeout_ms == 300
    assert c.service.shutdown_ms == 800


# -- unknown keys, syntax, duplicates --------------------------------------------------------


def test_req_cfg_005_unknown_keys_and_tables_are_refused():
    assert refuse(v1("[search]\nmax_resluts = 5\n")) == (
        "search.max_resluts: unknown key (line 3, column 15); did you mean max_results?"
    )
    assert refuse(v1("[serch]\nmax_results = 5\n")).startswith("serch: unknown table")
    assert refuse(v1("transport = 1\n")).startswith("transport: unknown key")
    assert refuse(v1("[service.http.auth]\nmode = 1\n")).startswith(
        "service.http.auth.mode: unknown key"
    )


def test_req_cfg_005_an_unknown_key_that_is_not_a_plain_word_is_not_repeated():
    message = refuse(v1('[search]\n"sk-live-4242 abc" = 1\n'))
    assert "sk-live-4242" not in message
    assert message.startswith("search: an unknown key")


def test_req_cfg_005_toml_syntax_errors_give_the_place():
    assert refuse("abcde\n") == (
        "TOML syntax error: expected '=' after a key in a key/value pair (line 1, column 6)"
    )
    assert refuse("config_version = = 1\n").startswith("TOML syntax error: ")
    message = refuse("config_version = 1\nx = 'secret\x01value'\n")
    assert message.startswith("TOML syntax error: ")
    assert "(line 2, column " in message
    assert "secret" not in message
    assert "\\x01" not in message


def test_req_cfg_005_a_file_that_is_not_utf8_is_a_syntax_error_with_its_place():
    with pytest.raises(ConfigError) as info:
        load_config_bytes(b"config_version = 1\nx = '\xff'\n", {}, source="t")
    assert str(info.value) == "TOML syntax error: the file is not UTF-8 text (line 2, column 6)"


def test_req_cfg_005_duplicated_tables_and_keys_are_named_with_the_place():
    text = (
        'config_version = 1\n[engines.w]\ntype = "wikipedia"\ncategories = ["general"]\n'
        '[engines.w]\ntype = "wikipedia"\n'
    )
    assert refuse(text) == "engines.w: defined more than once (line 5, column 10)"
    assert refuse(v1("[search]\nmax_results = 1\nmax_results = 2\n")) == (
        "search.max_results: defined more than once (line 4, column 1)"
    )
    assert refuse(v1("[search]\n[search]\n")) == "search: defined more than once (line 3, column 2)"


# -- secrets by reference --------------------------------------------------------------------


def brave(extra: str) -> str:
    return v1(f'[engines.b]\ntype = "brave"\ncategories = ["general"]\n{extra}')


def test_req_cfg_004_an_inline_api_key_is_refused_and_not_repeated():
    message = refuse(brave('api_key = "BSAsecretvalue123"\n'))
    assert message == (
        "engines.b.api_key: give the secret by api_key_env or api_key_file (line 5, column 11)"
    )


def test_req_cfg_004_an_env_reference_that_is_not_a_name_is_refused_unshown():
    message = refuse(brave('api_key_env = "BSAf00-secret/value"\n'))
    assert message == (
        "engines.b.api_key_env: the value is not the name of an environment variable "
        "(it is not shown) (line 5, column 15)"
    )
    caller = v1('[[service.http.auth.callers]]\nid = "a"\ntoken_env = "abc def"\n')
    assert refuse(caller).startswith(
        "service.http.auth.callers[0].token_env: the value is not the name of an environment "
        "variable (it is not shown)"
    )


def test_req_cfg_004_a_missing_key_makes_the_engine_inactive_not_an_error(tmp_path):
    config = load_config_text(brave('api_key_env = "BRAVE_API_KEY"\n'), {}, source="t")
    credential = engine_credential(config.engines[0], {})
    assert not credential.active
    assert credential.state == "inactive: environment variable BRAVE_API_KEY is unset or empty"
    resolved = engine_credential(config.engines[0], {"BRAVE_API_KEY": "k" * 20})
    assert resolved.active
    assert resolved.state == "credential resolved"
    assert isinstance(resolved.secret, Secret)
    assert resolved.secret.reveal() == "k" * 20
    key_file = tmp_path / "key"
    key_file.write_text("  filekey\n")
    by_file = load_config_text(brave(f'api_key_file = "{key_file}"\n'), {}, source="t")
    got = engine_credential(by_file.engines[0], {})
    assert got.secret is not None
    assert got.secret.reveal() == "filekey"
    unreadable = load_config_text(brave(f'api_key_file = "{tmp_path / "none"}"\n'), {}, source="t")
    assert engine_credential(unreadable.engines[0], {}).state.startswith("inactive: ")


def test_req_cfg_004_a_keyless_driver_takes_no_credential_and_a_keyed_one_only_one():
    wiki = v1('[engines.w]\ntype = "wikipedia"\ncategories = ["general"]\napi_key_env = "K"\n')
    assert refuse(wiki).startswith(
        "engines.w.api_key_env: the wikipedia driver takes no credential"
    )
    both = brave('api_key_env = "K"\napi_key_file = "/k"\n')
    assert refuse(both).startswith(
        "engines.b.api_key_file: give one of api_key_env or api_key_file, not both"
    )


# -- callers and their tokens ----------------------------------------------------------------


def callers(*tables: str, bind: str = "127.0.0.1:8737") -> str:
    body = f'[service.http]\nbind = "{bind}"\nallowed_hosts = ["h.example"]\n'
    for t in tables:
        body += f"[[service.http.auth.callers]]\n{t}"
    return v1(body)


def test_req_cfg_004_caller_tokens_are_read_as_serve_reads_them(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("f" * 40 + "\n")
    text = callers(
        'id = "mimlys"\ntoken_env = "TOK"\n', f'id = "ops"\ntoken_file = "{token_file}"\n'
    )
    config = load_config_text(text, {"TOK": TOKEN}, source="t")
    tokens = read_caller_tokens(config, {"TOK": TOKEN})
    assert sorted(tokens) == ["mimlys", "ops"]
    assert tokens["ops"].reveal() == "f" * 40
    assert repr(tokens["mimlys"]) == "[redacted]"
    assert refuse(text, {}) == (
        "service.http.auth.callers[0].token_env: environment variable TOK is unset or empty"
    )
    short = refuse(text, {"TOK": "s" * 31})
    assert short == "service.http.auth.callers[0].token_env: the token is shorter than 32 bytes"
    assert "s" * 31 not in short


def test_req_cfg_004_an_unreadable_or_empty_token_file_is_refused(tmp_path):
    text = callers(f'id = "ops"\ntoken_file = "{tmp_path / "absent"}"\n')
    assert refuse(text) == "service.http.auth.callers[0].token_file: the file does not exist"
    empty = tmp_path / "empty"
    empty.write_text("  \n")
    assert refuse(callers(f'id = "ops"\ntoken_file = "{empty}"\n')) == (
        "service.http.auth.callers[0].token_file: the file is empty"
    )


def test_req_cfg_004_a_caller_needs_exactly_one_token_reference_and_a_valid_unique_id():
    assert refuse(callers('id = "a"\n')) == (
        "service.http.auth.callers[0].token_env: required, or token_file instead; give exactly "
        "one (line 6, column 6)"
    )
    assert refuse(callers('id = "a"\ntoken_env = "A"\ntoken_file = "/x"\n')).startswith(
        "service.http.auth.callers[0].token_file: give one of token_env or token_file, not both"
    )
    assert refuse(callers('token_env = "A"\n')).startswith(
        "service.http.auth.callers[0].id: required; lowercase letters"
    )
    assert refuse(callers('id = "Bad-Id"\ntoken_env = "A"\n')).startswith(
        "service.http.auth.callers[0].id: expected lowercase letters"
    )
    dup = callers('id = "a"\ntoken_env = "A"\n', 'id = "a"\ntoken_env = "B"\n')
    assert refuse(dup, {"A": TOKEN, "B": TOKEN + "x"}).startswith(
        "service.http.auth.callers[1].id: defined more than once"
    )
    inline = refuse(callers('id = "a"\ntoken = "0123456789abcdef0123456789abcdef"\n'))
    assert inline.startswith("service.http.auth.callers[0].token: give the token by token_env")
    assert "0123456789abcdef" not in inline


def test_req_cfg_005_two_callers_with_the_same_token_are_refused():
    text = callers('id = "a"\ntoken_env = "A"\n', 'id = "b"\ntoken_env = "B"\n')
    assert refuse(text, {"A": TOKEN, "B": TOKEN}).startswith(
        "service.http.auth.callers[1].token_env: the token is the same as the token of "
        "service.http.auth.callers[0]; give each caller its own"
    )


def test_req_cfg_005_a_file_without_callers_reads_no_token():
    config = load_config_text(v1('[service.http]\nbind = "127.0.0.1:9000"\n'), {}, source="t")
    assert read_caller_tokens(config, {}) == {}


# -- the bind ------------------------------------------------------------------------------


def test_req_cfg_005_a_non_loopback_bind_needs_callers():
    assert refuse(v1('[service.http]\nbind = "192.0.2.7:8737"\n')) == (
        "service.http.bind: a non-loopback bind needs [service.http.auth] callers"
    )


def test_req_cfg_005_an_unspecified_bind_needs_allowed_hosts():
    for bind in ("0.0.0.0:8737", "[::]:8737"):
        text = v1(
            f'[service.http]\nbind = "{bind}"\n'
            '[[service.http.auth.callers]]\nid = "a"\ntoken_env = "A"\n'
        )
        assert refuse(text, {"A": TOKEN}) == (
            "service.http.bind: a bind on an unspecified address (0.0.0.0, ::) needs "
            "service.http.allowed_hosts"
        )


def test_req_cfg_005_bind_forms():
    for good in ("127.0.0.1:1", "[::1]:8737", "localhost:8737", "127.5.0.1:65535"):
        load_config_text(v1(f'[service.http]\nbind = "{good}"\n'), {}, source="t")
    for bad in ("127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "::1:80", "host:80", "[::1]"):
        assert refuse(v1(f'[service.http]\nbind = "{bad}"\n')).startswith("service.http.bind: ")


def test_req_cfg_005_allowed_hosts_and_origins_forms():
    ok = v1(
        '[service.http]\nallowed_hosts = ["a.example", "a.example:443", "[::1]:80", "10.0.0.1"]\n'
        'allowed_origins = ["https://a.example", "http://localhost:*", "null"]\n'
    )
    load_config_text(ok, {}, source="t")
    assert refuse(v1('[service.http]\nallowed_hosts = ["a..b"]\n')).startswith(
        "service.http.allowed_hosts[0]: "
    )
    assert refuse(v1('[service.http]\nallowed_origins = ["a.example"]\n')).startswith(
        "service.http.allowed_origins[0]: expected an origin with a scheme"
    )
    assert refuse(v1('[service.http]\nallowed_origins = ["https://a.example/path"]\n')).startswith(
        "service.http.allowed_origins[0]: an origin is a scheme, a host and a port"
    )


# -- egress rules and ports ------------------------------------------------------------------


def test_req_cfg_005_egress_rules_are_parsed():
    config = load_config_text(
        v1(
            '[egress]\nallow = ["10.0.0.0/8", "fd00::/8", "192.0.2.1", "wiki.corp.example", '
            '"*.corp.example", "Docs.RS"]\ndeny = ["blocked.example"]\n'
        ),
        {},
        source="t",
    )
    assert len(config.egress.allow) == 6


@pytest.mark.parametrize(
    ("rule", "sentence"),
    [
        ("blocked.invalid.", "a host pattern must not end with a dot"),
        (".blocked.invalid", "a host pattern must not start with a dot"),
        ("a..example", "a host pattern must not have an empty label"),
        ("https://a.example", "never a scheme"),
        ("a.example:8080", "never a port"),
        ("10.0.0.1/8", "no bits set after the prefix"),
        ("a.*.example", "* only as its whole first label"),
        ("bad_name!", "is not a valid name"),
    ],
)
def test_req_cfg_005_a_malformed_egress_rule_is_refused(rule, sentence):
    message = refuse(v1(f'[egress]\ndeny = ["{rule}"]\n'))
    assert message.startswith("egress.deny[0]: ")
    assert sentence in message
    assert rule not in message


def test_req_cfg_005_the_book_message_for_a_trailing_dot():
    assert refuse(v1('[egress]\ndeny = ["blocked.invalid."]\n')) == (
        "egress.deny[0]: a host pattern must not end with a dot (line 3, column 9)"
    )


def test_req_cfg_005_another_port_needs_an_egress_allow_rule():
    assert refuse(v1("[fetch]\nports = [80, 443, 8080]\n")) == (
        "fetch.ports[2]: a port other than 80 and 443 needs an egress.allow rule "
        "(line 3, column 19)"
    )
    config = load_config_text(
        v1('[fetch]\nports = [443, 8443]\n[egress]\nallow = ["wiki.corp.example"]\n'),
        {},
        source="t",
    )
    assert config.fetch.ports == (443, 8443)
    assert refuse(v1("[fetch]\nports = [0]\n")).startswith(
        "fetch.ports[0]: expected an integer from 1 to 65535"
    )
    assert refuse(v1("[fetch]\nports = [80, 80]\n")).startswith("fetch.ports[1]: listed more")
    assert refuse(v1("[fetch]\nports = []\n")).startswith("fetch.ports: expected at least one")


def test_req_cfg_005_proxy_is_validated_and_never_repeated():
    load_config_text(v1('[egress]\nproxy = "http://user:pw@proxy.example:3128"\n'), {}, source="t")
    message = refuse(v1('[egress]\nproxy = "ftp://secretproxy.example"\n'))
    assert message.startswith("egress.proxy: ")
    assert "secretproxy" not in message


# -- engines ------------------------------------------------------------------------------


def test_req_eng_004_an_unknown_driver_is_refused():
    assert refuse(v1('[engines.x]\ntype = "bing"\ncategories = ["general"]\n')) == (
        "engines.x.type: no such driver (line 3, column 8); the driver types are "
        + ", ".join(DRIVER_TYPES)
    )


def test_req_cfg_005_engine_ids_and_required_keys():
    assert refuse(v1('[engines.Web]\ntype = "wikipedia"\ncategories = ["general"]\n')).startswith(
        "engines.Web: an engine id is lowercase letters, digits and underscores"
    )
    assert refuse(v1('[engines.1w]\ntype = "wikipedia"\ncategories = ["general"]\n')).startswith(
        "engines.1w: an engine id"
    )
    assert refuse(v1('[engines.w]\ncategories = ["general"]\n')).startswith(
        "engines.w.type: required; one of wikipedia, brave, duckduckgo, searxng, "
        "stackexchange, arxiv, hackernews, crossref (line 3, column 14)"
    )
    assert refuse(v1('[engines.w]\ntype = "wikipedia"\n')).startswith(
        "engines.w.categories: required; at least one of general, news, science, code "
        "(line 3, column 8)"
    )
    assert refuse(v1('[engines.w]\ntype = "wikipedia"\ncategories = []\n')).startswith(
        "engines.w.categories: expected an array of words: general, news, science, code, "
        "at least one"
    )
    assert refuse(v1('[engines.w]\ntype = "wikipedia"\ncategories = ["images"]\n')).startswith(
        "engines.w.categories[0]: expected one of general, news, science, code, found an "
        "unknown word"
    )


def test_req_eng_013_the_scraping_type_needs_the_switch():
    text = v1('[engines.ddg]\ntype = "duckduckgo"\ncategories = ["general"]\n')
    assert refuse(text) == (
        'engines.ddg: type "duckduckgo" scrapes a human-facing interface; it runs only with '
        "[scraping] enabled = true, at the operator's risk under the provider's terms"
    )
    config = load_config_text(text + "[scraping]\nenabled = true\n", {}, source="t")
    assert config.engines[0].type == "duckduckgo"


def test_req_cfg_005_endpoint_is_brave_only_and_base_url_wikipedia_only():
    news = load_config_text(brave('endpoint = "news"\napi_key_env = "K"\n'), {}, source="t")
    assert news.engines[0].endpoint == "news"
    assert refuse(brave('endpoint = "images"\n')).startswith(
        "engines.b.endpoint: expected one of web, news, found an unknown word"
    )
    wiki = '[engines.w]\ntype = "wikipedia"\ncategories = ["general"]\n'
    assert refuse(v1(wiki + 'endpoint = "web"\n')).startswith(
        "engines.w.endpoint: only the brave driver has an endpoint"
    )
    assert refuse(brave('base_url = "https://x.example"\n')).startswith(
        "engines.b.base_url: only the wikipedia driver has a base_url"
    )
    for good in (
        "https://wiki.corp.example/w/api.php",
        "http://127.0.0.1:8080/w/api.php",
        "http://[::1]/api.php",
        "http://localhost/api.php",
    ):
        load_config_text(v1(wiki + f'base_url = "{good}"\n'), {}, source="t")
    for bad in (
        "http://wiki.corp.example/api.php",
        "wiki.example/api.php",
        "ftp://a.example/",
        "https://user:pw@a.example/",
    ):
        message = refuse(v1(wiki + f'base_url = "{bad}"\n'))
        assert message.startswith("engines.w.base_url: ")
        assert bad not in message


def test_req_eng_003_an_engine_can_be_disabled():
    config = load_config_text(
        v1('[engines.w]\ntype = "wikipedia"\ncategories = ["general"]\nenabled = false\n'),
        {},
        source="t",
    )
    assert config.engines[0].enabled is False


def test_req_cfg_005_search_texts_are_validated():
    assert refuse(v1('[search]\nregion = "us"\n')).startswith("search.region: expected two")
    assert refuse(v1("[search]\nlanguages = []\n")).startswith("search.languages: expected")
    assert refuse(v1('[search]\nlanguages = ["english!"]\n')).startswith(
        "search.languages[0]: expected a language tag"
    )
    assert refuse(v1('[service]\nuser_agent_contact = "a)b"\n')).startswith(
        "service.user_agent_contact: "
    )


# -- properties ------------------------------------------------------------------------------

_KEYS = [
    ("search", "max_results"),
    ("search", "region"),
    ("search", "languages"),
    ("search", "safe_search"),
    ("fetch", "ports"),
    ("fetch", "robots_txt"),
    ("egress", "allow"),
    ("egress", "proxy"),
    ("service.http", "bind"),
    ("logging", "level"),
    ("privacy", "secret_detection"),
    ("cache", "enabled"),
]
_MARK = "Zq7SECRETzq"
_VALUES = st.sampled_from(
    [
        f'"{_MARK}"',
        f'["{_MARK}"]',
        "12.5",
        "-4",
        "true",
        f"{{ a = '{_MARK}' }}",
        "1979-05-27",
        f'"{_MARK}.example."',
        f'["*.{_MARK}"]',
        "99999999999",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_KEYS), _VALUES), min_size=1, max_size=4))
def test_req_cfg_005_no_message_repeats_a_value_from_the_file(pairs):
    tables: dict[str, dict[str, str]] = {}
    for (table, key), value in pairs:
        tables.setdefault(table, {})[key] = value
    text = "config_version = 1\n" + "".join(
        f"[{table}]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items())
        for table, keys in tables.items()
    )
    try:
        load_config_text(text, {}, source="t")
    except ConfigError as exc:
        message = str(exc)
        assert "\n" not in message
        assert _MARK.lower() not in message.lower()


# -- a table written in pieces (tomlkit's out-of-order tables) ---------------------------------

_PIECES = (
    '[[service.http.auth.callers]]\nid = "a"\ntoken_env = "T"\n'
    "[search]\nmax_results = 7\n"
    "[service.http]\n"
)
_TOKEN = {"T": "t" * 40}


def test_req_cfg_005_a_table_written_in_pieces_is_read_whole() -> None:
    config = load_config_text(
        v1(_PIECES + 'bind = "127.0.0.1:9000"\nmax_connections = 10\nlegacy_revisions = false\n'),
        _TOKEN,
    )
    http = config.service.http
    assert (http.bind, http.max_connections, http.legacy_revisions) == (
        "127.0.0.1:9000",
        10,
        False,
    )
    assert [c.id for c in http.auth.callers] == ["a"]
    assert config.search.max_results == 7


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "max_connections = true\n",
            "service.http.max_connections: expected an integer from 1 to 4096, found a boolean "
            "(line 8, column 19)",
        ),
        ('bind = "127.0.0.1:0"\n', "service.http.bind: the port must be between 1 and 65535"),
        ("surprise = 1\n", "service.http.surprise: unknown key (line 8, column 12)"),
    ],
)
def test_req_cfg_005_a_piece_of_a_table_is_checked_with_its_place(line: str, message: str) -> None:
    assert refuse(v1(_PIECES + line), _TOKEN).startswith(message)


def test_req_cfg_005_a_token_file_holding_another_callers_token_is_named(tmp_path):
    # The message names the key that holds the second token, token_file here.
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    text = callers('id = "a"\ntoken_env = "A"\n', f'id = "b"\ntoken_file = "{token_file}"\n')
    assert refuse(text, {"A": TOKEN}).startswith(
        "service.http.auth.callers[1].token_file: the token is the same as the token of "
        "service.http.auth.callers[0]; give each caller its own"
    )


@pytest.mark.parametrize(
    "tag",
    ["en", "fil", "EN", "pt-BR", "zh-Hant-TW", "es-419", "sl-rozaj-biske-1994", "de-abcdefgh"],
)
def test_req_cfg_005_a_language_tag_of_two_or_three_letters_and_up_to_three_subtags_is_read(
    tag: str,
) -> None:
    config = load_config_text(v1(f'[search]\nlanguages = ["{tag}"]\n'), {}, source="test")
    assert config.search.languages == (tag,)


@pytest.mark.parametrize(
    "tag",
    ["e", "engl", "en-", "en--US", "de-abcdefghi", "en-a-b-c-d", "en_US", "e1", "en-U$"],
)
def test_req_cfg_005_a_language_tag_of_another_shape_is_refused(tag: str) -> None:
    assert refuse(v1(f'[search]\nlanguages = ["{tag}"]\n')).startswith(
        "search.languages[0]: expected a language tag"
    )


def test_req_cfg_005_the_search_deadline_leaves_at_least_100_ms_to_the_engines() -> None:
    # search.deadline_ms minus search.reserve_ms is the engines' time: 100 ms is the least.
    body = "[search]\ndeadline_ms = 600\nengine_timeout_ms = 100\nreserve_ms = {}\n"
    config = load_config_text(v1(body.format(500)), {}, source="test")
    assert (config.search.reserve_ms, config.search.engine_timeout_ms) == (500, 100)
    assert refuse(v1(body.format(501))).startswith(
        "search.reserve_ms: must leave at least 100 ms for search.engine_timeout_ms "
        "(search.deadline_ms 600 minus search.reserve_ms 501)"
    )


def test_req_cfg_005_the_first_cooldown_names_the_longest_only_when_it_is_the_bound() -> None:
    # LIM-B2 ends at 600 s; a shorter max_cooldown_s is the bound then, and the message says so.
    assert refuse(v1("[resilience]\nmax_cooldown_s = 600\nfirst_cooldown_s = 601\n")) == (
        "resilience.first_cooldown_s: expected an integer from 10 to 600, found a number above "
        "600 (line 4, column 20)"
    )
    assert refuse(v1("[resilience]\nmax_cooldown_s = 599\nfirst_cooldown_s = 600\n")) == (
        "resilience.first_cooldown_s: must be between 10 and 599 (resilience.max_cooldown_s 599)"
    )


def test_lim_h5_the_fetch_deadline_fits_the_default_request_timeout_to_the_millisecond() -> None:
    # LIM-H5's default 30 s holds a web_fetch of 28 s and its 2 s; one millisecond more needs
    # a longer request_timeout_s.
    config = load_config_text(v1("[fetch]\ndeadline_ms = 28000\n"), {}, source="test")
    assert config.fetch.deadline_ms == 28000
    assert refuse(v1("[fetch]\ndeadline_ms = 28001\n")).startswith(
        "fetch.deadline_ms: must be at most 28000 (service.http.request_timeout_s, default 30 s, "
        "minus 2 s)"
    )
    longer = "[fetch]\ndeadline_ms = 28001\n[service.http]\nrequest_timeout_s = 31\n"
    assert load_config_text(v1(longer), {}, source="test").service.http.request_timeout_s == 31


def test_req_sec_021_strict_mode_is_read_from_the_fetch_table() -> None:
    config = load_config_text(v1("[fetch]\nstrict_mode = true\n"), {}, source="test")
    assert config.fetch.strict_mode is True
