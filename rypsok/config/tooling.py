"""The settings of the served tool definitions that a configuration gives.

One mapping from a configuration to `ToolSettings`, used where the definitions are counted
(the check of LIM-I1) and where they are built (the protocol layer), so that the two can
never read different keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rypsok.shared.tooldefs import ToolSettings

if TYPE_CHECKING:
    from collections.abc import Iterable

    from rypsok.config.schema import Config

__all__ = ["tool_settings"]


def tool_settings(
    config: Config, served_categories: Iterable[str], languages: Iterable[str] | None = None
) -> ToolSettings:
    """The definitions' settings of `config`, for the categories served (and the languages
    offered: the configuration's own unless given)."""
    return ToolSettings(
        served_categories=tuple(served_categories),
        languages=tuple(config.search.languages if languages is None else languages),
        status_enabled=config.status.enabled,
        max_results_default=config.search.max_results,
        max_results_ceiling=config.search.max_results_ceiling,
        query_max_chars=config.search.query_max_chars,
        max_chars_default=config.fetch.max_chars,
        max_chars_ceiling=config.fetch.max_chars_ceiling,
    )
