"""Tutorial 3's reads, end to end: `tools/first-fetch` (no network needed).

A fixture web site on 127.0.0.1 plays https://example.org over TLS (the page of the book's
web_fetch examples and a robots.txt). rypsok is started by `conformance.launch` (the same
serve code as `rypsok serve`) with Tutorial 3's configuration, reaching the site through an
allow rule added in code, a resolver mapping example.org to 127.0.0.1 and a trust store
holding only the fixture's authority. The three calls of `examples/first-fetch.jsonl` (the
page, then the page in two parts of 500 characters) are piped through and answered.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from testkit.fetch_site import HOST, FixtureSite, temporary_folder

ROOT = Path(__file__).resolve().parent.parent
JSONL = ROOT / "examples" / "first-fetch.jsonl"
CONFIG = ROOT / "examples" / "configs" / "tutorial-3.toml"


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


async def _main() -> int:
    with temporary_folder() as folder:
        site = FixtureSite(folder)
        async with trio.open_nursery() as nursery:
            port = await nursery.start(site.serve)
            _say(
                f"# https://{HOST} is played by a local fixture site at 127.0.0.1:{port} "
                "(its own TLS authority); nothing leaves the machine."
            )
            argv = [sys.executable, "-m", "conformance.launch", "--config", str(CONFIG)]
            argv += ["--fetch-site", f"{HOST}={port}", "--fetch-ca", str(site.ca_file)]
            done = await trio.run_process(
                argv,
                stdin=JSONL.read_bytes(),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                cwd=ROOT,
            )
            nursery.cancel_scope.cancel()
    sys.stdout.write(done.stdout.decode("utf-8"))
    expected = len(JSONL.read_bytes().splitlines())
    if done.returncode != 0 or len(done.stdout.splitlines()) != expected:
        sys.stderr.write(done.stderr.decode("utf-8", "replace"))
        _say(f"first-fetch: expected {expected} answer lines (exit code {done.returncode})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(trio.run(_main))
