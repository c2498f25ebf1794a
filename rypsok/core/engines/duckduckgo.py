"""The DuckDuckGo HTML driver: a scraping driver (book, chapter 19, "DuckDuckGo (HTML)").

It reads the page a person would see, so it is held to more than the API drivers
(REQ-ENG-013..015): it runs only behind `[scraping] enabled = true`; it sends rypsok's own
User-Agent and `Accept: text/html` and nothing else that a browser would send; it follows no
redirect; it reads at most 256 KiB and parses off the event loop, on the process's parsing
permits (LIM-C5), under the node and depth bounds of the fetch pipeline (LIM-F10, LIM-F11).
A challenge is reported as `blocked`, never worked around.

The page is read by a streaming lxml target rather than a tree: the driver needs four
classes and one form, so nothing is kept but the results, and a page nested a million deep
costs no more than one at the bound.

REQ-ARCH-002, REQ-ENG-005 and REQ-MAIN-001: everything of this provider lives in this
module; REQ-ENG-009: a challenge is `blocked`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qs, urlsplit

import trio

from rypsok.core.engines.answers import raise_for_status, require_within_limits
from rypsok.core.engines.base import (
    AdmissionRecord,
    EngineAnswer,
    EngineFailure,
    EngineQuery,
    RawResult,
)
from rypsok.core.engines.client import EngineClient, EngineOrigin, parse_retry_after
from rypsok.core.model import Reason, SafeSearch, TimeRange
from rypsok.core.parsing import MAX_DEPTH, MAX_NODES
from rypsok.shared.drivers import DRIVER_TYPES

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "DUCKDUCKGO_ORIGIN",
    "DUCKDUCKGO_RECORD",
    "DuckDuckGoEngine",
    "PageVerdict",
    "parse_results_page",
]

DUCKDUCKGO_ORIGIN: Final = EngineOrigin(scheme="https", host="html.duckduckgo.com")
_PATH: Final = "/html/"

# The traits the configuration reads too are defined once, with the driver types.
_TRAITS: Final = DRIVER_TYPES["duckduckgo"]

DUCKDUCKGO_RECORD: Final = AdmissionRecord(
    rate_per_minute=10,
    burst=1,  # the record's rate is unknown: ten a minute, never a burst on top of it
    concurrency=1,
    max_query_chars=500,
    max_query_words=None,
    languages_all=True,
    time_ranges=frozenset(TimeRange),
    cacheable=_TRAITS.cacheable,  # storage terms unknown: never stored (REQ-CMP-007)
    attribution_required=False,
    response_max_bytes=256 * 1024,
    needs_credential=_TRAITS.keyed,
    scrapes=_TRAITS.scrapes,
)


_KP: Final = {SafeSearch.STRICT: "1", SafeSearch.MODERATE: "-1", SafeSearch.OFF: "-2"}
_DF: Final = {TimeRange.DAY: "d", TimeRange.WEEK: "w", TimeRange.MONTH: "m", TimeRange.YEAR: "y"}
# 403 is the provider refusing rypsok; 429 (read by raise_for_status) and 503 are its rate.
_REFUSALS: Final = {403: Reason.BLOCKED}
# The challenge sentence, matched on the page's text with white space folded.
_CHALLENGE: Final = re.compile(r"bots\s+use\s+duckduckgo\s+too", re.IGNORECASE)
_CHALLENGE_TAIL: Final = 64  # characters kept between text chunks to find a split sentence
_ANOMALY_PATHS: Final = ("/html/anomaly", "/anomaly")
_PROVIDER_HOSTS: Final = frozenset({"duckduckgo.com", "html.duckduckgo.com"})


class PageVerdict:
    """What one results page says: results, a no-results marker, a challenge, or none."""

    __slots__ = ("challenge", "no_results", "results")

    def __init__(self) -> None:
        self.results: list[RawResult] = []
        self.no_results = False
        self.challenge = False


class _BoundExceeded(Exception):
    """Raised from the parser target: stops libxml2 at once (LIM-F10, LIM-F11)."""


def result_target(href: str) -> str | None:
    """The absolute http(s) target of a result link, or None to drop the result.

    The provider wraps targets as //duckduckgo.com/l/?uddg=<target>&rut=…; a direct
    http(s) link is taken as it is, unless it points back at the provider (an ad or an
    internal page is never a result).
    """
    candidate = href.strip()
    if candidate.startswith("//"):
        candidate = "https:" + candidate
    try:
        parts = urlsplit(candidate)
        host = (parts.hostname or "").lower()
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not host:
        return None
    if host in _PROVIDER_HOSTS:
        if parts.path != "/l/":
            return None
        wrapped = parse_qs(parts.query).get("uddg")
        if not wrapped:
            return None
        return _absolute_http(wrapped[0])
    return candidate


def _absolute_http(url: str) -> str | None:
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not host:
        return None
    return url.strip()


class _PageTarget:
    """An lxml parser target that reads the results page as it is parsed."""

    def __init__(self, max_nodes: int, max_depth: int) -> None:
        self._max_nodes = max_nodes
        self._max_depth = max_depth
        self._nodes = 0
        self._depth = 0
        self.verdict = PageVerdict()
        self._result_depth: int | None = None  # depth of the open div.result
        self._href: str | None = None
        self._title: list[str] | None = None
        self._title_depth: int | None = None
        self._snippet: list[str] | None = None
        self._snippet_depth: int | None = None
        self._tail = ""

    def start(self, tag: str, attrib: Mapping[str, str]) -> None:
        self._nodes += 1
        self._depth += 1
        if self._nodes > self._max_nodes or self._depth > self._max_depth:
            raise _BoundExceeded
        classes = attrib.get("class", "").split()
        if "no-results" in classes:
            self.verdict.no_results = True
        if "anomaly-modal__title" in classes:
            self.verdict.challenge = True
        if tag == "form" and _is_anomaly_action(attrib.get("action", "")):
            self.verdict.challenge = True
        if self._result_depth is None:
            if tag == "div" and "result" in classes:
                self._open_result()
            return
        if tag == "a" and "result__a" in classes and self._title is None:
            self._href = attrib.get("href", "")
            self._title = []
            self._title_depth = self._depth
        elif "result__snippet" in classes and self._snippet is None:
            self._snippet = []
            self._snippet_depth = self._depth

    def end(self, tag: str) -> None:
        if self._title_depth == self._depth:
            self._title_depth = None
        if self._snippet_depth == self._depth:
            self._snippet_depth = None
        if self._result_depth == self._depth:
            self._close_result()
        self._depth -= 1

    def data(self, text: str) -> None:
        window = self._tail + text
        if _CHALLENGE.search(window):
            self.verdict.challenge = True
        self._tail = window[-_CHALLENGE_TAIL:]
        if self._title is not None and self._title_depth is not None:
            self._title.append(text)
        if self._snippet is not None and self._snippet_depth is not None:
            self._snippet.append(text)

    def comment(self, text: str) -> None:
        """Comments are not text: ignored."""

    def close(self) -> PageVerdict:
        if self._result_depth is not None:
            self._close_result()
        return self.verdict

    def _open_result(self) -> None:
        self._result_depth = self._depth
        self._href = None
        self._title = self._snippet = None
        self._title_depth = self._snippet_depth = None

    def _close_result(self) -> None:
        self._result_depth = None
        if self._href is None or self._title is None:
            return
        target = result_target(self._href)
        if target is None:
            return
        self.verdict.results.append(
            RawResult(
                title="".join(self._title),
                url=target,
                snippet="".join(self._snippet or ()),
                decoded=True,  # the parser decoded entities and dropped the markup
            )
        )


def _is_anomaly_action(action: str) -> bool:
    try:
        path = urlsplit(action.strip()).path.rstrip("/")
    except ValueError:
        return False
    return any(path == p or path.startswith(p + "/") for p in _ANOMALY_PATHS)


def parse_results_page(
    body: bytes, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH
) -> PageVerdict:
    """Read a results page; raises EngineFailure(parse_failure) beyond the bounds.

    Synchronous and thread-safe (one parser per call): the driver runs it in a worker
    thread under the parsing permits.
    """
    from lxml import etree  # heavy: imported where a page is parsed, not at start-up

    target = _PageTarget(max_nodes, max_depth)
    parser = etree.HTMLParser(target=target, no_network=True, recover=True)
    text = body.decode("utf-8", errors="replace")
    try:
        parser.feed(text)
        verdict: PageVerdict = parser.close()
    except _BoundExceeded:
        raise EngineFailure(failure_class=Reason.PARSE_FAILURE) from None
    except (etree.LxmlError, ValueError, UnicodeError):
        raise EngineFailure(failure_class=Reason.PARSE_FAILURE) from None
    return verdict


def classify_page(verdict: PageVerdict, count: int) -> EngineAnswer:
    """The answer a parsed page means (chapter 19's table), or the failure it is."""
    if verdict.challenge:
        raise EngineFailure(failure_class=Reason.BLOCKED)
    if verdict.results:
        return EngineAnswer(results=tuple(verdict.results[:count]))
    if verdict.no_results:
        return EngineAnswer(results=())
    # Neither results nor the marker: the page changed shape (REQ-ENG-015).
    raise EngineFailure(failure_class=Reason.PARSE_FAILURE)


class DuckDuckGoEngine:
    """DuckDuckGo's HTML endpoint; keyless, and only ever asked by an operator's switch."""

    def __init__(
        self, engine_id: str, http: EngineClient, parse_permits: trio.CapacityLimiter
    ) -> None:
        self._id = engine_id
        self._http = http
        self._permits = parse_permits

    @property
    def id(self) -> str:
        return self._id

    @property
    def record(self) -> AdmissionRecord:
        return DUCKDUCKGO_RECORD

    def __repr__(self) -> str:
        return f"DuckDuckGoEngine(id={self._id!r})"

    async def search(self, query: EngineQuery) -> EngineAnswer:
        require_within_limits(DUCKDUCKGO_RECORD, query.query)
        language = query.language.split("-", 1)[0].lower()
        params = [
            ("q", query.query),
            ("kl", f"{query.region.lower()}-{language}"),
            ("kp", _KP[query.safe_search]),
        ]
        if query.time_range is not None:
            params.append(("df", _DF[query.time_range]))
        response = await self._http.get(
            DUCKDUCKGO_ORIGIN,
            _PATH,
            params=params,
            # Only what the driver needs to say: no cookie, no Accept-Language, no
            # Sec-Fetch-*; the User-Agent is the client's own (REQ-ENG-014).
            headers={"Accept": "text/html"},
            max_bytes=DUCKDUCKGO_RECORD.response_max_bytes,
        )
        if response.status == 503:
            raise EngineFailure(
                failure_class=Reason.RATE_LIMITED,
                retry_after_s=parse_retry_after(response.headers),
            )
        # 3xx is never followed: like any other unexpected status, a request failure.
        raise_for_status(response, _REFUSALS)
        verdict = await trio.to_thread.run_sync(
            parse_results_page, response.body, limiter=self._permits, abandon_on_cancel=True
        )
        return classify_page(verdict, query.count)
