"""rypsok over stdio as a child process: stdout purity, cancellation, shutdown, the tutorial.

The engines reach a local MediaWiki fixture on 127.0.0.1 (testkit.mediawiki); limits are
small so that every test ends in well under a second or two of real time. The bounds are
measured from this process, across two processes on a machine that may be loaded: each one
either is the contract itself with the process's own reserve inside it (LIM-O1), or has a
margin that a broken build still cannot meet; the contract's exact LIM-O2 figure is checked
on Trio's MockClock in test_stdio_inprocess.py.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

import trio
from mcp_helpers import modern
from stdio_process import ROOT, Child, launch_argv, write_config

from testkit.mediawiki import HOSTILE_SNIPPET, HOSTILE_TITLE, FixtureWiki

if TYPE_CHECKING:
    from pathlib import Path

FIRST_SEARCH = ROOT / "examples" / "first-search.jsonl"
# service.shutdown_ms of the shutdown tests, and the bound LIM-O1 sets with it.
SHUTDOWN = "[service]\nshutdown_ms = 1000\n"
SHUTDOWN_S = 1.0
# A call that hangs lasts until its engine timeout unless something aborts it: set far beyond
# every bound below, so that a build that does not abort it cannot meet them.
SLOW_CALLS = "[search]\ndeadline_ms = 10000\nengine_timeout_ms = 9000\n"
LIM_O2_S = 0.5
# This process's and the child's scheduling on a loaded machine, beside LIM-O2: the whole
# bound stays a quarter of the engine timeout a broken cancellation would wait for.
LOAD_MARGIN_S = 1.75


def _events(child: Child, event: str) -> list[dict[str, Any]]:
    return [line for line in child.log_lines() if line["event"] == event]


def search(request_id: int, query: str) -> dict[str, Any]:
    return modern(
        "tools/call", request_id=request_id, name="web_search", arguments={"query": query}
    )


async def start(
    nursery: trio.Nursery, tmp_path: Path, extra: str = ""
) -> tuple[Child, FixtureWiki]:
    wiki = FixtureWiki()
    port = await nursery.start(wiki.serve)
    child = await Child.start(nursery, launch_argv(write_config(tmp_path, extra), port))
    return child, wiki


async def test_req_sec_001_hostile_engine_text_stays_in_its_fields_and_out_of_stdout_and_logs(
    tmp_path: Path,
) -> None:
    async with trio.open_nursery() as nursery:
        child, _ = await start(nursery, tmp_path, '[logging]\nlevel = "debug"\n')
        await child.send(
            modern("server/discover", request_id=1),
            search(2, "hostile"),
            b"{not json\n",
            modern("tools/call", request_id=3, name="engine_status", arguments={}),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
        )
        await child.close_stdin()
        out = await child.rest_of_stdout()
        assert await child.wait() == 0
        nursery.cancel_scope.cancel()
    lines = out.split(b"\n")
    assert lines[-1] == b""
    answers = [json.loads(line) for line in lines[:-1]]
    assert sorted(str(a["id"]) for a in answers) == ["1", "2", "3", "None"]
    for answer in answers:
        assert answer["jsonrpc"] == "2.0"
        assert ("result" in answer) != ("error" in answer)
    (hostile,) = [a for a in answers if a["id"] == 2]
    result = hostile["result"]
    assert result["isError"] is False
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    (found,) = result["structuredContent"]["results"]
    # The hostile strings stay inside their fields (cleaned by the core), never in the envelope.
    assert "jsonrpc" in found["title"]
    assert "isError" in found["snippet"]
    assert set(result) == {"resultType", "content", "structuredContent", "isError"}
    # Every byte on stderr is a log line; there is debug output and no query text.
    logs = child.log_lines()
    assert any(line["level"] == "debug" for line in logs)
    assert HOSTILE_TITLE not in child.stderr.decode("utf-8", "replace")
    assert HOSTILE_SNIPPET not in child.stderr.decode("utf-8", "replace")


async def test_req_mcp_007_cancelled_call_is_aborted_within_lim_o2_and_gets_no_answer(
    tmp_path: Path,
) -> None:
    async with trio.open_nursery() as nursery:
        child, wiki = await start(nursery, tmp_path, SLOW_CALLS)
        await child.send(search(1, "hang"))
        with trio.fail_after(5):
            await wiki.hung.wait()
        cancelled_at = time.monotonic()
        await child.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        )
        with trio.fail_after(5):
            await wiki.hung_closed.wait()
        # The request to the engine is closed by the cancellation, not by its timeout (9 s).
        assert wiki.hung_closed_at[0] - cancelled_at < LIM_O2_S + LOAD_MARGIN_S
        await child.send(search(2, "rust programming language"))
        answer = await child.line()
        assert answer["id"] == 2
        assert answer["result"]["isError"] is False
        assert len(answer["result"]["structuredContent"]["results"]) == 2
        await child.close_stdin()
        assert await child.rest_of_stdout() == b""
        assert await child.wait() == 0
        nursery.cancel_scope.cancel()


async def test_req_ops_002_end_of_input_with_a_call_in_flight_exits_within_shutdown_ms(
    tmp_path: Path,
) -> None:
    async with trio.open_nursery() as nursery:
        child, wiki = await start(nursery, tmp_path, SHUTDOWN)
        await child.send(search(1, "hang"))
        with trio.fail_after(5):
            await wiki.hung.wait()
        eof = await child.close_stdin()
        code = await child.wait()
        elapsed = time.monotonic() - eof
        # The behaviour: a clean exit, the call aborted (its request to the engine closed)
        # and never answered; and the contract's bound, service.shutdown_ms (LIM-O1).
        assert code == 0
        assert wiki.hung_closed.is_set()
        assert await child.rest_of_stdout() == b""
        assert elapsed < SHUTDOWN_S
        nursery.cancel_scope.cancel()


async def test_req_ops_002_sigterm_with_a_call_in_flight_exits_within_shutdown_ms(
    tmp_path: Path,
) -> None:
    async with trio.open_nursery() as nursery:
        child, wiki = await start(nursery, tmp_path, SHUTDOWN)
        await child.send(search(1, "hang"))
        with trio.fail_after(5):
            await wiki.hung.wait()
        sent = time.monotonic()
        child.process.send_signal(signal.SIGTERM)
        code = await child.wait()
        elapsed = time.monotonic() - sent
        # As for end of input: the call is aborted without an answer, the exit is clean and
        # within service.shutdown_ms. The process plans to be gone half a second before
        # that bound (stdio.shutdown_plan), so the bound holds on a loaded machine too.
        assert code == 0
        assert wiki.hung_closed.is_set()
        assert await child.rest_of_stdout() == b""
        assert [e["in_flight"] for e in _events(child, "shutdown_started")] == [1]
        assert elapsed < SHUTDOWN_S
        nursery.cancel_scope.cancel()


async def test_req_ops_002_sigterm_before_the_first_message_exits_cleanly(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        child, _ = await start(nursery, tmp_path, SHUTDOWN)
        await child.wait_for_log("serving")
        sent = time.monotonic()
        child.process.send_signal(signal.SIGTERM)
        assert await child.wait() == 0
        assert time.monotonic() - sent < SHUTDOWN_S
        assert await child.rest_of_stdout() == b""
        assert [e["in_flight"] for e in _events(child, "shutdown_started")] == [0]
        nursery.cancel_scope.cancel()


async def test_req_mcp_002_lim_o3_line_over_16_mib_is_dropped_and_the_next_line_is_served(
    tmp_path: Path,
) -> None:
    async with trio.open_nursery() as nursery:
        child, _ = await start(nursery, tmp_path)
        big = json.dumps(search(1, "x" * (16 * 1024 * 1024))).encode() + b"\n"
        await child.send(big, modern("tools/list", request_id=2))
        answer = await child.line()
        assert answer["id"] == 2
        await child.close_stdin()
        assert await child.rest_of_stdout() == b""
        assert await child.wait() == 0
        nursery.cancel_scope.cancel()


async def test_req_mcp_002_first_search_jsonl_gives_two_answer_lines(tmp_path: Path) -> None:
    lines = FIRST_SEARCH.read_bytes().splitlines(keepends=True)
    assert len(lines) == 2
    async with trio.open_nursery() as nursery:
        child, _ = await start(nursery, tmp_path)
        await child.send(*lines)
        await child.close_stdin()
        out = await child.rest_of_stdout()
        assert await child.wait() == 0
        nursery.cancel_scope.cancel()
    first, second = (json.loads(line) for line in out.splitlines())
    assert first["id"] == 1
    assert first["result"]["resultType"] == "complete"
    assert "2026-07-28" in first["result"]["supportedVersions"]
    assert second["id"] == 2
    structured = second["result"]["structuredContent"]
    assert structured["outcome"] == "ok"
    assert [r["title"] for r in structured["results"]] == [
        "Rust (programming language)",
        "Rust & Bone",
    ]
    assert second["result"]["content"][0]["text"] == json.dumps(
        structured, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


NOISY_SERVER = """\
import os, sys
sys.path.insert(0, {root!r})
from testkit.instant import InstantEngine
from rypsok.config.load import load_config
from rypsok.core.services import Rypsok
from rypsok.mcp.stdio import run_stdio


