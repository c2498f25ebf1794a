"""The driver types and the traits of each, the one place both layers read them.

The configuration needs them before any driver is built (which types exist, which read a
credential, which scrape a human-facing page, REQ-ENG-013, whose answers may be stored);
the core's admission records (book, chapter 19) take these three traits from here and the
registry builds only the types shipped in this release.

Implements REQ-ENG-008.
"""

from __future__ import annotations

from typing import Final

import attrs

__all__ = ["DRIVER_TYPES", "SHIPPED_TYPES", "DriverTraits"]


@attrs.frozen(kw_only=True)
class DriverTraits:
    keyed: bool  # reads a credential (the record's needs_credential)
    scrapes: bool
    cacheable: bool
    shipped: bool  # this release has its driver; a known type without one stays inactive
    has_endpoint: bool = False  # brave: web or news
    has_base_url: bool = False  # wikipedia: a private MediaWiki; the API drivers: their root
    base_url_required: bool = False  # searxng: the operator's own instance has no default
    credential_optional: bool = False  # searxng, stackexchange: a key is read only if named
    has_site: bool = False  # stackexchange: which Stack Exchange site is searched


DRIVER_TYPES: Final[dict[str, DriverTraits]] = {
    "wikipedia": DriverTraits(
        keyed=False, scrapes=False, cacheable=True, shipped=True, has_base_url=True
    ),
    "brave": DriverTraits(
        keyed=True, scrapes=False, cacheable=False, shipped=True, has_endpoint=True
    ),
    "duckduckgo": DriverTraits(keyed=False, scrapes=True, cacheable=False, shipped=True),
    # The keyless API drivers. Their admission records are in book/engines.md;
    # `cacheable` is the record's storage row.
    "searxng": DriverTraits(
        keyed=True,
        credential_optional=True,
        scrapes=False,
        cacheable=False,  # the instance's answers come from engines whose terms vary
        shipped=True,
        has_base_url=True,
        base_url_required=True,
    ),
    "stackexchange": DriverTraits(
        keyed=True,
        credential_optional=True,
        scrapes=False,
        cacheable=False,  # storage terms not found: never stored (REQ-CMP-007)
        shipped=True,
        has_base_url=True,
        has_site=True,
    ),
    "arxiv": DriverTraits(
        keyed=False, scrapes=False, cacheable=True, shipped=True, has_base_url=True
    ),
    "hackernews": DriverTraits(
        # Storage terms not found: never stored (REQ-CMP-007).
        keyed=False,
        scrapes=False,
        cacheable=False,
        shipped=True,
        has_base_url=True,
    ),
    "crossref": DriverTraits(
        keyed=False, scrapes=False, cacheable=True, shipped=True, has_base_url=True
    ),
}

SHIPPED_TYPES: Final = tuple(kind for kind, traits in DRIVER_TYPES.items() if traits.shipped)
