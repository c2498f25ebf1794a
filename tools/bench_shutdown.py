"""SIGTERM to exit of `rypsok serve` with a host that does not read stdout (LIM-O1).

Each run starts a real `rypsok serve` (its one engine a loopback address that refuses
connections, so nothing leaves the machine), sends tool lists until its output pipe is full,
sends SIGTERM and waits. Printed per run and as a summary: the time from the signal to the
exit, the time from the signal to the moment the blocked write was cut (the log event
`stdio_output_stalled`), and the difference, what closing down and the interpreter's exit
cost. Figures, not assertions: run it on the machine you care about.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def one_run(config: Path, log: Path) -> tuple[float, float]:
    line = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    )
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rypsok", "serve", "--config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=ROOT,
        )
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write((line + "\n").encode() * 60)
        proc.stdin.flush()
        while b'"serving"' not in log.read_bytes():
            time.sleep(0.02)
        time.sleep(0.3)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        exited_wall = time.time()
        elapsed = time.monotonic() - sent
        proc.stdout.close()
        proc.stdin.close()
    events = {}
    for raw in log.read_bytes().splitlines():
        event = json.loads(raw)
        events.setdefault(event["event"], _stamp(event["timestamp"]))
    return elapsed, exited_wall - events["stdio_output_stalled"]


def main() -> int:
    parser = argparse.ArgumentParser(prog="tools/bench-shutdown")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, socket.socket() as refusing:
        refusing.bind(("127.0.0.1", 0))
        port = refusing.getsockname()[1]
        config = Path(tmp) / "rypsok.toml"
        config.write_text(
            'config_version = 1\n[engines.wiki]\ntype = "wikipedia"\n'
            f'categories = ["general"]\nbase_url = "http://127.0.0.1:{port}/w"\n',
            encoding="utf-8",
        )
        totals, exits = [], []
        for run in range(args.runs):
            total, exit_cost = one_run(config, Path(tmp) / f"stderr-{run}.log")
            totals.append(total)
            exits.append(exit_cost)
            sys.stderr.write(
                f"run {run + 1}: exit {total * 1000:.0f} ms after SIGTERM, "
                f"{exit_cost * 1000:.0f} ms after the last write was cut\n"
            )
    sys.stdout.write(
        f"SIGTERM to exit, shutdown_ms 3000: median {statistics.median(totals) * 1000:.0f} ms, "
        f"max {max(totals) * 1000:.0f} ms (bound 3000 ms)\n"
        f"last write cut to exit: median {statistics.median(exits) * 1000:.0f} ms, "
        f"max {max(exits) * 1000:.0f} ms (reserve 500 ms)\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
