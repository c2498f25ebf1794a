"""The search pipeline: URLs and keys (`urls`), fusion and order (`rank`), the fan-out under
the deadline (`aggregate`), validation and selection (`select`), and the whole call
(`pipeline`)."""

from rypsok.core.search.pipeline import SearchRun, run_search

__all__ = ["SearchRun", "run_search"]
