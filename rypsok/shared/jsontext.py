"""The one text rendering of JSON: sorted keys, compact separators, UTF-8 kept.

Implements REQ-SEC-002 and REQ-CTX-003.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["canonical_json"]

# One encoder for every response: `json.dumps` with options builds a new one per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(payload: Any) -> str:
    """The one text rendering of a response: sorted keys, compact separators, UTF-8 kept."""
    return _CANONICAL.encode(payload)
