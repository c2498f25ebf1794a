"""The MCP messages of revision 2026-07-28 that the tests, the harness, the benchmarks and
the release tools send: one home for the envelope and its `_meta`."""

from __future__ import annotations

from typing import Any

__all__ = ["MODERN_META", "REVISION", "discover", "modern"]

REVISION = "2026-07-28"

MODERN_META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": REVISION,
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def modern(method: str, request_id: int | str = 1, **params: Any) -> dict[str, Any]:
    """A request of the stateless revision: `params` with the revision's `_meta`."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": dict(MODERN_META)},
    }


def discover(request_id: int | str = 1) -> dict[str, Any]:
    """`server/discover`, the first message of the stateless revision."""
    return modern("server/discover", request_id)
