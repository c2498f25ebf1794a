"""rypsok over stdio against four fixture sites on loopback, as tools/measure-memory drives
it for pages and for PDFs: the sites, the server started as `conformance.launch` starts it
(the serve code of `rypsok serve`) and brought to rest, a batch of web_fetch calls sent at
once and their answers read with the time each arrived.

Linux only where /proc is read (`status`). Local fixture sites only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from testkit.fetch_site import FixtureSite
from testkit.messages import modern

__all__ = ["HOSTS", "exchange", "fetch_calls", "message", "sites", "started", "status"]

ROOT = Path(__file__).resolve().parent.parent
HOSTS = ("one.example.org", "two.example.org", "three.example.org", "four.example.org")
ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4")


def status(pid: int, field: str) -> int:
    """A Vm line (VmRSS, VmHWM) of /proc/<pid>/status in bytes; 0 once the process has ended
    (a zombie's status has no Vm lines)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def message(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    """One JSON-RPC request line of the stateless revision (`testkit.messages`)."""
    return json.dumps(modern(method, request_id, **params)).encode() + b"\n"


def fetch_calls(calls: int, path: str) -> bytes:
    """`calls` web_fetch calls of `path` (ids from 1), spread over the hosts in turn."""
    lines = []
    for n in range(1, calls + 1):
        url = f"https://{HOSTS[n % len(HOSTS)]}{path}"
        lines.append(message(n, "tools/call", {"name": "web_fetch", "arguments": {"url": url}}))
    return b"".join(lines)


def sites(folder: str, path: str, content_type: str, body: bytes) -> FixtureSite:
    """The four hosts serving `body` at `path` and a robots.txt that allows it."""
    pages: dict[str, tuple[int, tuple[tuple[str, str], ...], bytes]] = {
        path: (200, (("Content-Type", content_type),), body),
        "/robots.txt": (200, (("Content-Type", "text/plain"),), b"User-agent: *\nAllow: /\n"),
    }
    return FixtureSite(folder, hosts=HOSTS, pages=pages)


async def started(
    nursery: trio.Nursery, site: FixtureSite, config_path: Path, *, stderr: int
) -> tuple[trio.Process, bytes]:
    """rypsok with the configuration at `config_path`, reaching `site`'s hosts on loopback,
    started and at rest: it has answered a discover request and then stayed idle a second.
    Returns the process and what it wrote after that answer.

    Calls are sent only once it is at rest: on a loaded machine the start can take seconds,
    and calls sent before it wait in the pipe unread, a delay a host counts against LIM-F5
    that the service cannot see.
    """
    ports = [await nursery.start(site.serve, address) for address in ADDRESSES]
    argv = [sys.executable, "-m", "conformance.launch", "--config", str(config_path)]
    argv += ["--fetch-ca", str(site.ca_file)]
    for host, address, port in zip(HOSTS, ADDRESSES, ports, strict=True):
        argv += ["--fetch-site", f"{host}={address}:{port}"]
    process = await trio.lowlevel.open_process(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, cwd=ROOT
    )
    assert process.stdin is not None
    assert process.stdout is not None
    buffer = b""
    await process.stdin.send_all(message(0, "server/discover", {}))
    with trio.fail_after(60):
        while b"\n" not in buffer:
            data = await process.stdout.receive_some(1 << 16)
            if not data:
                raise RuntimeError("rypsok ended before answering server/discover")
            buffer += data
    await trio.sleep(1.0)
    return process, buffer.split(b"\n", 1)[1]


async def exchange(
    process: trio.Process, buffer: bytes, lines: bytes, count: int
) -> tuple[list[Any], list[float]]:
    """Sends `lines` at once and reads `count` answers (fewer if the process ends), each with
    the seconds from the sending to its arrival; `buffer` is what the process wrote before."""
    assert process.stdin is not None
    assert process.stdout is not None
    sent = trio.current_time()
    await process.stdin.send_all(lines)
    answers: list[Any] = []
    times: list[float] = []
    with trio.fail_after(120):
        while len(answers) < count:
            data = await process.stdout.receive_some(1 << 20)
            if not data:
                break
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                answers.append(json.loads(line))
                times.append(trio.current_time() - sent)
    return answers, times
