"""An engine's query limits (REQ-ENG-010): the characters and words a provider accepts.

The pace limiter (rate, burst, concurrency) is `rypsok.core.pacing.EngineLimiter`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rypsok.core.engines.base import AdmissionRecord

__all__ = ["query_within_limits"]


def query_within_limits(record: AdmissionRecord, query: str) -> bool:
    """The record's query length (characters, and words where it has a word limit).

    Characters are code points; words are runs of non-whitespace. The pipeline skips an
    engine with query_too_long when this is False (REQ-ENG-010).
    """
    if len(query) > record.max_query_chars:
        return False
    return record.max_query_words is None or len(query.split()) <= record.max_query_words
