"""The secret wrapper lives below the core and the configuration; kept here for imports."""

from __future__ import annotations

from rypsok.shared.secret import REDACTED, Secret

__all__ = ["REDACTED", "Secret"]
