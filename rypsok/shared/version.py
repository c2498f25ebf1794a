"""The release's version, importable without importing the package's public surface."""

from __future__ import annotations

from typing import Final

__all__ = ["__version__"]

__version__: Final = "0.10.0"
