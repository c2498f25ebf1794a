"""The document bounds a page is parsed under, in a module of their own so that the service
can size the parse budget (slots.py) at start-up without loading the extractor."""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_DEPTH", "MAX_NODES"]

MAX_NODES: Final = 100_000  # LIM-F10
MAX_DEPTH: Final = 256  # LIM-F11
