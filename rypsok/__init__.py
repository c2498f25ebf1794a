"""rypsok: a headless meta-search service for AI agents."""

__version__ = "0.10.0"

__all__ = ["__version__"]
