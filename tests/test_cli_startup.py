"""What `rypsok serve` loads and checks before its first answer (REQ-PERF-005, REQ-OPS-001).

The cold start is measured by `tools/bench-stdio`; these tests pin what the measures rely
on without timing anything: the console script reads the trust store in a thread while it
imports (`rypsok.core.egress.trust.prefetch`), and a store that cannot be read still stops
the start with the one sentence, exit 1, before anything is served and after a refused
configuration; serving a discover line loads neither httpx nor what only httpx needs.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rypsok.core.egress import trust
from rypsok.core.egress.trust import ClientBuildError

ROOT = Path(__file__).resolve().parent.parent

_DISCOVER = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "server/discover",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        }
    )
    + "\n"
)

# The console script's own entry, run in a child; after serving it says on stderr which of
# the modules that only httpx, the fetch client or the secret check (a
# search's) need were loaded.
_SERVE_AND_LIST = textwrap.dedent(
    """
    import sys
    from rypsok import _entry
    sys.argv = ["rypsok", *sys.argv[1:]]
    code = _entry.main()
    unneeded = (
        "httpx", "httpcore", "http.cookiejar", "urllib.request", "email.utils",
        "rypsok.core.secret_scan",
    )
    loaded = [name for name in unneeded if name in sys.modules]
    sys.stderr.write("LOADED " + ",".join(loaded) + "\\n")
    raise SystemExit(code)
    """
)


def _config(tmp_path: Path, engine: str = "") -> Path:
    path = tmp_path / "rypsok.toml"
    path.write_text(
        "config_version = 1\n"
        '[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general"]\n' + engine,
        encoding="utf-8",
    )
    return path


def _run(args: list[str], *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    child_env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    child_env.pop("RYPSOK_CONFIG", None)
    child_env.update(env or {})
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        input=_DISCOVER,
        capture_output=True,
        text=True,
        env=child_env,
        timeout=60,
        check=False,
    )


def test_req_perf_005_serving_a_discover_line_loads_no_httpx_nor_secret_check(
    tmp_path: Path,
) -> None:
    done = _run(["-c", _SERVE_AND_LIST, "serve", "--config", str(_config(tmp_path))])
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.splitlines()[0])
    assert answer["id"] == 1
    assert "result" in answer
    assert done.stderr.splitlines()[-1] == "LOADED "


def test_req_cfg_005_a_base_url_serve_cannot_use_stops_the_start_as_a_configuration_error(
    tmp_path: Path,
) -> None:
    # Refused by the configuration's rule, which serve and check share (spec 05): exit 1
    # with the key and its place, and no uncaught exception, before anything is served.
    config = _config(tmp_path, 'base_url = "https://wiki.example.org/w?x=1"\n')
    done = _run(["-c", _SERVE_AND_LIST, "serve", "--config", str(config)])
    assert done.returncode == 1
    assert done.stdout == ""
    assert "engines.wikipedia.base_url" in done.stderr
    assert "(line 5, column 12)" in done.stderr
    assert "uncaught_exception" not in done.stderr
    assert "x=1" not in done.stderr


def test_req_perf_005_a_mirror_answers_discover_without_httpx(tmp_path: Path) -> None:
    # A plain base_url is read by hand (parse_base_url): a mirror starts without httpx too.
    config = _config(tmp_path, 'base_url = "http://127.0.0.1:9/w"\n')
    done = _run(["-c", _SERVE_AND_LIST, "serve", "--config", str(config)])
    assert done.returncode == 0, done.stderr
    assert "result" in json.loads(done.stdout.splitlines()[0])
    # The log's writer thread may write its last lines after this one: it is looked for.
    assert "LOADED " in done.stderr.splitlines()


@pytest.mark.parametrize(
    ("cert_file", "why"),
    [
        ("/nonexistent/ca.pem", "SSL_CERT_FILE names a file that does not exist"),
        ("EMPTY", "SSL_CERT_FILE names a file without readable certificates"),
    ],
)
def test_req_ops_001_the_console_script_stops_without_a_trust_store(
    tmp_path: Path, cert_file: str, why: str
) -> None:
    if cert_file == "EMPTY":
        empty = tmp_path / "empty.pem"
        empty.write_text("not a certificate\n")
        cert_file = str(empty)
    config = _config(tmp_path)
    done = _run(
        ["-m", "rypsok", "serve", "--config", str(config)], env={"SSL_CERT_FILE": cert_file}
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [f"rypsok: the HTTP client could not be built: {why}"]


def test_req_ops_001_a_refused_configuration_is_said_before_the_trust_store(
    tmp_path: Path,
) -> None:
    # The store is read ahead in a thread, but the order of the start's failures is kept:
    # the configuration's refusal alone, as when the store was read after it.
    missing = tmp_path / "missing.toml"
    done = _run(
        ["-m", "rypsok", "serve", "--config", str(missing)],
        env={"SSL_CERT_FILE": "/nonexistent/ca.pem"},
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"rypsok: configuration from --config {missing}: no such file"
    ]


@pytest.fixture
def no_prefetch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trust, "_pending", None)
    trust._context_for.cache_clear()
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


@pytest.mark.usefixtures("no_prefetch")
def test_req_perf_005_the_prefetched_context_is_the_one_served(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    trust.prefetch()
    context = trust.trust_store_context()
    assert isinstance(context, ssl.SSLContext)
    assert trust._pending is None  # waited for, once
    assert trust.trust_store_context() is context
    assert trust._context_for.cache_info().misses == 1  # built once (the next test: by whom)
    assert capfd.readouterr() == ("", "")


@pytest.mark.parametrize(
    ("argv", "prefetched"),
    [
        (["rypsok", "serve"], True),
        (["rypsok", "serve", "--config", "rypsok.toml"], True),
        (["rypsok", "--help"], False),
        (["rypsok", "check", "--config", "rypsok.toml"], False),
        (["rypsok"], False),
    ],
)
def test_req_perf_005_the_console_script_prefetches_the_store_for_serve_only(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], prefetched: bool
) -> None:
    from rypsok import _entry

    calls: list[None] = []
    monkeypatch.setattr(trust, "prefetch", lambda: calls.append(None))
    monkeypatch.setattr(sys, "argv", argv)
    _entry._prefetch_trust_store()
    assert calls == ([None] if prefetched else [])


@pytest.mark.usefixtures("no_prefetch")
def test_req_perf_005_the_thread_builds_the_context_of_the_process_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import certifi

    # The thread reads the same settings the caller will: its context is the one served.
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    trust.prefetch()
    pending = trust._pending
    assert pending is not None
    assert pending.daemon  # never holds the process at exit
    assert pending.name == "rypsok-trust-store"
    trust.prefetch()  # a second call while one is running starts nothing
    assert trust._pending is pending
    pending.join()
    assert trust._context_for.cache_info().currsize == 1  # built by the thread alone
    trust.trust_store_context()
    info = trust._context_for.cache_info()
    assert (info.hits, info.misses) == (1, 1)  # the caller found the thread's context


@pytest.mark.usefixtures("no_prefetch")
def test_req_perf_005_a_prefetch_that_failed_is_raised_by_the_caller(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", "/nonexistent/ca.pem")
    trust.prefetch()
    with pytest.raises(ClientBuildError) as caught:
        trust.trust_store_context()
    assert str(caught.value) == (
        "the HTTP client could not be built: SSL_CERT_FILE names a file that does not exist"
    )
    # The thread said nothing of its own failure: the caller's is the one sentence.
    assert capfd.readouterr() == ("", "")


@pytest.mark.usefixtures("no_prefetch")
def test_req_sec_017_each_outbound_client_has_a_trust_context_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # httpcore sets a context's ALPN protocols before each handshake: two clients sharing one
    # could each negotiate what the other asked for. The first client takes the
    # context the start built and checked; every later one gets its own.
    monkeypatch.setattr(trust, "_taken", set())
    shared = trust.trust_store_context()
    first = trust.client_context()
    second = trust.client_context()
    assert first is shared
    assert second is not shared
    assert isinstance(second, ssl.SSLContext)
    assert second.verify_mode == ssl.CERT_REQUIRED
    assert second.minimum_version == shared.minimum_version
