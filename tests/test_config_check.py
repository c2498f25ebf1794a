"""What `rypsok check` prints and warns (REQ-OPS-001, the Configuration chapter)."""

from __future__ import annotations

import os

import pytest

from rypsok.config.check import run_check

TOKEN = "T" * 40


@pytest.fixture
def write(tmp_path):
    def write(body: str, name: str = "rypsok.toml") -> str:
        path = tmp_path / name
        path.write_text("config_version = 1\n" + body)
        return str(path)

    return write


def lines_of(path: str | None, env: dict[str, str] | None = None) -> list[str]:
    report = run_check(path, env or {})
    assert report.exit_code == 0, report.lines
    return list(report.lines)


def warnings_of(path: str, env: dict[str, str] | None = None) -> list[str]:
    # The memory row depends on the build's measured costs (tests/test_fetch_memory.py): on
    # glibc the defaults' worst case is above the unit, elsewhere it is not judged.
    return [
        line
        for line in lines_of(path, env)
        if line.startswith("rypsok: warning: ") and not line.startswith("rypsok: warning: memory:")
    ]


def test_req_ops_001_check_prints_every_section_in_order(write):
    lines = lines_of(write(""))
    assert lines[0].startswith("rypsok: configuration from --config ")
    assert lines[0].endswith("rypsok.toml is valid")
    heads = [
        line.split(":")[1].strip()
        for line in lines[1:]
        if not line.startswith("rypsok: warning: memory:")  # the build's (see warnings_of)
    ]
    order = [
        "search",
        "tool rate limits per caller and minute",
        "tool call maxima in ms",
        "engine wikipedia",
        "engine brave",
        "categories served",
        "category general",
        "category news",
        "category science",
        "category code",
        "service",
        "service.http",
        "fetch",
        "egress",
        "privacy",
        "logging",
        "cache",
        "scraping",
        "resilience",
        "limits",
        "memory",
    ]
    assert heads == order


def test_req_ops_001_the_lines_the_book_shows_for_the_defaults(write):
    lines = lines_of(write(""))
    for expected in [
        "rypsok: service.http: bind=127.0.0.1:8737 callers=0 legacy_revisions=true "
        "max_connections=64 max_request_bytes=65536 idle_timeout_s=60 head_timeout_s=10 "
        "max_streams=16 request_timeout_s=30 max_sessions=256",
        "rypsok: fetch: ports=80,443 max_bytes=5242880 max_chars=3000 (ceiling 20000) "
        "deadline_ms=10000 max_redirects=5 robots_txt=true follow_cross_host_redirects=false "
        "pdf_max_pages=200 pdf_max_chars=250000 pdf_memory_mib=96 pdf_workers=2",
        "rypsok: egress: allow_rules=0 deny_rules=0 allow_http=false strict_mode=false proxy=none",
        "rypsok: privacy: secret_detection=refuse",
        "rypsok: logging: level=info log_queries=false",
        "rypsok: cache: enabled=false max_entries=1000 ttl_s=300 max_entry_bytes=32768",
        "rypsok: scraping: enabled=false",
        "rypsok: resilience: failures_to_open=3 first_cooldown_s=60 max_cooldown_s=900",
        "rypsok: limits: outbound_in_flight=32 per_engine_in_flight=2 fetches_in_flight=4 "
        "parsing_in_flight=2 strict_mode_urls=10000 robots_cache_entries=1000",
        "rypsok: tool call maxima in ms: web_search=2800 web_fetch=11000; engine_status reads "
        "memory only",
        "rypsok: tool rate limits per caller and minute: web_search=60 web_fetch=30 "
        "engine_status=30",
        "rypsok: categories served: general,science",
    ]:
        assert expected in lines


def test_req_ops_001_no_file_says_defaults():
    lines = lines_of(None)
    assert lines[0] == "rypsok: no configuration file: defaults"


