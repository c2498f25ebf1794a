"""The Prometheus metrics on `[service.metrics] bind` (REQ-OBS-008, REQ-OBS-002/003/007).

A real Prometheus server (Debian's `prometheus`) scrapes a listener and is asked, through
its HTTP API, for a counter after a search, as an operator's monitoring would. In CI the
server is installed by `.ci/run` and must run; elsewhere a machine without it skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from http_helpers import (
    CALLERS,
    CALLERS_ENV,
    TOKEN_A,
    call_body,
    closed_by_server,
    modern_headers,
    serving,
)
from redis_server import free_port
from search_fakes import capture_logs
from stdio_process import ROOT

from rypsok.config.load import ConfigError, load_config_text
from rypsok.core import telemetry
from testkit.mediawiki import FixtureWiki

METRICS_TOKEN = "metrics-operator-token-0123456789abcdef"
ENV = {**CALLERS_ENV, "RYPSOK_METRICS_TOKEN": METRICS_TOKEN}
ENGINES = '[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general"]\n'
SECRET_QUERY = "quarterly numbers of zebra-hotel-7781"


@pytest.fixture(autouse=True)
def _fresh_counters() -> None:
    """The telemetry counters are process-wide: an engine another test's run counted would
    otherwise be a series here."""
    telemetry.COUNTERS.reset()


def _config(port: int, token: bool = True) -> Any:
    metrics = f'[service.metrics]\nbind = "127.0.0.1:{port}"\n'
    if token:
        metrics += 'token_env = "RYPSOK_METRICS_TOKEN"\n'
    return load_config_text(
        'config_version = 1\n[service.http]\nallowed_hosts = ["rypsok.example"]\n'
        + metrics
        + CALLERS
        + ENGINES,
        ENV,
    )


async def _search(client: httpx.AsyncClient, port: int, query: str = "rust") -> None:
    response = await client.post(
        f"http://127.0.0.1:{port}/mcp",
        json=call_body("web_search", {"query": query}),
        headers={**modern_headers("tools/call", "web_search", TOKEN_A), "Host": "rypsok.example"},
    )
    assert response.status_code == 200
    assert response.json()["result"]["isError"] is False


# -- a real Prometheus -----------------------------------------------------------------------


def _prometheus() -> str:
    found = shutil.which("prometheus")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("prometheus is required in CI (.ci/run installs Debian's prometheus)")
        pytest.skip("needs Debian's prometheus (apt-get install prometheus)")
    return found


def _prometheus_config(tmp_path: Path, target_port: int) -> Path:
    token_file = tmp_path / "metrics-token"
    token_file.write_text(METRICS_TOKEN, encoding="utf-8")
    path = tmp_path / "prometheus.yml"
    path.write_text(
        "global:\n"
        "  scrape_interval: 1s\n"
        "  scrape_timeout: 1s\n"
        "scrape_configs:\n"
        "  - job_name: rypsok\n"
        "    authorization:\n"
        f"      credentials_file: {token_file}\n"
        "    static_configs:\n"
        f"      - targets: ['127.0.0.1:{target_port}']\n",
        encoding="utf-8",
    )
    return path


async def _query(client: httpx.AsyncClient, api: str, expression: str) -> list[dict[str, Any]]:
    response = await client.get(f"{api}/api/v1/query", params={"query": expression})
    response.raise_for_status()
    body = response.json()
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


async def _wait_for(client: httpx.AsyncClient, api: str, expression: str) -> list[dict[str, Any]]:
    with trio.fail_after(90):  # a loaded machine: Prometheus starts, then scrapes each second
        while True:
            try:
                found = await _query(client, api, expression)
            except httpx.HTTPError:
                found = []
            if found:
                return found
            await trio.sleep(0.5)


def _console_script() -> str:
    found = shutil.which("rypsok", path=str(Path(sys.executable).parent))
    assert found is not None
    return found


async def test_req_obs_008_a_real_prometheus_scrapes_a_search_counter(tmp_path: Path) -> None:
    # The real path: `rypsok serve --transport http` as a process, its Wikipedia a local
    # MediaWiki fixture, scraped by Prometheus with the operator's token.
    binary = _prometheus()
    mcp_port, metrics_port, api_port = free_port(), free_port(), free_port()
    api = f"http://127.0.0.1:{api_port}"
    wiki = FixtureWiki()
    env = {k: v for k, v in os.environ.items() if k != "RYPSOK_CONFIG"}
    env.update(ENV)
    async with httpx.AsyncClient(timeout=5) as client, trio.open_nursery() as nursery:
        wiki_port = await nursery.start(wiki.serve)
        rypsok_config = tmp_path / "rypsok.toml"
        rypsok_config.write_text(
            f'config_version = 1\n[service.http]\nbind = "127.0.0.1:{mcp_port}"\n'
            'allowed_hosts = ["rypsok.example"]\n'
            f'[service.metrics]\nbind = "127.0.0.1:{metrics_port}"\n'
            'token_env = "RYPSOK_METRICS_TOKEN"\n'
            + CALLERS
            + ENGINES
            + f'base_url = "http://127.0.0.1:{wiki_port}/w"\n',
            encoding="utf-8",
        )
        server = await trio.lowlevel.open_process(
            [_console_script(), "serve", "--transport", "http", "--config", str(rypsok_config)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd=ROOT, env=env,
        )  # fmt: skip
        prometheus = await trio.lowlevel.open_process(
            [binary, f"--config.file={_prometheus_config(tmp_path, metrics_port)}",
             f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{api_port}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            # The target is up: rypsok took Prometheus's token.
            up = await _wait_for(client, api, 'up{job="rypsok"} == 1')
            assert up[0]["metric"]["instance"] == f"127.0.0.1:{metrics_port}"
            await _search(client, mcp_port, "rust programming language")
            calls = await _wait_for(
                client, api, 'rypsok_calls_total{tool="web_search",outcome="ok"} >= 1'
            )
            engines = await _wait_for(
                client, api, 'rypsok_engine_requests_total{engine="wikipedia",class="ok"} >= 1'
            )
            memory = await _wait_for(client, api, "process_resident_memory_bytes")
        finally:
            for process in (prometheus, server):
                process.terminate()
                with trio.move_on_after(20):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
            nursery.cancel_scope.cancel()
    assert float(calls[0]["value"][1]) >= 1
    assert float(engines[0]["value"][1]) >= 1
    assert float(memory[0]["value"][1]) > 10 * 1024 * 1024


# -- the exposition and its guard ------------------------------------------------------------


async def test_req_obs_008_metrics_need_the_operators_token_never_a_callers() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    async with serving(_config(port), ENV) as server, httpx.AsyncClient() as client:
        await _search(client, server.port)
        none = await client.get(url)
        caller = await client.get(url, headers={"Authorization": f"Bearer {TOKEN_A}"})
        operator = await client.get(url, headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        other_path = await client.get(
            f"http://127.0.0.1:{port}/mcp", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
        )
        # The MCP listener does not serve them, and does not take the operator's token.
        on_mcp = await client.get(
            f"http://127.0.0.1:{server.port}/metrics",
            headers={"Authorization": f"Bearer {METRICS_TOKEN}"},
        )
    assert (none.status_code, none.headers["www-authenticate"]) == (401, "Bearer")
    assert caller.status_code == 401
    assert operator.status_code == 200
    assert operator.headers["content-type"].startswith("text/plain")
    assert 'rypsok_calls_total{outcome="ok",tool="web_search"} 1.0' in operator.text
    assert other_path.status_code == 404
    assert on_mcp.status_code == 401


async def test_req_obs_008_no_query_url_token_or_caller_in_a_label() -> None:
    port = free_port()
    async with serving(_config(port, token=False), ENV) as server, httpx.AsyncClient() as client:
        await _search(client, server.port, SECRET_QUERY)
        response = await client.post(
            f"http://127.0.0.1:{server.port}/mcp",
            json=call_body("web_fetch", {"url": "https://private-site.example/zebra/path"}),
            headers={
                **modern_headers("tools/call", "web_fetch", TOKEN_A),
                "Host": "rypsok.example",
            },
        )
        assert response.status_code == 200
        exposition = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
    assert "rypsok_calls_total" in exposition
    assert 'tool="web_fetch"' in exposition
    for leak in ("zebra", "private-site", TOKEN_A, METRICS_TOKEN, "alpha", "beta"):
        assert leak not in exposition, leak


async def _raw(port: int, request: bytes) -> bytes:
    """What the metrics listener answers `request` sent whole on a connection of its own."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(request)
        return await closed_by_server(stream, 10)