class NoisyEngine(InstantEngine):
    async def search(self, query):
        # Stray writes from a library: Python's stdout, the C-level descriptor, and a print.
        sys.stdout.write("stray text on sys.stdout\\n")
        sys.stdout.flush()
        os.write(1, b"stray bytes on fd 1\\n")
        print("a stray print")
        return await super().search(query)


config = load_config({config!r}, os.environ)
sys.exit(
    run_stdio(
        config,
        os.environ,
        service=lambda: Rypsok(config, env=os.environ, engines=[NoisyEngine("wikipedia")]),
    )
)
"""


async def test_req_mcp_002_stray_writes_to_stdout_during_a_call_go_to_stderr(
    tmp_path: Path,
) -> None:
    script = tmp_path / "noisy.py"
    script.write_text(
        NOISY_SERVER.format(root=str(ROOT), config=str(write_config(tmp_path))), encoding="utf-8"
    )
    async with trio.open_nursery() as nursery:
        child = await Child.start(nursery, [sys.executable, str(script)])
        await child.send(search(1, "rust"), search(2, "rust again"))
        await child.close_stdin()
        out = await child.rest_of_stdout()
        assert await child.wait() == 0
        nursery.cancel_scope.cancel()
    answers = [json.loads(line) for line in out.splitlines()]
    assert sorted(a["id"] for a in answers) == [1, 2]
    assert all(a["result"]["isError"] is False for a in answers)
    assert b"stray bytes on fd 1" in child.stderr
    assert b"a stray print" in child.stderr
    assert b"stray" not in out
