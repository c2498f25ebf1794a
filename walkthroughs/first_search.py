"""Tutorial 1's pipe, end to end: `tools/first-search` (fixture) or `--live` (Wikipedia).

Without `--live` a local MediaWiki-shaped fixture server on 127.0.0.1 stands in for
Wikipedia: the configuration is Tutorial 1's with the engine's `base_url` pointed at it, so
no network is needed and the result URLs are the local mirror's. With `--live` the pipe runs
exactly as the tutorial writes it, against the real Wikipedia.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from testkit.mediawiki import FixtureWiki

if TYPE_CHECKING:
    from collections.abc import Sequence

ROOT = Path(__file__).resolve().parent.parent
JSONL = ROOT / "examples" / "first-search.jsonl"
LIVE_CONFIG = ROOT / "examples" / "configs" / "tutorial-1.toml"

MIRROR_CONFIG = """\
# Tutorial 1, with the engine pointed at a local MediaWiki fixture (no network needed).
config_version = 1
[engines.wikipedia]
type = "wikipedia"
categories = ["general", "science"]
base_url = "http://127.0.0.1:{port}/w"
"""


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


async def _serve(config: Path, command: Sequence[str] = (sys.executable, "-m", "rypsok")) -> int:
    done = await trio.run_process(
        [*command, "serve", "--config", str(config)],
        stdin=JSONL.read_bytes(),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    sys.stdout.write(done.stdout.decode("utf-8"))
    if done.returncode != 0 or len(done.stdout.splitlines()) != 2:
        sys.stderr.write(done.stderr.decode("utf-8", "replace"))
        _say(f"first-search: expected two answer lines (exit code {done.returncode})")
        return 1
    return 0


async def _fixture(command: Sequence[str]) -> int:
    wiki = FixtureWiki()
    async with trio.open_nursery() as nursery:
        port = await nursery.start(wiki.serve)
        _say(
            f"# Wikipedia is played by a local fixture at http://127.0.0.1:{port}/w "
            "(result URLs are the mirror's); use --live for the real Wikipedia."
        )
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "rypsok.toml"
            config.write_text(MIRROR_CONFIG.format(port=port), encoding="utf-8")
            code = await _serve(config, command)
        nursery.cancel_scope.cancel()
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/first-search")
    parser.add_argument("--live", action="store_true", help="search the real Wikipedia")
    parser.add_argument(
        "--command",
        help="how to start rypsok, as a shell-quoted command (default: this Python's -m rypsok);"
        " tools/check-install passes an installed console script",
    )
    args = parser.parse_args(argv)
    command = shlex.split(args.command) if args.command else [sys.executable, "-m", "rypsok"]
    if args.live:
        _say(f"# live: the real Wikipedia, with {LIVE_CONFIG.relative_to(ROOT)}")
        return trio.run(_serve, LIVE_CONFIG, command)
    return trio.run(_fixture, command)


if __name__ == "__main__":
    sys.exit(main())