def test_req_ops_001_the_maxima_follow_the_configured_deadlines(write):
    lines = lines_of(
        write(
            "[search]\ndeadline_ms = 4000\n[fetch]\ndeadline_ms = 20000\n"
            "[service.http]\nrequest_timeout_s = 30\n"
        )
    )
    assert (
        "rypsok: tool call maxima in ms: web_search=4300 web_fetch=21000; engine_status reads "
        "memory only"
    ) in lines


def test_req_ops_001_an_engine_line_shows_its_credential_state(write, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("BSAkeyfromfile\n")
    path = write(
        '[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general", "science"]\n'
        '[engines.brave]\ntype = "brave"\ncategories = ["general", "news"]\n'
        'api_key_env = "BRAVE_API_KEY"\n'
        f'[engines.bfile]\ntype = "brave"\ncategories = ["news"]\napi_key_file = "{key_file}"\n'
        '[engines.off]\ntype = "brave"\ncategories = ["code"]\nenabled = false\n'
        'api_key_env = "OTHER"\n'
    )
    lines = lines_of(path)
    assert (
        "rypsok: engine wikipedia: type=wikipedia enabled=true categories=general,science "
        "preference=100 no credential needed"
    ) in lines
    assert (
        "rypsok: engine brave: type=brave enabled=true categories=general,news preference=100 "
        "endpoint=web inactive: environment variable BRAVE_API_KEY is unset or empty"
    ) in lines
    assert any(
        line.startswith("rypsok: engine bfile: ") and line.endswith("credential resolved")
        for line in lines
    )
    assert any(
        line.startswith("rypsok: engine off: ") and "disabled by configuration" in line
        for line in lines
    )
    assert "rypsok: categories served: general,news,science" in lines
    with_key = lines_of(path, {"BRAVE_API_KEY": "BSAenvkey123"})
    assert any(
        line.startswith("rypsok: engine brave: ") and line.endswith("credential resolved")
        for line in with_key
    )
    text = "\n".join(with_key)
    assert "BSAenvkey123" not in text
    assert "BSAkeyfromfile" not in text


def test_req_ops_001_check_never_prints_a_secret_a_rule_or_a_proxy(write, tmp_path):
    token_file = tmp_path / "ops-token"
    token_file.write_text("F" * 40)
    token_file.chmod(0o600)
    path = write(
        '[service.http]\nbind = "127.0.0.1:8737"\n'
        '[[service.http.auth.callers]]\nid = "mimlys"\ntoken_env = "TOK"\n'
        f'[[service.http.auth.callers]]\nid = "ops"\ntoken_file = "{token_file}"\n'
        '[egress]\nallow = ["secretwiki.corp.example"]\ndeny = ["hidden.example"]\n'
        'proxy = "http://proxyuser:proxypass@proxyhost.example:3128"\n'
        '[engines.brave]\ntype = "brave"\ncategories = ["general"]\napi_key_env = "BK"\n'
    )
    lines = lines_of(path, {"TOK": TOKEN, "BK": "BSAbravekey"})
    text = "\n".join(lines)
    for secret in (
        TOKEN,
        "F" * 40,
        "BSAbravekey",
        "secretwiki",
        "hidden.example",
        "proxyhost",
        "proxyuser",
        "proxypass",
    ):
        assert secret not in text
    assert (
        "rypsok: egress: allow_rules=1 deny_rules=1 allow_http=false strict_mode=false "
        "proxy=set" in lines
    )
    assert any("callers=2" in line for line in lines)


# -- one test per row of the Warnings table (the memory row needs measured costs) ---------


def test_req_ops_001_each_risky_setting_has_its_warning_egress_allow_wide_network(write):
    assert warnings_of(write('[egress]\nallow = ["10.0.0.0/8", "10.1.0.0/16", "fd00::/8"]\n')) == [
        "rypsok: warning: egress.allow[0]: the rule admits a network wider than /16, private "
        "addresses included; host names, or a narrower network",
        "rypsok: warning: egress.allow[2]: the rule admits a network wider than /32, private "
        "addresses included; host names, or a narrower network",
    ]
    assert len(warnings_of(write('[egress]\nallow = ["0.0.0.0/0", "::/0"]\n'))) == 2


def test_req_ops_001_each_risky_setting_has_its_warning_secret_detection_off(write):
    assert warnings_of(write('[privacy]\nsecret_detection = "off"\n')) == [
        "rypsok: warning: privacy.secret_detection: a credential in a query or a URL is sent "
        'on unchecked; "refuse", the default'
    ]
    assert warnings_of(write('[privacy]\nsecret_detection = "warn"\n')) == []


def test_req_ops_001_each_risky_setting_has_its_warning_bind_off_loopback(write):
    path = write(
        '[service.http]\nbind = "192.0.2.10:8737"\n'
        '[[service.http.auth.callers]]\nid = "a"\ntoken_env = "TOK"\n'
    )
    assert warnings_of(path, {"TOK": TOKEN}) == [
        "rypsok: warning: service.http.bind: the listener speaks plain HTTP, so tokens and "
        "traffic cross the network unencrypted; bind loopback behind a TLS-terminating proxy"
    ]


def test_req_ops_001_each_risky_setting_has_its_warning_log_queries(write):
    assert warnings_of(write('[logging]\nlog_queries = true\nlevel = "debug"\n')) == [
        "rypsok: warning: logging.log_queries: query text is written to the debug log; false"
    ]


def test_req_ops_001_each_risky_setting_has_its_warning_robots_txt(write):
    assert warnings_of(write("[fetch]\nrobots_txt = false\n")) == [
        "rypsok: warning: fetch.robots_txt: pages are read whatever the site's robots.txt "
        "says; true"
    ]


def test_req_ops_001_each_risky_setting_has_its_warning_allow_http(write):
    assert warnings_of(write("[egress]\nallow_http = true\n")) == [
        "rypsok: warning: egress.allow_http: pages are read over plain, unencrypted HTTP; false"
    ]


def test_req_ops_001_each_risky_setting_has_its_warning_cross_host_redirects(write):
    assert warnings_of(write("[fetch]\nfollow_cross_host_redirects = true\n")) == [
        "rypsok: warning: fetch.follow_cross_host_redirects: a page may lead the fetch to "
        "another host without the caller deciding; false"
    ]


def test_req_ops_001_each_risky_setting_has_its_warning_scraping_engine(write):
    body = (
        '[scraping]\nenabled = true\n[engines.ddg]\ntype = "duckduckgo"\ncategories = ["general"]\n'
    )
    assert warnings_of(write(body)) == [
        "rypsok: warning: engines.ddg: the engine scrapes a human-facing page under the "
        "provider's terms; an engine with an API"
    ]
    assert warnings_of(write(body + "enabled = false\n")) == []


def test_req_ops_001_each_risky_setting_has_its_warning_cache_without_storable_engine(write):
    brave = '[engines.b]\ntype = "brave"\ncategories = ["general"]\napi_key_env = "K"\n'
    assert warnings_of(write("[cache]\nenabled = true\n" + brave)) == [
        "rypsok: warning: cache.enabled: the cache is on but no enabled engine allows its "
        "results to be stored; turn the cache off, or enable an engine that allows storage"
    ]
    wiki = '[engines.w]\ntype = "wikipedia"\ncategories = ["general"]\n'
    assert warnings_of(write("[cache]\nenabled = true\n" + brave + wiki)) == []


def test_req_ops_001_each_risky_setting_has_its_warning_world_readable_token_file(write, tmp_path):
    token_file = tmp_path / "tok"
    token_file.write_text("R" * 40)
    path = write(f'[[service.http.auth.callers]]\nid = "ops"\ntoken_file = "{token_file}"\n')
    os.chmod(token_file, 0o644)
    assert warnings_of(path) == [
        "rypsok: warning: service.http.auth.callers[0]: the token file is readable by everyone; "
        "chmod 600"
    ]
    os.chmod(token_file, 0o600)
    assert warnings_of(path) == []


def test_req_ops_001_the_defaults_give_no_warning(write):
    assert warnings_of(write("")) == []


def test_req_ops_001_check_lists_the_engines_of_each_category(write):
    body = (
        '[engines.wiki]\ntype = "wikipedia"\ncategories = ["general", "science"]\n'
        '[engines.hn]\ntype = "hackernews"\ncategories = ["news", "code"]\n'
        '[engines.ax]\ntype = "arxiv"\ncategories = ["science"]\nenabled = false\n'
        '[engines.brave]\ntype = "brave"\ncategories = ["news"]\nendpoint = "news"\n'
        'api_key_env = "BRAVE_API_KEY"\n'
    )
    lines = lines_of(write(body))
    assert [line for line in lines if line.startswith("rypsok: category ")] == [
        "rypsok: category general: wiki",
        "rypsok: category news: hn",  # brave has no key, the arxiv engine is disabled
        "rypsok: category science: wiki",
        "rypsok: category code: hn",
    ]
    with_key = lines_of(write(body), {"BRAVE_API_KEY": "BSAexample"})
    assert "rypsok: category news: hn,brave" in with_key


def test_req_ops_001_a_category_no_active_engine_serves_says_so_without_a_warning(write):
    lines = lines_of(write('[engines.w]\ntype = "wikipedia"\ncategories = ["general"]\n'))
    for category in ("news", "science", "code"):
        assert (
            f"rypsok: category {category}: none (no active engine serves it; web_search "
            "does not offer it)"
        ) in lines
    # The book promises no warning for such a file (its Warnings section); the memory row
    # depends on the build's measured costs (see warnings_of).
    assert not [
        line
        for line in lines
        if line.startswith("rypsok: warning: ") and not line.startswith("rypsok: warning: memory:")
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "[service.http]\nhead_timeout_s = 60\n",
            "rypsok: service.http.head_timeout_s: must be between 1 and 59 "
            "(service.http.idle_timeout_s 60 minus 1 s)",
        ),
        (
            "[service.http]\nidle_timeout_s = 600\nhead_timeout_s = 61\n",
            "rypsok: service.http.head_timeout_s: expected an integer from 1 to 60, "
            "found a number above 60 (line 4, column 18)",
        ),
        (
            "[service.http]\nhead_timeout_s = 0\n",
            "rypsok: service.http.head_timeout_s: must be between 1 and 59 "
            "(service.http.idle_timeout_s 60 minus 1 s)",
        ),
    ],
)
def test_req_sec_022_check_names_a_head_timeout_out_of_its_range(write, body, message):
    report = run_check(write(body), {})
    assert report.exit_code == 1
    assert report.lines == (message,)