def _head(target: bytes, *fields: bytes) -> bytes:
    return (
        b"GET "
        + target
        + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + b"".join(field + b"\r\n" for field in fields)
        + b"\r\n"
    )


async def test_req_obs_008_the_bearer_scheme_in_any_case_and_the_absolute_form() -> None:
    # RFC 9110 §11.1: the scheme is case-insensitive, as on /mcp; RFC 9112 §3.2.2: a server
    # accepts the absolute form, whose path decides.
    port = free_port()
    token = METRICS_TOKEN.encode()
    async with serving(_config(port), ENV):
        lower = await _raw(port, _head(b"/metrics", b"Authorization: bearer " + token))
        upper = await _raw(port, _head(b"/metrics", b"Authorization: BEARER  " + token))
        absolute = await _raw(
            port,
            _head(b"http://127.0.0.1:%d/metrics?x=1" % port, b"Authorization: Bearer " + token),
        )
        absolute_other = await _raw(
            port, _head(b"HTTP://127.0.0.1/mcp", b"Authorization: Bearer " + token)
        )
        absolute_no_token = await _raw(port, _head(b"http://127.0.0.1/metrics"))
        caller = await _raw(port, _head(b"/metrics", b"Authorization: bearer " + TOKEN_A.encode()))
        twice = await _raw(
            port,
            _head(
                b"/metrics",
                b"Authorization: Bearer " + token,
                b"Authorization: Bearer " + token,
            ),
        )
        other_scheme = await _raw(port, _head(b"/metrics", b"Authorization: Basic " + token))
    for answer in (lower, upper, absolute):
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
        assert b"rypsok_calls_total" in answer
    assert absolute_other.startswith(b"HTTP/1.1 404 ")
    for refused in (absolute_no_token, caller, twice, other_scheme):
        assert refused.startswith(b"HTTP/1.1 401 "), refused[:200]
        assert b"rypsok_calls_total" not in refused


