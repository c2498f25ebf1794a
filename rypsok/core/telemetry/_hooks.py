"""Exceptions that escape everything become one log line naming their type.

The default hooks print the message and the traceback to stderr; a message can quote a
provider's answer, a page or a credential, so neither is written.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING

from ._log import exception_fields, log

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["install_excepthook"]


def install_excepthook() -> None:
    """Route uncaught exceptions of the main thread, of other threads and unraisable ones."""
    sys.excepthook = _excepthook
    threading.excepthook = _threading_excepthook
    sys.unraisablehook = _unraisablehook


def _excepthook(
    exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    log("error", "uncaught_exception", where="main", **exception_fields(exc))


def _threading_excepthook(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        # The default hook ignores a thread that ends with SystemExit; so does this one.
        return
    if args.exc_value is None:
        fields: dict[str, object] = {"exception": args.exc_type.__name__}
    else:
        fields = exception_fields(args.exc_value)
    log("error", "uncaught_exception", where="thread", **fields)


def _unraisablehook(unraisable: sys.UnraisableHookArgs) -> None:
    if unraisable.exc_value is None:
        fields: dict[str, object] = {"exception": unraisable.exc_type.__name__}
    else:
        fields = exception_fields(unraisable.exc_value)
    log("error", "uncaught_exception", where="unraisable", **fields)
