"""Hostile input and a host that stops reading, against a real `rypsok serve` process.

The engine is a Wikipedia mirror on 127.0.0.1: a local server where a test needs answers,
else a bound socket that never listens (every connection is refused at once), so nothing
leaves the machine whatever a generated line asks for.
"""

from __future__ import annotations

import array
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import termios
import time
from typing import TYPE_CHECKING, Any

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_helpers import modern
from stdio_process import ROOT, Child
from test_mcp_hostile_input import LINES, SURROGATE_LINES, SURROGATE_MESSAGE

from testkit.servers import Reply, serve_http

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


def _config(tmp_path: Path, base_url: str, extra: str = "") -> Path:
    path = tmp_path / "rypsok.toml"
    engine = (
        f'[engines.wiki]\ntype = "wikipedia"\ncategories = ["general"]\nbase_url = "{base_url}"'
    )
    path.write_text(f"config_version = 1\n{extra}\n{engine}\n", encoding="utf-8")
    return path


def _serve_argv(config: Path) -> list[str]:
    return [sys.executable, "-m", "rypsok", "serve", "--config", str(config)]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("RYPSOK_", "BRAVE_"))}


class _RefusingPort:
    """A loopback port bound but never listening: connections to it are refused."""

    def __enter__(self) -> str:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/w"

    def __exit__(self, *exc: object) -> None:
        self._sock.close()


def _run(config: Path, lines: list[bytes]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        _serve_argv(config),
        input=b"".join(line + b"\n" for line in lines),
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        env=_env(),
        check=False,
    )


def _answers(stdout: bytes) -> Iterator[dict[str, Any]]:
    assert stdout == b"" or stdout.endswith(b"\n")
    for raw in stdout.splitlines():
        answer = json.loads(raw.decode("utf-8"))  # strict UTF-8: no surrogate on the wire
        for one in answer if isinstance(answer, list) else [answer]:
            assert one["jsonrpc"] == "2.0"
            assert ("result" in one) != ("error" in one)
            yield one


PING = b'{"jsonrpc":"2.0","id":"alive","method":"ping"}'


def test_req_mcp_004_the_issues_line_is_answered_and_the_next_line_too(tmp_path: Path) -> None:
    """A line of only an id holding a lone surrogate (no jsonrpc member) gets a parse error
    without an id, and the line after it is still served: one bad line never ends stdio."""
    with _RefusingPort() as url:
        proc = _run(
            _config(tmp_path, url),
            [b'{"id":"\\ud800"}', b'{"jsonrpc":"2.0","id":2,"method":"ping"}'],
        )
    assert proc.returncode == 0
    assert list(_answers(proc.stdout)) == [
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": SURROGATE_MESSAGE}},
        {"jsonrpc": "2.0", "id": 2, "result": {}},
    ]


def test_req_mcp_004_a_surrogate_in_any_field_never_ends_the_process(tmp_path: Path) -> None:
    # In a 2025-03-26 session, so that the batch is one a batch-accepting server reads.
    opening = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": "init",
            "method": "initialize",
            "params": {"protocolVersion": "2025-03-26", "capabilities": {}},
        }
    ).encode()
    lines = [opening]
    for index, line in enumerate(SURROGATE_LINES.values()):
        lines += [line.encode(), b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % index]
    with _RefusingPort() as url:
        proc = _run(_config(tmp_path, url), lines)
    assert proc.returncode == 0
    answers = list(_answers(proc.stdout))
    assert answers[0]["id"] == "init"
    # Every line with an id got the parse error, and the ping after it its answer, in order.
    expected = []
    for index, line in enumerate(SURROGATE_LINES.values()):
        if '"id"' in line or '"method"' not in line:
            expected.append(-32700)
        expected.append(index)
    got = [a["error"]["code"] if "error" in a else a["id"] for a in answers[1:]]
    assert got == expected
    events = [json.loads(line)["event"] for line in proc.stderr.splitlines()]
    assert "stdio_end_of_input" in events
    assert "exception" not in proc.stderr.decode()


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(LINES, min_size=1, max_size=12))
def test_req_sec_014_generated_lines_through_a_real_process_never_end_it(
    tmp_path: Path, lines: list[bytes]
) -> None:
    with _RefusingPort() as url:
        proc = _run(_config(tmp_path, url, "[service]\nshutdown_ms = 2000\n"), [*lines, PING])
    assert proc.returncode == 0
    answers = list(_answers(proc.stdout))
    assert {"jsonrpc": "2.0", "id": "alive", "result": {}} in answers
    for line in proc.stderr.splitlines():
        json.loads(line)


