"""The protocol revisions rypsok serves and how a version is agreed in each era.

Modern (2026-07-28): no handshake; every request names its revision in `_meta`.
Legacy (handshake): `initialize` negotiates one revision for the stdio process (or, over
HTTP, the session); it can be switched off by the operator (`legacy_revisions = false`).
"""

from __future__ import annotations

__all__ = [
    "BATCH_REVISIONS",
    "LEGACY_REVISIONS",
    "MODERN_REVISION",
    "STRUCTURED_REVISIONS",
    "negotiate_legacy",
    "supported_versions",
]

MODERN_REVISION = "2026-07-28"
# Newest first: the order of `supportedVersions`.
LEGACY_REVISIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26")
# JSON-RPC batches: 2025-03-26 requires a receiver to accept them; 2025-06-18 removed them and
# no later revision has them.
BATCH_REVISIONS: frozenset[str] = frozenset({"2025-03-26"})
# Output schemas and structuredContent exist from 2025-06-18 on.
STRUCTURED_REVISIONS: frozenset[str] = frozenset({MODERN_REVISION, "2025-11-25", "2025-06-18"})


def supported_versions(*, legacy_enabled: bool) -> list[str]:
    return [MODERN_REVISION, *LEGACY_REVISIONS] if legacy_enabled else [MODERN_REVISION]


def negotiate_legacy(requested: object) -> str:
    """The handshake rule: the requested revision when served, else the newest served one."""
    if isinstance(requested, str) and requested in LEGACY_REVISIONS:
        return requested
    return LEGACY_REVISIONS[0]
