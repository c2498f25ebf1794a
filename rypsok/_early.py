"""Remembers a SIGTERM that arrives while the command line is still importing its modules.

Importing the core takes a few hundred milliseconds. A host that stops rypsok in that window
must still get the graceful stop of REQ-OPS-002 (exit 0), not the default kill, so the entry
point installs this handler before anything heavy is imported, and the stdio transport reads
the flag when its own signal receiver takes over. Commands that do not serve put the default
handler back and replay a signal that already came.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import FrameType

_received = False


def _note(signum: int, frame: FrameType | None) -> None:
    global _received
    _received = True


def install() -> None:
    """Catch SIGTERM from now on, unless the embedding program chose its own handler."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _note)


def received() -> bool:
    return _received


def restore() -> None:
    """Give SIGTERM its default meaning again; a signal that already came takes effect now."""
    if signal.getsignal(signal.SIGTERM) is _note:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if _received:
            signal.raise_signal(signal.SIGTERM)
