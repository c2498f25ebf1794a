"""The command line (REQ-OPS-001): `serve`, `check`, `init`, `--version`; exit 0, 1 or 2.

Nothing here writes to standard output except `--version` and `init`'s host entry (what a
user pastes, so it can be redirected alone): the stdio transport owns stdout, and every
diagnostic goes to standard error.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, NoReturn

from rypsok import __version__, _early
from rypsok.config.check import PREFIX, run_check, validate
from rypsok.config.load import ConfigError
from rypsok.core import telemetry

if TYPE_CHECKING:
    from collections.abc import Mapping

    from _typeshed import SupportsWrite

    from rypsok.config.schema import Config

__all__ = ["main"]

EXIT_OK = 0
EXIT_CONFIG = 1
EXIT_USAGE = 2


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors raised instead of exiting, so that `main` returns 2."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        # Help is a diagnostic like every other word of the program: standard error.
        super().print_help(sys.stderr if file is None else file)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        # argparse passes a message only from error(), which raises _UsageError instead;
        # what calls this is --help, after printing the help.
        raise _Exit(status)


class _Exit(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _parser() -> _Parser:
    parser = _Parser(
        prog="rypsok",
        description="A headless meta-search service for AI agents (MCP over stdio or HTTP).",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    commands = parser.add_subparsers(
        dest="command", metavar="{serve,check,init}", parser_class=_Parser
    )
    serve = commands.add_parser("serve", help="serve MCP until end of input or SIGTERM")
    serve.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (the default) or http (Streamable HTTP on service.http.bind)",
    )
    serve.add_argument("--config", metavar="PATH", help="the configuration file")
    check = commands.add_parser("check", help="validate the configuration and print it")
    check.add_argument("--config", metavar="PATH", help="the configuration file")
    init = commands.add_parser(
        "init", help="write a commented starter configuration and print its host entry"
    )
    init.add_argument("path", metavar="PATH", help="the file to create (never replaced)")
    return parser


def _err(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    # An exception escaping from here on is one JSON line without its message, not a
    # traceback that could quote a configuration value.
    telemetry.install_excepthook()
    parser = _parser()
    try:
        args = parser.parse_args(args_in)
    except _Exit as exc:
        return exc.status
    except _UsageError as exc:
        parser.print_usage(sys.stderr)
        _err(f"rypsok: error: {exc}")
        return EXIT_USAGE
    if args.command != "serve":
        # Only serving stops gracefully on SIGTERM; the other commands keep its default.
        _early.restore()
    if args.version:
        if args.command is not None:
            _err("rypsok: error: --version takes no command")
            return EXIT_USAGE
        sys.stdout.write(f"rypsok {__version__}\n")
        sys.stdout.flush()
        return EXIT_OK
    env: Mapping[str, str] = os.environ
    if args.command == "check":
        report = run_check(args.config, env)
        for line in report.lines:
            _err(line)
        return report.exit_code
    if args.command == "serve":
        return _serve(args.transport, args.config, env)
    if args.command == "init":
        refused = _init_path_refused(args.path)
        if refused is not None:
            parser.print_usage(sys.stderr)
            _err(f"rypsok: error: {refused}")
            return EXIT_USAGE
        return _init(args.path)
    parser.print_usage(sys.stderr)
    _err("rypsok: error: a command is required: serve, check or init")
    return EXIT_USAGE


def _init_path_refused(path: str) -> str | None:
    """Why `path` is no file's path for init (a usage error), or None. `-` is standard output
    to most commands: init writes a file, which `./-` names."""
    if path == "-":
        return "init writes a file, not standard output: give its path (./- for a file named -)"
    if not path:
        return "init needs the path of the file to create"
    return None


def _init(path: str) -> int:
    from rypsok.config.starter import StarterExists, host_entry, write_starter

    try:
        written = write_starter(path)
    except StarterExists as exc:
        if exc.directory:
            _err(
                PREFIX + "init: PATH names a directory: name the file to create in it"
                " (PATH/rypsok.toml)"
            )
        else:
            _err(PREFIX + "init: the file exists; init never replaces one: give another PATH")
        return EXIT_CONFIG
    except OSError as exc:
        _err(
            PREFIX + f"init: the file cannot be created ({exc.strerror or 'error'}); give a PATH"
            " in a directory that exists and that you can write"
        )
        return EXIT_CONFIG
    _err(PREFIX + f"wrote a starter configuration to {written}")
    _err(PREFIX + "the host entry that uses it (write the full path of rypsok as the command")
    _err(PREFIX + "where the host does not inherit your PATH; `command -v rypsok` prints it):")
    sys.stdout.write(host_entry(written))
    sys.stdout.flush()
    return EXIT_OK


def _serve(transport: str, path: str | None, env: Mapping[str, str]) -> int:
    try:
        validated = validate(path, env)
    except ConfigError as exc:
        _err(PREFIX + str(exc))
        return EXIT_CONFIG
    from rypsok.core.egress.trust import ClientBuildError, trust_store_context

    try:
        # Every outbound client trusts the system's store: a missing one stops the start
        # here, said once (deployment page; audit F-3).
        trust_store_context()
    except ClientBuildError as exc:
        _err(PREFIX + str(exc))
        return EXIT_CONFIG
    config = validated.config
    # In the background: a host that never reads standard error must not stop serving.
    telemetry.configure(
        level=config.logging.level, log_queries=config.logging.log_queries, background=True
    )
    try:
        return _run_transport(transport, config, env)
    except Exception as exc:
        refused = _config_error_in(exc)
        if refused is None:
            raise
    # What the loader cannot see (a driver that refuses its engine's settings) is still a
    # configuration error: said as one, with the configuration's status (spec 05).
    telemetry.error("config_invalid", message=str(refused))
    return EXIT_CONFIG


def _config_error_in(exc: BaseException) -> ConfigError | None:
    """The configuration error `exc` is or holds (a transport's nursery wraps it in a group)."""
    if isinstance(exc, ConfigError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _config_error_in(inner)
            if found is not None:
                return found
    return None


def _run_transport(transport: str, config: Config, env: Mapping[str, str]) -> int:
    try:
        if transport == "http":
            from rypsok.mcp.listener import run_http as run
        else:
            from rypsok.mcp.stdio import run_stdio as run
    except ImportError as exc:
        telemetry.error(
            "transport_unavailable", transport=transport, **telemetry.exception_fields(exc)
        )
        return EXIT_CONFIG
    return run(config, env)