async def test_req_obs_008_half_sent_heads_never_keep_a_scrape_out() -> None:
    # Eight connections that open and stop mid-head fill the cap: each scrape makes room by
    # closing the one that has waited longest, at once, not after its head deadline.
    port = free_port()
    headers = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    async with serving(_config(port), ENV), httpx.AsyncClient(timeout=3) as client:
        stalled: list[trio.SocketStream] = []

        async def stall() -> None:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(b"GET /metrics HTTP/1.1\r\n")
            stalled.append(stream)

        for _ in range(8):
            await stall()
            await trio.sleep(0.05)  # accepted in this order: the first has waited longest
        await trio.sleep(1.5)  # past the grace: a scrape makes room whenever its head comes
        answers = []
        for _ in range(3):
            answers.append(await client.get(f"http://127.0.0.1:{port}/metrics", headers=headers))
            oldest = stalled.pop(0)
            # The one closed to make room is the oldest: it hears nothing and is closed.
            assert await closed_by_server(oldest, 3) == b""
            await oldest.aclose()
            await stall()  # the flood renews itself
        # The newer stalled connections are still open (a read waits, nothing arrives).
        with trio.move_on_after(0.3) as waited:
            await stalled[-1].receive_some(1)
        assert waited.cancelled_caught
        for stream in stalled:
            await stream.aclose()
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert all("rypsok_calls_total" in a.text for a in answers)


async def test_req_obs_008_a_connect_flood_never_closes_a_scrape_before_its_head() -> None:
    # A newcomer that has not sent its head yet makes room only among connections that have
    # waited a second: a flood renewed at once closes none of the eight open connections,
    # the oldest of which then sends the rest of its head and is answered.
    port = free_port()
    partial = b"GET /metrics HTTP/1.1\r\n"
    async with serving(_config(port, token=False), ENV):
        for _attempt in range(5):
            started = trio.current_time()
            opened = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(8)]
            for stream in opened:
                await stream.send_all(partial)
            flood = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(4)]
            for stream in flood:
                await stream.send_all(partial)
            refused = [await closed_by_server(stream, 5) for stream in flood]
            # The decisions came well within the second, or the attempt says nothing.
            prompt = trio.current_time() - started < 0.5
            await opened[0].send_all(b"Host: 127.0.0.1\r\n\r\n")
            answer = await closed_by_server(opened[0], 10)
            for stream in opened + flood:
                await stream.aclose()
            await trio.sleep(0.3)  # the server sees them close
            if prompt:
                break
        else:
            pytest.fail("twelve loopback connections never opened within half a second")
    assert refused == [b""] * 4
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]


async def test_req_obs_008_the_head_is_at_most_8_kib() -> None:
    # The range's ends: a head of 8192 bytes, its blank line included, is answered; one
    # byte more is closed unanswered, however the reads fall.
    port = free_port()

    def head_of(size: int) -> bytes:
        start, end = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ", b"\r\n\r\n"
        head = start + b"a" * (size - len(start) - len(end)) + end
        assert len(head) == size
        return head

    async with serving(_config(port, token=False), ENV):
        at_bound = await _raw(port, head_of(8192))
        past_bound = await _raw(port, head_of(8193))
        far_past = await _raw(port, head_of(12000))
    assert at_bound.startswith(b"HTTP/1.1 200 "), at_bound[:200]
    assert past_bound == b""
    assert far_past == b""


