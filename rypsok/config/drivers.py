"""What the configuration must know of each driver type, before any driver is built.

The admission records (book, chapter 19) hold the full obligations; the configuration only
needs to know which types exist, which read a credential, which scrape a human-facing page
(REQ-ENG-013) and whose answers may be stored (for the cache warning).
"""

from __future__ import annotations

from typing import Final

import attrs

__all__ = ["DRIVER_TYPES", "DriverTraits"]


@attrs.frozen(kw_only=True)
class DriverTraits:
    keyed: bool
    scrapes: bool
    cacheable: bool
    has_endpoint: bool = False  # brave: web or news
    has_base_url: bool = False  # wikipedia: a private MediaWiki


DRIVER_TYPES: Final[dict[str, DriverTraits]] = {
    "wikipedia": DriverTraits(keyed=False, scrapes=False, cacheable=True, has_base_url=True),
    "brave": DriverTraits(keyed=True, scrapes=False, cacheable=False, has_endpoint=True),
    "duckduckgo": DriverTraits(keyed=False, scrapes=True, cacheable=False),
}
