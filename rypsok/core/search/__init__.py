"""The search pipeline: URLs and keys (`urls`), fusion and order (`rank`), the fan-out under
the deadline (`aggregate`), validation and selection (`select`), and the whole call
(`pipeline`)."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rypsok.core.search.pipeline import SearchRun, run_search

__all__ = ["SearchRun", "run_search"]


def __getattr__(name: str) -> Any:
    # Lazy, so that importing a light submodule (`ports`) at start-up does not import the
    # whole pipeline with it (decisions/process-startup).
    if name in __all__:
        from rypsok.core.search import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'rypsok.core.search' has no attribute {name!r}")