@pytest.mark.parametrize(
    ("body", "head"),
    [
        ("", 10),
        ("[service.http]\nidle_timeout_s = 5\n", 4),
        ("[service.http]\nidle_timeout_s = 600\nhead_timeout_s = 60\n", 60),
    ],
)
def test_req_sec_022_the_head_timeout_stays_below_the_idle_time(write, body, head):
    lines = lines_of(write(body))
    assert any(f" head_timeout_s={head} " in line for line in lines)


def test_req_cfg_004_an_engine_whose_key_is_optional_is_active_without_one(write, tmp_path):
    # A key that only raises a quota (stackexchange): none named, none read, the engine
    # serves its category; one named and unset makes it inactive as any keyed engine.
    body = '[engines.se]\ntype = "stackexchange"\ncategories = ["code"]\n'
    lines = lines_of(write(body))
    assert any(
        line.startswith("rypsok: engine se: type=stackexchange enabled=true categories=code ")
        and line.endswith(" no credential configured")
        for line in lines
    )
    assert "rypsok: categories served: code" in lines
    assert "rypsok: category code: se" in lines
    named = lines_of(write(body + 'api_key_env = "SE_KEY"\n'))
    assert "rypsok: categories served: none (no enabled engine is active)" in named
    assert any(
        line.startswith("rypsok: engine se: ")
        and line.endswith("inactive: environment variable SE_KEY is unset or empty")
        for line in named
    )
