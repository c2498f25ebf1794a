"""Every family of configuration message names its key by the full dotted path.

The book's form (03-troubleshooting, "At startup"; 05-configuration): the key's path as it
would be written in dotted form (`search.max_results`, `engines.w.type`,
`service.http.auth.callers[0].token_env`), a colon, then what to change. A key inside a
table is never named as "<table>: <key>: …".
"""

from __future__ import annotations

import re
from typing import Final

import pytest

from rypsok.config.load import ConfigError, load_config_text

TOKEN: Final = "t" * 40

# A path, then ": ", then a message that does not begin with another key and a colon.
_FORM: Final = re.compile(r"(?P<path>[a-z_][a-z0-9_]*(?:\.[A-Za-z0-9_-]+|\[\d+\])*): (?P<rest>.+)")
_SECOND_KEY: Final = re.compile(r"[a-z_][a-z0-9_.]*(?:\[\d+\])?: ")


def v1(body: str) -> str:
    return "config_version = 1\n" + body


def callers(*tables: str) -> str:
    body = '[service.http]\nbind = "127.0.0.1:8737"\n'
    for table in tables:
        body += f"[[service.http.auth.callers]]\n{table}"
    return v1(body)


ENGINE: Final = '[engines.w]\ntype = "wikipedia"\ncategories = ["general"]\n'
BRAVE: Final = '[engines.b]\ntype = "brave"\ncategories = ["general"]\n'

