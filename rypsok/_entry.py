"""The `rypsok` console script: install the early SIGTERM handler, then run the command line."""

from __future__ import annotations

import gc


def main() -> int:
    from rypsok import _early

    _early.install()
    _skip_httpx_command_line()
    # No garbage collection while the modules import: they only add objects that live as
    # long as the process, and a collection pass over them is wasted start-up time. `serve`
    # turns it back on once everything is imported (`cli.startup_done`); this is the net.
    gc.disable()
    try:
        from rypsok.cli import main as cli_main

        return cli_main()
    finally:
        gc.enable()


def _skip_httpx_command_line() -> None:
    """Keep httpx from importing its own command line (click, rich, pygments) into rypsok.

    httpx imports `httpx._main` whenever those optional packages happen to be installed,
    which costs about a quarter of rypsok's start-up and is never used: rypsok is not
    httpx's command line. A module marked absent makes httpx take its documented fallback.
    Done only here, in rypsok's own process, never on `import rypsok` in someone else's.
    """
    import sys

    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
