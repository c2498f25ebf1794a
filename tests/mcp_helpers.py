"""Shared pieces of the MCP tests: the modern envelope and a dispatcher for a configuration."""

from __future__ import annotations

from typing import Any

from rypsok import __version__
from rypsok.mcp.protocol import Dispatcher, build_toolset
from rypsok.shared.tooldefs import ToolSettings

MODERN_META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def modern(method: str, request_id: int | str = 1, **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": dict(MODERN_META)},
    }


def tutorial_toolset(
    *,
    categories: tuple[str, ...] = ("general", "science"),
    languages: tuple[str, ...] = ("en",),
    status_enabled: bool = True,
) -> Any:
    return build_toolset(
        ToolSettings(
            served_categories=categories,
            languages=languages,
            status_enabled=status_enabled,
            max_results_default=5,
            max_results_ceiling=20,
            query_max_chars=400,
        )
    )


def dispatcher(
    *, legacy_enabled: bool = True, structured_content: bool = True, **toolset: Any
) -> Dispatcher:
    return Dispatcher(
        tutorial_toolset(**toolset),
        legacy_enabled=legacy_enabled,
        structured_content=structured_content,
        server_version=__version__,
    )
