"""The arXiv driver: the legacy API's Atom feed, `GET https://export.arxiv.org/api/query`.

arXiv's terms of use ask for no more than one request every three seconds, on a single
connection. The admission record says exactly that (20 a minute, burst 1, one request in
flight), the limiter spaces the starts of two requests by at least three seconds, and the
configuration admits one enabled arxiv engine only, so that no setting can exceed it.

The feed is read by a streaming lxml target under the same bounds as any provider body (the
record's byte bound, then the fetch pipeline's node and depth bounds), with no DTD loaded,
no entity resolved and no network access, and `huge_tree` off. An error is a feed whose one
entry has an id under `/api/errors` (the API answers 200 with it); the throttle answers
with a status (429, 503), read as rate_limited.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from rypsok.core.engines.answers import (
    ApiEngine,
    api_root,
    ask_provider,
    calendar_date,
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
from rypsok.core.parsing import MAX_DEPTH, MAX_NODES
from rypsok.shared.drivers import DRIVER_TYPES

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ARXIV_ORIGIN", "ARXIV_RECORD", "ArxivEngine", "parse_feed"]

ARXIV_ORIGIN: Final = EngineOrigin(scheme="https", host="export.arxiv.org")
_ROOT: Final = "/api"
MAX_RESULTS: Final = 50

_TRAITS: Final = DRIVER_TYPES["arxiv"]

ARXIV_RECORD: Final = AdmissionRecord(
    rate_per_minute=20,  # one request every three seconds (the terms of use)
    burst=1,  # never two at once after a pause: the three seconds hold from the first call
    concurrency=1,  # a single connection
    max_query_chars=300,
    max_query_words=None,
    languages_all=False,  # metadata in English; no language parameter
    time_ranges=frozenset(),
    cacheable=_TRAITS.cacheable,
    attribution_required=False,
    response_max_bytes=1024 * 1024,
    needs_credential=_TRAITS.keyed,
    scrapes=_TRAITS.scrapes,
)

_ATOM: Final = "{http://www.w3.org/2005/Atom}"
_FEED: Final = _ATOM + "feed"
_ENTRY: Final = _ATOM + "entry"
_FIELDS: Final = {_ATOM + "id", _ATOM + "title", _ATOM + "summary", _ATOM + "published"}
_LINK: Final = _ATOM + "link"
_DATE: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})T")
_REFUSALS: Final = {403: Reason.BLOCKED}


class _BoundExceeded(Exception):
    """Raised from the parser target: stops libxml2 at once."""


class _FeedTarget:
    """An lxml parser target keeping only what a result needs of each entry."""

    def __init__(self, max_nodes: int, max_depth: int) -> None:
        self._max_nodes = max_nodes
        self._max_depth = max_depth
        self._nodes = 0
        self._depth = 0
        self.root: str | None = None
        self.entries: list[dict[str, str]] = []
        self._entry: dict[str, str] | None = None
        self._field: str | None = None
        self._text: list[str] = []

    def start(self, tag: str, attrib: Mapping[str, str]) -> None:
        self._nodes += 1
        self._depth += 1
        if self._nodes > self._max_nodes or self._depth > self._max_depth:
            raise _BoundExceeded
        if self.root is None:
            self.root = tag
        if tag == _ENTRY and self._depth == 2:
            self._entry = {}
        elif self._entry is not None and self._depth == 3:
            if tag in _FIELDS:
                self._field = tag
                self._text = []
            elif tag == _LINK and attrib.get("rel") == "alternate" and "href" in attrib:
                self._entry.setdefault("alternate", attrib["href"])

    def end(self, tag: str) -> None:
        if self._field is not None and tag == self._field and self._depth == 3:
            assert self._entry is not None
            self._entry[tag[len(_ATOM) :]] = "".join(self._text)
            self._field = None
        elif tag == _ENTRY and self._depth == 2 and self._entry is not None:
            self.entries.append(self._entry)
            self._entry = None
        self._depth -= 1

    def data(self, text: str) -> None:
        if self._field is not None:
            self._text.append(text)

    def comment(self, text: str) -> None:
        """Comments are not text: ignored."""

    def doctype(self, name: str, pubid: str | None, system: str | None) -> None:
        # An Atom feed has no DTD. lxml's target interface expands internal entities even
        # with resolve_entities off, so a document declaring any is refused outright.
        raise _BoundExceeded

    def close(self) -> _FeedTarget:
        return self


def _folded(text: str) -> str:
    # The API wraps titles and abstracts at a fixed width: the line breaks are not the text's.
    return " ".join(text.split())


def parse_feed(
    body: bytes, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH
) -> tuple[RawResult, ...]:
    """The results of an arXiv Atom feed; EngineFailure for an error feed or another shape.

    Synchronous and thread-safe (one parser per call).
    """
    from lxml import etree  # heavy: imported where a feed is parsed, not at start-up

    target = _FeedTarget(max_nodes, max_depth)
    parser = etree.XMLParser(
        target=target,
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
        recover=False,
    )
    try:
        parser.feed(body)
        parser.close()
    except _BoundExceeded:
        raise EngineFailure(failure_class=Reason.PARSE_FAILURE) from None
    except (etree.LxmlError, ValueError, UnicodeError):
        raise EngineFailure(failure_class=Reason.PARSE_FAILURE) from None
    if target.root != _FEED:
        raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
    results = []
    for entry in target.entries:
        identifier = entry.get("id", "").strip()
        if "/api/errors" in identifier:
            # The API's refusal of the request (a malformed query): no provider text leaves.
            raise EngineFailure(failure_class=Reason.REQUEST_FAILURE)
        url = entry.get("alternate", identifier).strip()
        title = _folded(entry.get("title", ""))
        if not url or not title:
            raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
        results.append(
            RawResult(
                title=title,
                url=url,
                snippet=_folded(entry.get("summary", "")),
                date=calendar_date(entry.get("published"), _DATE),
                decoded=True,  # the XML parser decoded the entities; Atom text is plain
            )
        )
    return tuple(results)


class ArxivEngine(ApiEngine):
    """arXiv's e-prints, searched in every field."""

    RECORD = ARXIV_RECORD

    def __init__(self, engine_id: str, http: EngineClient, *, base_url: str | None = None) -> None:
        super().__init__(engine_id, http, api_root(base_url, ARXIV_ORIGIN, _ROOT))

    async def search(self, query: EngineQuery) -> EngineAnswer:
        require_within_limits(ARXIV_RECORD, query.query)
        params = [
            ("search_query", f"all:{query.query}"),
            ("start", "0"),
            ("max_results", str(min(query.count, MAX_RESULTS))),
            ("sortBy", "relevance"),
        ]
        results = await ask_provider(
            self._http,
            self._origin,
            f"{self._root}/query",
            params=params,
            record=ARXIV_RECORD,
            parse=parse_feed,
            refusals=_REFUSALS,
            headers={"Accept": "application/atom+xml"},
            rate_statuses=(429, 503),  # the throttle's "Rate exceeded." comes with a 503
        )
        return EngineAnswer(results=results[: query.count])
