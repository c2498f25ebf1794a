"""The `rypsok` console script: install the early SIGTERM handler, then run the command line."""

from __future__ import annotations


def main() -> int:
    from rypsok import _early
    from rypsok.shared import own_process

    # The process is rypsok's own: `serve` may tune it and freeze what start-up made.
    own_process.claim()
    _early.install()
    _prefetch_trust_store()
    _skip_httpx_command_line()
    from rypsok.cli import main as cli_main

    return cli_main()


def _prefetch_trust_store() -> None:
    """For `serve`, start reading the system's trust store now, in a thread (see
    `rypsok.core.egress.trust.prefetch`): `serve` needs it before it answers anything, and
    the read, which releases the GIL, then overlaps the imports of the command line.

    A guess from the first word that is not an option; a wrong guess only costs a thread
    that builds a context nobody reads. The check at start and its failure are unchanged.
    """
    import sys

    command = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), None)
    if command == "serve":
        from rypsok.core.egress.trust import prefetch

        prefetch()


def _skip_httpx_command_line() -> None:
    """Keep httpx from importing its own command line (click, rich, pygments) into rypsok.

    httpx imports `httpx._main` whenever those optional packages happen to be installed,
    which costs about a quarter of rypsok's start-up and is never used: rypsok is not
    httpx's command line. A module marked absent makes httpx take its documented fallback.
    Done only here, in rypsok's own process, never on `import rypsok` in someone else's.
    """
    import sys

    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