# The exposition's tasks: the listener's own (started by serve_http) and one a connection.
_METRICS_TASKS = ("rypsok.mcp.listener.serve._serve_metrics", "rypsok.mcp.metrics_server.")


class _Turns(trio.abc.Instrument):
    """The turns of the loop each task takes, by the task's name (its function's module and
    qualified name)."""

    def __init__(self) -> None:
        self.steps: dict[str, int] = {}

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps[task.name] = self.steps.get(task.name, 0) + 1

    def of(self, *prefixes: str) -> int:
        return sum(n for name, n in self.steps.items() if name.startswith(prefixes))


async def test_req_obs_008_the_metrics_listener_takes_no_turn_of_the_loop_until_scraped() -> None:
    """The exposition's listener shares the MCP listener's loop: while nobody scrapes it,
    idle or with MCP calls being served, it schedules nothing there (no periodic task, no
    wake-up), so the table costs the calls nothing; a scrape is what wakes it."""
    port = free_port()
    turns = _Turns()
    async with serving(_config(port, token=False), ENV) as server, httpx.AsyncClient() as client:
        trio.lowlevel.add_instrument(turns)
        try:
            await trio.sleep(1.5)
            for _ in range(10):
                await _search(client, server.port)
            unscraped = turns.of(*_METRICS_TASKS)
            scraped = await client.get(f"http://127.0.0.1:{port}/metrics")
            after_scrape = turns.of(*_METRICS_TASKS)
        finally:
            trio.lowlevel.remove_instrument(turns)
    assert scraped.status_code == 200
    # The instrument sees the MCP calls' turns.
    assert turns.of("rypsok.mcp.listener.lifecycle.Listener._serve_connection") >= 10
    assert unscraped == 0, turns.steps
    assert after_scrape > 0, turns.steps


async def test_req_obs_008_metrics_are_off_without_the_table() -> None:
    text = 'config_version = 1\n[service.http]\nallowed_hosts = ["rypsok.example"]\n'
    with capture_logs() as logs:
        async with serving(load_config_text(text + CALLERS + ENGINES, ENV), ENV):
            pass
    assert logs.named("listening")
    assert not logs.named("metrics_listening")


def test_req_obs_008_the_metrics_table_is_checked() -> None:
    def refused(table: str, env: dict[str, str] | None = None) -> str:
        with pytest.raises(ConfigError) as caught:
            load_config_text("config_version = 1\n[service.metrics]\n" + table, env or {})
        return str(caught.value)

    assert refused('bind = "127.0.0.1:8737"\n').startswith(
        "service.metrics.bind: must differ from service.http.bind"
    )
    assert refused('bind = "0.0.0.0:9464"\n').startswith(
        "service.metrics.bind: a non-loopback bind needs token_env or token_file"
    )
    assert refused('token_env = "T"\n', {"T": "short"}) == (
        "service.metrics.token_env: the token is shorter than 32 bytes"
    )
    assert "did you mean bind?" in refused('bnd = "127.0.0.1:9464"\n')


def test_req_obs_008_check_names_the_metrics_keys(tmp_path: Path) -> None:
    path = tmp_path / "rypsok.toml"
    path.write_text(
        'config_version = 1\n[service.metrics]\nbind = "127.0.0.1:9555"\n'
        'token_env = "RYPSOK_METRICS_TOKEN"\n',
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if k != "RYPSOK_CONFIG"}
    env["RYPSOK_METRICS_TOKEN"] = METRICS_TOKEN
    done = subprocess.run(
        [sys.executable, "-m", "rypsok", "check", "--config", str(path)],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (
        "rypsok: service.metrics: bind=127.0.0.1:9555 path=/metrics "
        "token_env=RYPSOK_METRICS_TOKEN" in done.stderr.splitlines()
    )
    assert METRICS_TOKEN not in done.stderr


def test_lim_h8_the_metrics_descriptors_are_kept_back_from_the_connections() -> None:
    from rypsok.mcp.listener.descriptors import METRICS_DESCRIPTORS, plan_descriptors

    without = plan_descriptors(load_config_text("config_version = 1\n", {}), 142)
    with_metrics = plan_descriptors(
        load_config_text("config_version = 1\n[service.metrics]\n", {}), 142
    )
    assert METRICS_DESCRIPTORS == 9
    assert (without.connections, without.short) == (64, False)
    assert with_metrics.reserve == without.reserve + METRICS_DESCRIPTORS
    assert (with_metrics.connections, with_metrics.needed) == (55, 151)