async def test_req_sec_015_a_surrogate_in_a_providers_json_is_removed_not_the_answer(
    tmp_path: Path,
) -> None:
    # Through the real driver, pipeline and boundary: the provider escapes a lone surrogate
    # in a title and in a snippet; both results come back, cleaned, with the notice.
    body = (
        b'{"batchcomplete":true,"query":{"search":['
        b'{"ns":0,"title":"Rust\\ud800 (language)","pageid":1,"snippet":"fast \\udc00safe",'
        b'"timestamp":"2026-01-02T03:04:05Z"},'
        b'{"ns":0,"title":"Rust & Bone","pageid":2,"snippet":"a film",'
        b'"timestamp":"2026-01-03T03:04:05Z"}]}}'
    )
    reply = Reply(body=body, headers=(("content-type", "application/json"),))
    async with serve_http({"/w/api.php": reply}) as server, trio.open_nursery() as nursery:
        config = _config(tmp_path, f"{server.url}/w")
        child = await Child.start(nursery, _serve_argv(config))
        await child.send(
            modern("tools/call", request_id=1, name="web_search", arguments={"query": "rust"})
        )
        answer = await child.line()
        await child.close_stdin()
        assert await child.wait() == 0
        nursery.cancel_scope.cancel()
    result = answer["result"]
    assert result["isError"] is False
    structured = result["structuredContent"]
    assert json.loads(result["content"][0]["text"]) == structured
    assert structured["outcome"] == "ok"
    assert {"code": "characters_removed", "count": 2} in structured["notices"]
    first, second = structured["results"]
    assert first["title"] == "Rust (language)"
    assert first["snippet"] == "fast safe"
    assert first["url"] == f"{server.url}/w/index.php?title=Rust_(language)"
    assert second["title"] == "Rust & Bone"


def _unread(fd: int) -> int:
    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count, True)
    return count[0]


def _wait_until_the_pipe_is_full(fd: int) -> None:
    # A pipe stops taking writes before its byte capacity (it is filled by pages), so
    # "full" is: something written, then nothing more for half a second.
    deadline = time.monotonic() + 30
    seen, since = -1, time.monotonic()
    while True:
        now, unread = time.monotonic(), _unread(fd)
        if unread != seen:
            seen, since = unread, now
        elif unread > 0 and now - since >= 0.5:
            return
        assert now < deadline, "the server never filled its pipe"
        time.sleep(0.02)


