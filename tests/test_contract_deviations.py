"""Points of the contract two parts of rypsok must agree on, through the real console script
and `Rypsok`.

`rypsok check` exits 0 exactly for a file `serve` would accept (spec 05): a base_url that
serve cannot use is refused by check with its key, line and column, and serve never ends on
a configuration error with an uncaught exception. A host is read no more laxly than web_fetch
reads one. Leaving out web_search's category means its default, general.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from search_fakes import FakeEngine, engine_config, make_config, results

from rypsok.config.rules import RuleError, validate_base_url
from rypsok.core.egress.policy import engine_origin_refusal
from rypsok.core.model import Category, ErrorKind, SearchRequest, ToolError
from rypsok.core.services import Rypsok
from rypsok.shared.hosts import is_loopback_host

ROOT = Path(__file__).resolve().parent.parent
RYPSOK = Path(sys.executable).with_name("rypsok")

# Each base_url serve cannot use or web_fetch would not read, and the sentence check gives.
REFUSED = [
    ("https://searx.example.org/?x=1", "no query and no fragment"),
    ("https://searx.example.org/search#top", "no query and no fragment"),
    ("https://searx.example.org/?", "no query and no fragment"),
    ("https://searx..example.org/", "must not have an empty label"),
    ("https://.searx.example.org/", "must not start with a dot"),
    ("https://searx.example.org:0/", "between 1 and 65535"),
    ("https://searx.example.org./", "must not end with a dot"),
    ("http://localhost.:8888/", "must not end with a dot"),
    ("https://127.1/", "written in full"),
    ("https://xn--a.example/", "not a valid name"),
    ("https://ｅxample.org/", "not a valid name"),
    ("https://[fe80::1%25eth0]/", "without a zone"),
]


def _write(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "rypsok.toml"
    path.write_text(
        "config_version = 1\n"
        "[engines.sx]\n"
        'type = "searxng"\n'
        'categories = ["general"]\n'
        f'base_url = "{base_url}"\n',
        encoding="utf-8",
    )
    return path


def _run(args: list[str], *, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RYPSOK_CONFIG"}
    return subprocess.run(
        args, cwd=ROOT, input=stdin, capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.parametrize(("base_url", "why"), REFUSED)
def test_req_cfg_005_check_refuses_a_base_url_serve_cannot_use(
    tmp_path: Path, base_url: str, why: str
) -> None:
    done = _run([str(RYPSOK), "check", "--config", str(_write(tmp_path, base_url))])
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert "engines.sx.base_url" in done.stderr
    assert "(line 5, column 12)" in done.stderr
    assert why in done.stderr


@pytest.mark.parametrize(("base_url", "why"), REFUSED[:6])
def test_req_cfg_005_serve_refuses_it_alike_without_an_uncaught_exception(
    tmp_path: Path, base_url: str, why: str
) -> None:
    done = _run([str(RYPSOK), "serve", "--config", str(_write(tmp_path, base_url))])
    assert done.returncode == 1
    assert done.stdout == ""
    assert "engines.sx.base_url" in done.stderr
    assert why in done.stderr
    assert "uncaught_exception" not in done.stderr


@pytest.mark.parametrize(
    "base_url",
    [
        "https://searx.example.org/",
        "https://searx.example.org:8443/sx",
        "http://localhost:8888/",
        "http://[::1]:8888/",
        "https://[2606:4700::1111]/",
        "https://bücher.example/",
    ],
)
def test_req_cfg_005_check_accepts_a_base_url_serve_uses(tmp_path: Path, base_url: str) -> None:
    config = _write(tmp_path, base_url)
    assert _run([str(RYPSOK), "check", "--config", str(config)]).returncode == 0
    # serve starts with it and answers (stdin closes at once: it ends cleanly).
    done = _run([str(RYPSOK), "serve", "--config", str(config)])
    assert done.returncode == 0, done.stderr
    assert "uncaught_exception" not in done.stderr


# A rule gap (a driver refusing what the configuration's rules admitted) is still a
# configuration error at serve: the child runs the console script's entry with the base_url
# rule switched off, so the driver alone sees the query.
_SERVE_WITHOUT_THE_RULE = textwrap.dedent(
    """
    import sys
    import rypsok.config.validate
    from rypsok import _entry
    rypsok.config.validate.validate_base_url = lambda text: None
    sys.argv = ["rypsok", *sys.argv[1:]]
    raise SystemExit(_entry.main())
    """
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_req_cfg_005_a_driver_refusing_its_settings_is_a_configuration_error(
    tmp_path: Path, transport: str
) -> None:
    config = _write(tmp_path, "https://searx.example.org/?secret=1")
    with config.open("a", encoding="utf-8") as file:
        file.write(f'[service.http]\nbind = "127.0.0.1:{_free_port()}"\n')
    args = ["serve", "--transport", transport, "--config", str(config)]
    done = _run([sys.executable, "-c", _SERVE_WITHOUT_THE_RULE, *args])
    assert done.returncode == 1
    assert done.stdout == ""
    assert "uncaught_exception" not in done.stderr
    [line] = [json.loads(x) for x in done.stderr.splitlines() if '"config_invalid"' in x]
    assert line["level"] == "error"
    assert line["message"].startswith("engines.sx: ")
    assert "secret" not in done.stderr


# --- one answer to "loopback" ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("LocalHost", True),
        ("127.0.0.1", True),
        ("127.255.0.9", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("[::ffff:127.0.0.2]", True),
        ("localhost.", False),
        ("localhost..", False),
        ("localhostx", False),
        ("x.localhost", False),
        ("127.1", False),
        ("2130706433", False),
        ("::1%lo", False),
        ("10.0.0.1", False),
        ("::2", False),
        ("[::1", False),
        ("", False),
    ],
)
def test_req_sec_017_the_configuration_and_the_engine_profile_agree_on_loopback(
    host: str, loopback: bool
) -> None:
    assert is_loopback_host(host) is loopback
    assert (engine_origin_refusal("http", host) is None) is (loopback and host != "")
    url = f"http://{host if host.startswith('[') or ':' not in host else f'[{host}]'}:8888/"
    try:
        validate_base_url(url)
    except RuleError:
        admitted = False
    else:
        admitted = True
    assert admitted is loopback


# --- web_search's category left out means general (spec 02, 04) -----------------------------


async def _refusal(rypsok: Rypsok, request: SearchRequest) -> ToolError:
    with pytest.raises(ToolError) as caught:
        await rypsok.search(request)
    return caught.value


async def test_req_search_002_a_left_out_category_is_answered_as_general() -> None:
    science = engine_config("sci", categories=(Category.SCIENCE,))
    config = make_config(science)
    async with Rypsok(config, engines=[FakeEngine("sci", results("s", 2))]) as rypsok:
        left_out = await _refusal(rypsok, SearchRequest(query="q"))
        general = await _refusal(rypsok, SearchRequest(query="q", category="general"))
        served = await rypsok.search(SearchRequest(query="q", category="science"))
    assert left_out.to_json() == general.to_json()
    assert left_out.kind is ErrorKind.INVALID_REQUEST
    assert left_out.detail.allowed == ("science",)
    assert len(served.results) == 2
