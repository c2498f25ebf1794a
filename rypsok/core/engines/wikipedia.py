"""The Wikipedia driver: MediaWiki's Action API, list=search (book, chapter 19, "Wikipedia").

Without `base_url` the engine asks `https://<lang>.wikipedia.org/w/api.php`, the language
edition chosen by the primary subtag of the call's language, and returns article URLs of the
form `https://<lang>.wikipedia.org/wiki/<Title_with_underscores>`.

With `base_url` the engine asks one private MediaWiki. `base_url` is the wiki's script path
(`$wgScriptPath`, where api.php and index.php live: `https://wiki.example.org/w`), or the
api.php URL itself (`https://wiki.example.org/w/api.php`), the two forms Special:Version
shows. Result URLs are `<script path>/index.php?title=<Title>`, which every MediaWiki
answers whatever its article path; a mirror has one language, so the call's language does
not change the host.

REQ-ARCH-002, REQ-ENG-005 and REQ-MAIN-001: everything of this provider lives in this
module.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import quote

import attrs

from rypsok.core.engines.answers import (
    calendar_date,
    json_object,
    object_items,
    raise_for_status,
    require_within_limits,
)
from rypsok.core.engines.base import (
    AdmissionRecord,
    EngineAnswer,
    EngineFailure,
    EngineQuery,
    RawResult,
)
from rypsok.core.engines.client import (
    EngineClient,
    EngineOrigin,
    origin_text,
    parse_base_url,
    url_text,
)
from rypsok.core.model import Reason
from rypsok.core.untrusted_text import without_surrogates
from rypsok.shared.drivers import DRIVER_TYPES

__all__ = ["MIRROR_RECORD", "WIKIPEDIA_RECORD", "WikipediaEngine", "article_path"]

# The traits the configuration reads too are defined once, with the driver types.
_TRAITS: Final = DRIVER_TYPES["wikipedia"]

WIKIPEDIA_RECORD: Final = AdmissionRecord(
    rate_per_minute=100,
    burst=10,
    concurrency=1,
    max_query_chars=250,
    max_query_words=None,
    languages_all=True,
    time_ranges=frozenset(),
    cacheable=_TRAITS.cacheable,
    attribution_required=False,
    response_max_bytes=1024 * 1024,
    needs_credential=_TRAITS.keyed,
    scrapes=_TRAITS.scrapes,
)

# RFC 3986 lets a path segment hold unreserved characters, the sub-delimiters, ":" and "@"
# as they are; "/" stays too, as in MediaWiki's own links to subpages. Everything else
# (space is already "_") is percent-encoded from UTF-8: "%", "?", "#", quotes, brackets,
# controls and every non-ASCII character.
_PATH_SAFE: Final = "-._~!$&'()*+,;=:@/"
# In a query value "&", "=", "+" and "#" would change its meaning: they are encoded too.
_QUERY_SAFE: Final = "-._~!$'()*,;:@/"

_LANGUAGE: Final = re.compile(r"[a-z]{2,8}\Z")
_TIMESTAMP: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})T")
# Chapter 19's error table: a 403 is Wikimedia turning the User-Agent away.
_REFUSALS: Final = {403: Reason.BLOCKED}


# A private MediaWiki is one wiki in one language: it cannot honor a language the caller
# chooses, so such a call skips it with engine_skipped language.
MIRROR_RECORD: Final = attrs.evolve(WIKIPEDIA_RECORD, languages_all=False)


def article_path(title: str) -> str:
    """`/wiki/<Title_with_underscores>`, percent-encoded (see _PATH_SAFE)."""
    return "/wiki/" + quote(title.replace(" ", "_"), safe=_PATH_SAFE)


def _language_host(language: str) -> str | None:
    primary = language.split("-", 1)[0].lower()
    if _LANGUAGE.match(primary) is None:
        return None
    return f"{primary}.wikipedia.org"


class WikipediaEngine:
    """A Wikipedia language edition chosen per call, or one MediaWiki at `base_url`."""

    def __init__(self, engine_id: str, http: EngineClient, base_url: str | None = None) -> None:
        self._id = engine_id
        self._http = http
        self._mirror: tuple[EngineOrigin, str] | None = None
        if base_url is not None:
            self._mirror = _mirror(base_url)

    @property
    def id(self) -> str:
        return self._id

    @property
    def record(self) -> AdmissionRecord:
        return WIKIPEDIA_RECORD if self._mirror is None else MIRROR_RECORD

    def __repr__(self) -> str:
        return f"WikipediaEngine(id={self._id!r})"

    async def search(self, query: EngineQuery) -> EngineAnswer:
        require_within_limits(WIKIPEDIA_RECORD, query.query)
        if self._mirror is not None:
            origin, script = self._mirror
            api = f"{script}/api.php"
        else:
            host = _language_host(query.language)
            if host is None:
                raise EngineFailure(failure_class=Reason.REQUEST_FAILURE)
            origin, script, api = EngineOrigin(scheme="https", host=host), "", "/w/api.php"
        params = [
            ("action", "query"),
            ("list", "search"),
            ("srsearch", query.query),
            ("srlimit", str(query.count)),
            ("srprop", "snippet|timestamp"),
            ("format", "json"),
            # Version 2 writes UTF-8 instead of \u escapes (up to three times smaller for
            # non-Latin scripts, under the same byte bound) with the same list=search shape.
            ("formatversion", "2"),
        ]
        response = await self._http.get(
            origin,
            api,
            params=params,
            headers={"Accept": "application/json"},
            max_bytes=WIKIPEDIA_RECORD.response_max_bytes,
        )
        raise_for_status(response, _REFUSALS)
        results = await self._http.off_loop(
            lambda body: self._parse(body, origin, script), response.body
        )
        return EngineAnswer(results=results)

    def _result_url(self, origin: EngineOrigin, script: str, title: str) -> str:
        # The title is cleaned later, its surrogates removed and counted; its URL must be
        # built without them now, or encoding it fails and the whole answer is lost.
        title = without_surrogates(title)
        if self._mirror is None:
            return origin_text(origin) + article_path(title)
        value = quote(title.replace(" ", "_"), safe=_QUERY_SAFE)
        return url_text(origin, f"{script}/index.php") + "?title=" + value

    def _parse(self, body: bytes, origin: EngineOrigin, script: str) -> tuple[RawResult, ...]:
        document = json_object(body)
        if "error" in document:
            # The API refused the request (too long a query, a bad parameter): no provider
            # text leaves the driver, only the class.
            raise EngineFailure(failure_class=Reason.REQUEST_FAILURE)
        listing = document.get("query")
        found = listing.get("search") if isinstance(listing, dict) else None
        results = []
        for item in object_items(found):
            title = item.get("title")
            snippet = item.get("snippet", "")
            if not isinstance(title, str) or not title or not isinstance(snippet, str):
                raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
            results.append(
                RawResult(
                    title=title,
                    url=self._result_url(origin, script, title),
                    snippet=snippet,
                    date=calendar_date(item.get("timestamp"), _TIMESTAMP),
                )
            )
        return tuple(results)


def _mirror(base_url: str) -> tuple[EngineOrigin, str]:
    origin, path = parse_base_url(base_url)
    if path.endswith("/api.php") or path == "api.php":
        path = path[: -len("api.php")].rstrip("/")
    return origin, path
