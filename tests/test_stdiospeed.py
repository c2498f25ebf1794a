"""The speed work of issue 19 (stdio ratios) changed how some values are computed, never
what they are: each cut is checked here against the reading it replaced.

- a plain `base_url` is read by hand, so that a mirror's configuration starts without
  httpx (REQ-PERF-005); every such reading equals httpx's;
- the engine limiter keeps its exact times as integers instead of `Fraction`s (REQ-CMP-002);
- the engine client reads Content-Length and Content-Encoding from the raw head, and
  encodes the query pair by pair (REQ-SEC-010, REQ-SEC-017).
"""

from __future__ import annotations

import gc
import json
import math
import os
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reachable import strings_reachable_from

from rypsok.core.engines.http import EngineClient, EngineOrigin, parse_base_url
from rypsok.core.pacing import _Units
from testkit.messages import discover
from testkit.servers import Reply, serve_http

ROOT = Path(__file__).resolve().parent.parent


def _httpx_reading(text: str) -> tuple[EngineOrigin, str] | str:
    """What parse_base_url made of `text` when it always asked httpx."""
    try:
        url = httpx.URL(text)
    except httpx.InvalidURL:
        return "refused"
    if not url.is_absolute_url or url.userinfo or url.query or url.fragment:
        return "refused"
    try:
        origin = EngineOrigin(scheme=url.scheme, host=url.host, port=url.port)
    except ValueError:
        return "refused"
    return origin, url.path.rstrip("/")


def _reading(text: str) -> tuple[EngineOrigin, str] | str:
    try:
        return parse_base_url(text)
    except ValueError:
        return "refused"


_LABELS = st.sampled_from(
    ["wiki", "example", "org", "a", "A", "xn--bcher-kva", "127", "0", "1", "255", "256",
     "01", "-a", "a-", "a_b", "localhost", "10", "b\u00fccher", ""]
)  # fmt: skip
_PATH_PIECES = st.sampled_from(
    ["/", "w", "api.php", ".", "..", "_", "~", "-", "%41", "%", " ", "\u00e9", "//", "?q=1",
     "#f", ":", "@", "index.php", "W"]
)  # fmt: skip


@st.composite
def _base_urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "HTTPS", "Http", "ftp"]))
    host = ".".join(draw(st.lists(_LABELS, min_size=1, max_size=4)))
    if draw(st.booleans()):
        host = draw(st.sampled_from(["127.0.0.1", "[::1]", "localhost", "1.2.3", "300.1.1.1"]))
    port = draw(st.sampled_from(["", ":80", ":443", ":8080", ":0443", ":65535", ":65536", ":"]))
    path = "".join(draw(st.lists(_PATH_PIECES, max_size=6)))
    return f"{scheme}://{host}{port}{path}"


@settings(max_examples=600, deadline=None)
@given(_base_urls())
def test_req_perf_005_a_base_url_is_read_as_httpx_reads_it(text: str) -> None:
    assert _reading(text) == _httpx_reading(text)


_WIKI = EngineOrigin(scheme="https", host="wiki.example.org")


@pytest.mark.parametrize(
    ("text", "origin", "path"),
    [
        ("https://wiki.example.org/w", _WIKI, "/w"),
        ("https://wiki.example.org:443/w/", _WIKI, "/w"),
        (
            "http://127.0.0.1:8080/w/api.php",
            EngineOrigin(scheme="http", host="127.0.0.1", port=8080),
            "/w/api.php",
        ),
        ("https://wiki.example.org", _WIKI, ""),
    ],
)
def test_req_perf_005_the_plain_shapes_read_as_expected(
    text: str, origin: EngineOrigin, path: str
) -> None:
    assert parse_base_url(text) == (origin, path) == _httpx_reading(text)


# The console script's own entry, run in a child; after serving it says on stderr whether
# httpx was loaded.
_SERVE_AND_LIST = textwrap.dedent(
    """
    import sys
    from rypsok import _entry
    sys.argv = ["rypsok", *sys.argv[1:]]
    code = _entry.main()
    loaded = [name for name in ("httpx", "httpcore") if name in sys.modules]
    sys.stderr.write("LOADED " + ",".join(loaded) + "\\n")
    raise SystemExit(code)
    """
)


def test_req_perf_005_a_mirror_answers_discover_without_httpx(tmp_path: Path) -> None:
    config = tmp_path / "rypsok.toml"
    config.write_text(
        "config_version = 1\n"
        '[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general"]\n'
        'base_url = "http://127.0.0.1:9/w"\n',
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    env.pop("RYPSOK_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-c", _SERVE_AND_LIST, "serve", "--config", str(config)],
        cwd=ROOT,
        input=json.dumps(discover()) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "result" in json.loads(done.stdout.splitlines()[0])
    # The log's writer thread may write its last lines after this one: it is looked for.
    assert "LOADED " in done.stderr.splitlines()


_TIMES = st.one_of(
    st.floats(min_value=0, max_value=3e5, allow_nan=False),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1e308]),
)


@settings(max_examples=500, deadline=None)
@given(
    t=_TIMES,
    denominator=st.integers(min_value=1, max_value=10**6),
    steps=st.integers(min_value=-(10**6), max_value=10**6),
)
def test_req_cmp_002_the_limiters_units_are_the_exact_times(
    t: float, denominator: int, steps: int
) -> None:
    units = _Units(denominator)
    assert Fraction(units.count(t), units.per_second) == Fraction(t)
    assert units.of(Fraction(steps, denominator)) == steps * (units.per_second // denominator)
    # A time a whole number of 1/denominator s from a float: the first float not before it.
    exact = units.count(t) + units.of(Fraction(steps, denominator))
    woken = units.not_before(exact)
    expected = float(Fraction(exact, units.per_second))
    if Fraction(expected) < Fraction(exact, units.per_second):
        expected = math.nextafter(expected, math.inf)
    assert woken == expected


async def test_req_priv_003_the_engine_client_keeps_nothing_of_a_query() -> None:
    phrase = "".join(["zq", "unusual", "xw"])  # built at run time: no constant holds it
    async with serve_http({"/w/api.php": Reply(body=b"{}")}) as server:
        http = EngineClient()
        async with http:
            origin = EngineOrigin.parse(server.url)
            params = [("action", "query"), ("srsearch", f"{phrase} words"), ("srlimit", "10")]
            response = await http.get(
                origin, "/w/api.php", params=params, headers={}, max_bytes=1 << 20
            )
            assert response.status == 200
            del params, response
            gc.collect()
            # The request did carry the query; the client, with its pool, keeps none of it.
            assert phrase in server.requests[0].target
            assert [
                s for s in strings_reachable_from(http, into_modules=False) if phrase in s
            ] == []
