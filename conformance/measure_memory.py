"""`tools/measure-memory`: the memory of a rypsok process at rest and under four concurrent
web_fetch calls from four hosts, beside `rypsok check`'s estimate for the same settings.

Four fixture sites on 127.0.0.1 to 127.0.0.4 (over TLS, with an authority made for the run)
each serve one generated article of `--page-mib` MiB (paragraphs of prose, the shape the
extractor reads in full up to its 100000-node bound) and a robots.txt. rypsok runs as
`conformance.launch` does (the serve code of `rypsok serve`), with the default settings
except `fetch.max_bytes`, raised to hold the page. The tool reads the child's VmRSS at rest
(after the start, before any call) and its VmHWM (peak resident set) after the four calls,
from /proc: Linux only. Each run is a fresh process.

    tools/measure-memory [--page-mib 5] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from conformance.fetch_site import FixtureSite, temporary_folder
from rypsok.config.load import load_config_text
from rypsok.config.memory import estimate

ROOT = Path(__file__).resolve().parent.parent
HOSTS = ("one.example.org", "two.example.org", "three.example.org", "four.example.org")
ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4")
MIB = 1024 * 1024
_WORDS = [
    "ownership",
    "borrowing",
    "lifetimes",
    "compiler",
    "values",
    "references",
    "moves",
    "scope",
    "memory",
    "safety",
    "threads",
    "data",
    "races",
    "traits",
    "generics",
    "modules",
    "crates",
    "testing",
    "errors",
    "results",
    "options",
]


def article(size: int) -> bytes:
    """An HTML article of exactly `size` bytes: a title, a heading, then paragraphs."""
    head = b"<!doctype html><html><head><meta charset=utf-8><title>Measured page</title>"
    head += b"</head><body><article><h1>Measured page</h1>\n"
    tail = b"</article></body></html>\n"
    parts = [head]
    used = len(head) + len(tail)
    index = 0
    while True:
        words = " ".join(_WORDS[(index + i) % len(_WORDS)] for i in range(12))
        paragraph = f"<p>{index} {words}.</p>\n".encode()
        if used + len(paragraph) > size:
            break
        parts.append(paragraph)
        used += len(paragraph)
        index += 1
    parts.append(b" " * (size - used))
    parts.append(tail)
    return b"".join(parts)


def _status(pid: int, field: str) -> int:
    """A VmRSS/VmHWM line of /proc/<pid>/status, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/{pid}/status")


def _call(request_id: int, host: str) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {
            "name": "web_fetch",
            "arguments": {"url": f"https://{host}/page"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "measure", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    return json.dumps(message).encode() + b"\n"


async def _one_run(page_size: int, config_path: Path, folder: str) -> tuple[int, int, list[Any]]:
    body = article(page_size)
    pages = {
        "/page": (200, (("Content-Type", "text/html; charset=utf-8"),), body),
        "/robots.txt": (200, (("Content-Type", "text/plain"),), b"User-agent: *\nAllow: /\n"),
    }
    site = FixtureSite(folder, hosts=HOSTS, pages=pages)
    async with trio.open_nursery() as nursery:
        ports = [await nursery.start(site.serve, address) for address in ADDRESSES]
        argv = [sys.executable, "-m", "conformance.launch", "--config", str(config_path)]
        argv += ["--fetch-ca", str(site.ca_file)]
        for host, address, port in zip(HOSTS, ADDRESSES, ports, strict=True):
            argv += ["--fetch-site", f"{host}={address}:{port}"]
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT
        )
        assert process.stdin is not None
        assert process.stdout is not None
        # At rest: started and idle (the first line of the log is not read: wait a moment).
        await trio.sleep(1.5)
        idle = _status(process.pid, "VmRSS")
        for request_id, host in enumerate(HOSTS, start=1):
            await process.stdin.send_all(_call(request_id, host))
        answers: list[Any] = []
        buffer = b""
        with trio.fail_after(60):
            while len(answers) < len(HOSTS):
                data = await process.stdout.receive_some(1 << 20)
                if not data:
                    break
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    answers.append(json.loads(line))
        # A parse whose call ended at its deadline may still be finishing in its worker
        # thread: the peak is read once it has stopped growing for two seconds.
        peak = _status(process.pid, "VmHWM")
        steady = 0
        with trio.move_on_after(60):
            while steady < 4:
                await trio.sleep(0.5)
                now = _status(process.pid, "VmHWM")
                steady = steady + 1 if now == peak else 0
                peak = now
        await process.stdin.aclose()
        await process.wait()
        nursery.cancel_scope.cancel()
    return idle, peak, answers


def _summary(answer: dict[str, Any]) -> str:
    result = answer.get("result", {})
    content = result.get("structuredContent", {})
    if result.get("isError"):
        return "error " + json.dumps(content.get("error", {}).get("detail", {}))
    notices = ",".join(n["code"] for n in content.get("notices", []))
    return f"ok ({notices or 'no notice'})"


async def _main(page_mib: float, runs: int) -> int:
    if not sys.platform.startswith("linux"):
        sys.stdout.write("measure-memory: Linux only (it reads /proc)\n")
        return 2
    page_size = int(page_mib * MIB)
    max_bytes = max(page_size, 5 * MIB)
    text = f"config_version = 1\n[fetch]\nmax_bytes = {max_bytes}\n"
    config = load_config_text(text, {})
    figure = estimate(config)
    peaks = []
    with temporary_folder() as folder:
        config_path = Path(folder) / "measure.toml"
        config_path.write_text(text, encoding="utf-8")
        for run in range(1, runs + 1):
            idle, peak, answers = await _one_run(page_size, config_path, folder)
            peaks.append(peak)
            outcomes = "; ".join(_summary(a) for a in answers)
            sys.stdout.write(
                f"run {run}: page {page_size / MIB:.1f} MiB, at rest {idle / MIB:.1f} MiB, "
                f"peak {peak / MIB:.1f} MiB with four fetches from four hosts [{outcomes}]\n"
            )
    sys.stdout.write(
        f"check's estimate for these settings: {figure.total_mib:.0f} MiB ({figure.build}); "
        f"highest measured peak {max(peaks) / MIB:.1f} MiB; "
        f"{'above' if figure.total_bytes > max(peaks) else 'NOT above'} every measured peak\n"
    )
    return 0 if figure.total_bytes > max(peaks) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/measure-memory")
    parser.add_argument("--page-mib", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    return trio.run(_main, args.page_mib, args.runs)


if __name__ == "__main__":
    sys.exit(main())