def test_lim_o1_sigterm_while_the_host_does_not_read_stdout_exits_within_shutdown_ms(
    tmp_path: Path,
) -> None:
    # Answers pile up in a pipe nobody reads (each tool list is kilobytes; a pipe holds
    # 64 KiB), so the server is blocked in a write when SIGTERM comes. The default
    # service.shutdown_ms, 3000, is LIM-O1's bound; the process plans to be gone by 2.5 s.
    tools_list = json.dumps(modern("tools/list", request_id=1)).encode() + b"\n"
    with _RefusingPort() as url:
        stderr = tmp_path / "stderr.log"
        with stderr.open("wb") as err:
            proc = subprocess.Popen(
                _serve_argv(_config(tmp_path, url)),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=ROOT,
                env=_env(),
            )
            try:
                assert proc.stdin is not None
                proc.stdin.write(tools_list * 60)
                proc.stdin.flush()
                assert proc.stdout is not None
                # Wait until the pipe takes no more: 60 answers of kilobytes each can never
                # all fit in it, so from then on the server is blocked in a write.
                _wait_until_the_pipe_is_full(proc.stdout.fileno())
                sent = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                code = proc.wait(timeout=30)
                elapsed = time.monotonic() - sent
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                assert proc.stdout is not None
                written = proc.stdout.read()
                proc.stdout.close()
                assert proc.stdin is not None
                proc.stdin.close()
    assert code == 0
    assert elapsed < 3.0
    events = [json.loads(line)["event"] for line in stderr.read_bytes().splitlines()]
    assert "sigterm_received" in events
    # The blocked write is cut by the shutdown's deadline and reported once, not once per
    # answer queued behind it.
    assert events.count("stdio_output_stalled") == 1
    # What reached stdout is whole answers, then at most one fragment cut by the deadline.
    whole = written.split(b"\n")[:-1]
    assert len(whole) >= 1
    for line in whole:
        assert json.loads(line)["id"] == 1


async def test_req_sec_015_surrogates_from_each_json_driver_are_removed_and_counted(
    tmp_path: Path,
) -> None:
    # The facade with both JSON drivers behind their real origins (routed to local servers):
    # Wikipedia builds a URL from the title, Brave returns its own URLs.
    from provider_network import ProviderNetwork, tls_for

    from rypsok import Rypsok, SearchRequest
    from rypsok.config.load import load_config

    wiki_body = (
        b'{"query":{"search":[{"ns":0,"title":"Rust\\ud800 lang","pageid":1,'
        b'"snippet":"a \\udbff<b>b</b>","timestamp":"2026-01-02T03:04:05Z"}]}}'
    )
    brave_body = (
        b'{"web":{"results":['
        b'{"title":"Brave \\udc00title","url":"https://example.org/kept","description":"d\\udfff"},'
        b'{"title":"Bad url","url":"https://example.org/\\ud800","description":"x"}]}}'
    )
    json_type = (("content-type", "application/json"),)
    config_path = tmp_path / "two.toml"
    config_path.write_text(
        "config_version = 1\n"
        '[engines.wikipedia]\ntype = "wikipedia"\ncategories = ["general"]\n'
        '[engines.brave]\ntype = "brave"\ncategories = ["general"]\n'
        'api_key_env = "BRAVE_API_KEY"\n',
        encoding="utf-8",
    )
    env = {"BRAVE_API_KEY": "BSA-test-key-0123456789"}
    async with (
        serve_http(
            {"/w/api.php": Reply(body=wiki_body, headers=json_type)},
            tls=tls_for("en.wikipedia.org"),
        ) as wiki,
        serve_http(
            {"/res/v1/web/search": Reply(body=brave_body, headers=json_type)},
            tls=tls_for("api.search.brave.com"),
        ) as brave,
    ):
        network = ProviderNetwork({"en.wikipedia.org": wiki, "api.search.brave.com": brave})
        config = load_config(str(config_path), env)
        async with Rypsok(config, env=env, engine_network=network.engine_network) as rypsok:
            response = (await rypsok.search(SearchRequest(query="rust"))).to_json()
    assert len(wiki.requests) == len(brave.requests) == 1
    assert response["outcome"] == "ok"
    by_title = {r["title"]: r for r in response["results"]}
    assert set(by_title) == {"Rust lang", "Brave title"}
    assert by_title["Rust lang"]["url"] == "https://en.wikipedia.org/wiki/Rust_lang"
    assert by_title["Rust lang"]["snippet"] == "a b"
    assert by_title["Brave title"]["snippet"] == "d"
    notices = response["notices"]
    assert {"code": "characters_removed", "count": 4} in notices
    # Brave's URL with a surrogate cannot be a link: that result is dropped and counted.
    assert {"code": "results_dropped", "reason": "url_invalid", "count": 1} in notices
    one_line_of = json.dumps(response, ensure_ascii=False).encode("utf-8")
    assert b"\\ud8" not in one_line_of
