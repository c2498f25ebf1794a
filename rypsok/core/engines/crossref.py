"""The Crossref driver: the REST API's `/works?query=` (book, "Engines").

Crossref's "polite pool" serves callers who say how to reach them: when the operator set an
e-mail address as `[service] user_agent_contact`, it is sent as the `mailto` parameter (the
User-Agent carries it too). Without one the request goes to the public pool. Each work is
returned as its DOI link, `https://doi.org/<DOI>`, the persistent address of the work; a
value in the DOI field that is no DOI name (ISO 26324: `10.`, a registrant code, `/`, a
suffix) names no work, and its item is left out.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Final
from urllib.parse import quote

from rypsok.core.engines.answers import (
    ApiEngine,
    api_root,
    ask_provider,
    json_object,
    object_items,
    require_within_limits,
)
from rypsok.core.engines.base import (
    AdmissionRecord,
    EngineAnswer,
    EngineFailure,
    EngineQuery,
    RawResult,
)
from rypsok.core.engines.client import EngineClient, EngineOrigin
from rypsok.core.model import Reason
from rypsok.shared.drivers import DRIVER_TYPES

__all__ = ["CROSSREF_ORIGIN", "CROSSREF_RECORD", "DOI_URL", "CrossrefEngine", "doi_url", "mailto"]

CROSSREF_ORIGIN: Final = EngineOrigin(scheme="https", host="api.crossref.org")
DOI_URL: Final = "https://doi.org/"
MAX_ROWS: Final = 100

_TRAITS: Final = DRIVER_TYPES["crossref"]

CROSSREF_RECORD: Final = AdmissionRecord(
    rate_per_minute=60,
    burst=5,
    concurrency=2,
    max_query_chars=500,
    max_query_words=None,
    languages_all=False,  # metadata in the works' own languages; no language parameter
    time_ranges=frozenset(),  # publication dates are not "published within the last week"
    cacheable=_TRAITS.cacheable,
    attribution_required=False,
    response_max_bytes=2 * 1024 * 1024,  # works carry reference lists and abstracts
    needs_credential=_TRAITS.keyed,
    scrapes=_TRAITS.scrapes,
)

# RFC 3986 path characters a DOI may hold as they are; the rest ("#", "?", "%", spaces,
# "<", ">", non-ASCII) is percent-encoded, as doi.org's own links do.
_DOI_SAFE: Final = "-._~!$&'()*+,;=:@/"
# A DOI name: the directory indicator "10", a registrant code of dot-separated digits, then
# "/" and a suffix of any characters (ISO 26324, the DOI Handbook §2.2).
_DOI_NAME: Final = re.compile(r"10\.[0-9]+(?:\.[0-9]+)*/.+", re.DOTALL)
_ADDRESS: Final = re.compile(r"[^@\s<>(),;:\"]+@[^@\s<>(),;:\"]+\.[^@\s<>(),;:\"]+")
_REFUSALS: Final = {403: Reason.BLOCKED}


def mailto(contact: str) -> str | None:
    """The e-mail address in `[service] user_agent_contact`, or None when it holds none."""
    found = _ADDRESS.search(contact.removeprefix("mailto:"))
    return None if found is None else found.group(0)


def doi_url(doi: str) -> str | None:
    """The DOI link of a DOI name, the name percent-encoded into the path; None when the
    text is no DOI name (`javascript:alert(1)` never becomes a path on doi.org)."""
    name = doi.strip()
    if _DOI_NAME.fullmatch(name) is None:
        return None
    return DOI_URL + quote(name, safe=_DOI_SAFE)


def _issued(value: object) -> str | None:
    """YYYY-MM-DD from `issued.date-parts` when it names a whole day, else None."""
    if not isinstance(value, dict):
        return None
    parts = value.get("date-parts")
    if not (isinstance(parts, list) and parts and isinstance(parts[0], list)):
        return None
    first = parts[0]
    if len(first) < 3 or not all(isinstance(p, int) and not isinstance(p, bool) for p in first):
        return None
    try:
        return date(first[0], first[1], first[2]).isoformat()
    except ValueError:
        return None


def _first_text(value: object) -> str | None:
    if isinstance(value, list) and value and isinstance(value[0], str):
        return value[0]
    return None


class CrossrefEngine(ApiEngine):
    """Works registered with Crossref, found by bibliographic query."""

    RECORD = CROSSREF_RECORD

    def __init__(
        self, engine_id: str, http: EngineClient, *, contact: str = "", base_url: str | None = None
    ) -> None:
        super().__init__(engine_id, http, api_root(base_url, CROSSREF_ORIGIN, ""))
        self._mailto = mailto(contact)

    @property
    def polite(self) -> bool:
        """True when the operator's contact puts the requests in the polite pool."""
        return self._mailto is not None

    async def search(self, query: EngineQuery) -> EngineAnswer:
        require_within_limits(CROSSREF_RECORD, query.query)
        params = [("query", query.query), ("rows", str(min(query.count, MAX_ROWS)))]
        if self._mailto is not None:
            params.append(("mailto", self._mailto))
        results = await ask_provider(
            self._http,
            self._origin,
            f"{self._root}/works",
            params=params,
            record=CROSSREF_RECORD,
            parse=_parse,
            refusals=_REFUSALS,
        )
        return EngineAnswer(results=results[: query.count])


def _parse(body: bytes) -> tuple[RawResult, ...]:
    document = json_object(body)
    message = document.get("message")
    if document.get("message-type") != "work-list" or not isinstance(message, dict):
        raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
    results = []
    for item in object_items(message.get("items")):
        doi = item.get("DOI")
        title = _first_text(item.get("title"))
        url = doi_url(doi) if isinstance(doi, str) else None
        if url is None or title is None:
            # Crossref registers works without a title (components, some datasets): there
            # is nothing to show for them, which is not a change of format.
            continue
        abstract = item.get("abstract")
        snippet = (
            abstract if isinstance(abstract, str) else _first_text(item.get("container-title"))
        )
        results.append(
            RawResult(
                title=title,
                url=url,
                snippet=snippet or "",
                date=_issued(item.get("issued")),
            )
        )
    return tuple(results)
