"""Tutorial 5 replayed: the scraping switch's sentence, and a challenge reported as blocked.

Two cases, each against a fresh process as a host starts it:

- `rypsok check` on Tutorial 5's file without its `[scraping]` table prints the book's one
  sentence and exits 1; with the table it exits 0 and warns about the `ddg` engine.
- A web_search with Tutorial 5's file, where the DuckDuckGo fixture answers with the
  challenge page: the search comes back partial with the notice of Tutorial 5, step 3.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

from testkit import messages
from testkit.servers import Reply, serve_http

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "examples" / "configs" / "tutorial-5.toml"
CHALLENGE = ROOT / "tests" / "fixtures" / "ddg-challenge.html"
CASE_TIMEOUT_S = 20

REFUSAL = (
    'rypsok: engines.ddg: type "duckduckgo" scrapes a human-facing interface; it runs only '
    "with [scraping] enabled = true, at the operator's risk under the provider's terms"
)
BLOCKED = {"code": "engine_unavailable", "engine": "ddg", "reason": "blocked"}


def _challenge() -> Reply:
    """html.duckduckgo.com's challenge page, the answer to every request."""
    return Reply(
        headers=(("Content-Type", "text/html; charset=utf-8"),), body=CHALLENGE.read_bytes()
    )


async def _run(argv: list[str], stdin: bytes = b"") -> Any:
    with trio.fail_after(CASE_TIMEOUT_S):
        return await trio.run_process(
            argv, stdin=stdin, capture_stdout=True, capture_stderr=True, check=False, cwd=ROOT
        )


async def check_case() -> str:
    text = CONFIG.read_text(encoding="utf-8")
    if "[scraping]\nenabled = true\n" not in text:
        return "tutorial-5.toml has no [scraping] enabled = true"
    with tempfile.TemporaryDirectory() as folder:
        bare = Path(folder) / "tutorial-5-no-switch.toml"
        bare.write_text(text.replace("[scraping]\nenabled = true\n", ""), encoding="utf-8")
        refused = await _run([sys.executable, "-m", "rypsok", "check", "--config", str(bare)])
    if refused.returncode != 1:
        return f"check without the switch exited {refused.returncode}, expected 1"
    lines = refused.stderr.decode().splitlines() + refused.stdout.decode().splitlines()
    if REFUSAL not in lines:
        return "check without the switch did not print the book's sentence"
    accepted = await _run([sys.executable, "-m", "rypsok", "check", "--config", str(CONFIG)])
    if accepted.returncode != 0:
        return f"check with the switch exited {accepted.returncode}, expected 0"
    output = accepted.stderr.decode() + accepted.stdout.decode()
    if "rypsok: warning: engines.ddg:" not in output:
        return "check with the switch did not warn about the scraping engine"
    return ""


async def blocked_case(wiki_port: int) -> str:
    async with serve_http(default=_challenge()) as page:
        argv = [
            sys.executable, "-m", "conformance.launch", "--config", str(CONFIG),
            "--route", f"en.wikipedia.org={wiki_port}",
            "--route", f"html.duckduckgo.com={page.port}",
        ]  # fmt: skip
        call = messages.modern("tools/call", name="web_search", arguments={"query": "rust"})
        done = await _run(argv, json.dumps(call).encode() + b"\n")
        requests = len(page.requests)
    if done.returncode != 0:
        return f"exit code {done.returncode}"
    lines = done.stdout.splitlines()
    if len(lines) != 1:
        return f"{len(lines)} lines on stdout, expected 1"
    structured = json.loads(lines[0]).get("result", {}).get("structuredContent", {})
    if structured.get("outcome") != "partial":
        return f"outcome {structured.get('outcome')!r}, expected 'partial'"
    if BLOCKED not in structured.get("notices", []):
        return "the notice of Tutorial 5, step 3 is missing"
    if requests != 1:
        return f"DuckDuckGo was asked {requests} times, expected once"
    if b'"event": "scraping_enabled"' not in done.stderr:
        return "no scraping_enabled log line at start"
    return ""
