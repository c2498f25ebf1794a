"""The tokenless body flood at the unit's descriptor limit: the real `rypsok serve --transport
http` under the unit's `RLIMIT_NOFILE` (142), 300 connections renewing themselves that each
send a head without a token, `Content-Length: 60000` and then a byte every 0.2 s, while 20
calls arrive one after another on new connections. Prints, per run, the exit status, the
calls answered 200 on their first connection, their median and slowest answer, and the
refusals counted. Loopback only.

    tools/bench-descriptor-flood [--runs 5]
"""

# ruff: noqa: T201 (a command-line tool: it prints its figures)
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import test_http_descriptor_flood as flood


async def _runs(count: int) -> None:
    print(
        "| run | exit | answered 200 | median s | slowest s | unauthorized | too_many_connections |"
    )
    print("|---|---|---|---|---|---|---|")
    for run in range(count):
        with tempfile.TemporaryDirectory() as directory:
            code, answers, events = await flood._one_run(Path(directory))
        seconds = [s for status, s in answers if status == b"HTTP/1.1 200 "]
        refused: dict[str, int] = {}
        for event in events:
            if event["event"] == "http_refused":
                refused[event["reason"]] = refused.get(event["reason"], 0) + event["count"]
        median = statistics.median(seconds) if seconds else float("nan")
        slowest = max(seconds) if seconds else float("nan")
        print(
            f"| {run + 1} | {code} | {len(seconds)} of {len(answers)} | {median:.2f} | "
            f"{slowest:.2f} | {refused.get('unauthorized', 0)} | "
            f"{refused.get('too_many_connections', 0)} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    trio.run(_runs, parser.parse_args().runs)


if __name__ == "__main__":
    main()
