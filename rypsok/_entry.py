"""The `rypsok` console script: install the early SIGTERM handler, then run the command line."""

from __future__ import annotations


def main() -> int:
    from rypsok import _early

    _early.install()
    from rypsok.cli import main as cli_main

    return cli_main()