# (family, text, environment, the path the message must name)
CASES: Final = [
    ("version missing", "[search]\n", {}, "config_version"),
    ("version kind", 'config_version = "1"\n', {}, "config_version"),
    ("version other", "config_version = 2\n", {}, "config_version"),
    ("wrong kind", v1('[search]\nmax_results = "5"\n'), {}, "search.max_results"),
    ("range", v1("[limits]\nfetches_in_flight = 65\n"), {}, "limits.fetches_in_flight"),
    ("negative", v1("[cache]\nttl_s = -1\n"), {}, "cache.ttl_s"),
    (
        "dependent range",
        v1("[search]\ndeadline_ms = 500\nengine_timeout_ms = 400\n"),
        {},
        "search.engine_timeout_ms",
    ),
    ("default unfit", v1("[search]\nmax_results_ceiling = 3\n"), {}, "search.max_results_ceiling"),
    ("budget", v1("[search]\ndeadline_ms = 500\nreserve_ms = 450\n"), {}, "search.reserve_ms"),
    ("unknown key", v1("[search]\nnope = 1\n"), {}, "search.nope"),
    ("unknown table", v1("[search.sub]\nx = 1\n"), {}, "search.sub"),
    ("unknown top table", v1("[nope]\nx = 1\n"), {}, "nope"),
    ("unprintable key", v1('[search]\n"a b" = 1\n'), {}, "search"),
    ("boolean", v1('[fetch]\nrobots_txt = "no"\n'), {}, "fetch.robots_txt"),
    ("choice", v1('[search]\nsafe_search = "x"\n'), {}, "search.safe_search"),
    ("text form", v1('[search]\nregion = "usa"\n'), {}, "search.region"),
    ("array element", v1('[search]\nlanguages = ["en", 3]\n'), {}, "search.languages[1]"),
    ("array repeat", v1('[search]\nlanguages = ["en", "en"]\n'), {}, "search.languages[1]"),
    ("empty array", v1("[search]\nlanguages = []\n"), {}, "search.languages"),
    ("rule", v1('[egress]\ndeny = ["blocked.invalid."]\n'), {}, "egress.deny[0]"),
    ("port needs allow", v1("[fetch]\nports = [443, 8443]\n"), {}, "fetch.ports[1]"),
    ("port repeat", v1("[fetch]\nports = [443, 443]\n"), {}, "fetch.ports[1]"),
    ("bind", v1('[service.http]\nbind = "192.0.2.1:80"\n'), {}, "service.http.bind"),
    ("proxy", v1('[egress]\nproxy = "ftp://p"\n'), {}, "egress.proxy"),
    ("duplicate", v1("[search]\nreserve_ms = 60\nreserve_ms = 70\n"), {}, "search.reserve_ms"),
    ("engine id", v1('[engines.Web]\ntype = "wikipedia"\n'), {}, "engines.Web"),
    ("engine type missing", v1('[engines.w]\ncategories = ["general"]\n'), {}, "engines.w.type"),
    ("engine type kind", v1("[engines.w]\ntype = 3\n"), {}, "engines.w.type"),
    ("engine type unknown", v1('[engines.w]\ntype = "bing"\n'), {}, "engines.w.type"),
    (
        "scraping switch",
        v1('[engines.d]\ntype = "duckduckgo"\ncategories = ["general"]\n'),
        {},
        "engines.d",  # the book's own sentence (Tutorial 5) names the engine's table
    ),
    (
        "categories missing",
        v1('[engines.w]\ntype = "wikipedia"\n'),
        {},
        "engines.w.categories",
    ),
    ("inline key", v1(BRAVE + 'api_key = "x"\n'), {}, "engines.b.api_key"),
    ("keyless driver", v1(ENGINE + 'api_key_env = "K"\n'), {}, "engines.w.api_key_env"),
    (
        "two key sources",
        v1(BRAVE + 'api_key_env = "K"\napi_key_file = "/k"\n'),
        {},
        "engines.b.api_key_file",
    ),
    ("variable name", v1(BRAVE + 'api_key_env = "sk-123"\n'), {}, "engines.b.api_key_env"),
    ("endpoint", v1(ENGINE + 'endpoint = "news"\n'), {}, "engines.w.endpoint"),
    ("base_url", v1(BRAVE + 'base_url = "https://x.example/"\n'), {}, "engines.b.base_url"),
    ("caller id missing", callers('token_env = "A"\n'), {}, "service.http.auth.callers[0].id"),
    (
        "caller token missing",
        callers('id = "a"\n'),
        {},
        "service.http.auth.callers[0].token_env",
    ),
    (
        "caller two tokens",
        callers('id = "a"\ntoken_env = "A"\ntoken_file = "/x"\n'),
        {},
        "service.http.auth.callers[0].token_file",
    ),
    (
        "caller inline token",
        callers('id = "a"\ntoken = "x"\n'),
        {},
        "service.http.auth.callers[0].token",
    ),
    (
        "caller repeat",
        callers('id = "a"\ntoken_env = "A"\n', 'id = "a"\ntoken_env = "B"\n'),
        {},
        "service.http.auth.callers[1].id",
    ),
    (
        "token unset",
        callers('id = "a"\ntoken_env = "A"\n'),
        {},
        "service.http.auth.callers[0].token_env",
    ),
    (
        "token short",
        callers('id = "a"\ntoken_env = "A"\n'),
        {"A": "short"},
        "service.http.auth.callers[0].token_env",
    ),
    (
        "token file short",
        callers('id = "a"\ntoken_file = "/dev/null"\n'),
        {},
        "service.http.auth.callers[0].token_file",
    ),
    (
        "token shared",
        callers('id = "a"\ntoken_env = "A"\n', 'id = "b"\ntoken_env = "B"\n'),
        {"A": TOKEN, "B": TOKEN},
        "service.http.auth.callers[1].token_env",
    ),
]


@pytest.mark.parametrize(("family", "text", "env", "path"), CASES, ids=[case[0] for case in CASES])
def test_req_cfg_005_each_message_family_names_the_key_by_its_full_dotted_path(
    family: str, text: str, env: dict[str, str], path: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config_text(text, env, source="t")
    message = str(caught.value)
    match = _FORM.fullmatch(message)
    assert match is not None, message
    assert match["path"] == path, message
    # The rest says what to change; it never starts with a second key ("a: b: …").
    assert _SECOND_KEY.match(match["rest"]) is None, message
    assert len(message) <= 400
