"""Shared pieces of the MCP tests: the modern envelope and a dispatcher for a configuration."""

from __future__ import annotations

from typing import Any

from rypsok import __version__
from rypsok.mcp.protocol import Dispatcher, build_toolset
from rypsok.shared.tooldefs import ToolSettings
from testkit.messages import MODERN_META, modern

__all__ = ["MODERN_META", "dispatcher", "modern", "tutorial_toolset"]


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
