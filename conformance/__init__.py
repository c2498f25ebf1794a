"""The conformance harness: replays the book's example calls against rypsok over stdio.

`python -m conformance` from the repository root; see `conformance/__main__.py`.
"""
