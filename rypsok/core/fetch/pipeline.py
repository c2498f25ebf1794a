"""The web_fetch pipeline, in the order of REQ-PAGE-001.

parameter validation → privacy check of the URL → egress policy (and strict mode) →
robots.txt → request → byte limit while streaming → media type → charset → parsing under
bounds → extraction → cleaning → truncation → structured response.

Redirects are followed here, hop by hop, never by httpx: each hop is judged again by the
egress policy and by robots.txt (REQ-FETCH-006, REQ-CMP-005). The network part runs under
the fetch deadline (LIM-F4); parsing and extraction run in worker threads under the parse
limiter (LIM-C5, REQ-PAGE-008); the service holds the one scope that ends the call at LIM-F5.
"""

from __future__ import annotations

import math
import unicodedata
from typing import TYPE_CHECKING, Final, Protocol

import attrs
import httpx
import trio

from rypsok.core import errors, privacy, telemetry
from rypsok.core.boundary import clean_decoded_text, looks_like_instruction, remove_invisible
from rypsok.core.fetch import content as content_mod
from rypsok.core.fetch.body import ACCEPT_ENCODING, BodyTooLarge, UnreadableBody, read_bounded
from rypsok.core.fetch.robots import ROBOTS_MAX_BYTES, Robots, RobotsCache, origin_key
from rypsok.core.model import (
    DetailReason,
    FetchRequest,
    FetchResponse,
    Notice,
    NoticeCode,
    SecretKind,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from rypsok.config.schema import Config
    from rypsok.core.fetch.content import Kind
    from rypsok.core.fetch.slots import FetchSlots

__all__ = [
    "FETCH_CALL_MARGIN_S",
    "MAX_CHARS_MIN",
    "URL_MAX_CHARS",
    "Extracted",
    "Extractor",
    "FetchPipeline",
    "UrlJudge",
]

URL_MAX_CHARS: Final = 2048  # LIM-F9
MAX_CHARS_MIN: Final = 500  # the floor of max_chars (external design §3.2)
FETCH_CALL_MARGIN_S: Final = 1.0  # LIM-F5 = LIM-F4 + 1000 ms
TITLE_MAX_CHARS: Final = 150  # LIM-S10
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_ACCEPT: Final = "text/html, application/xhtml+xml, text/markdown, text/plain;q=0.9, */*;q=0.1"


@attrs.frozen(kw_only=True)
class Extracted:
    """What extraction made of a document: its title and main content as Markdown."""

    title: str
    markdown: str
    partial: bool


class Extractor(Protocol):
    """The extraction step: a decoded document of a kind, and its URL (for absolute links)
    → title and Markdown, or None when nothing can be extracted. Pure and synchronous: it
    runs in a worker thread under the parse limiter, parsing under LIM-F10 and LIM-F11."""

    def __call__(self, document: str, kind: Kind, base_url: str) -> Extracted | None: ...


class UrlJudge(Protocol):
    """The egress policy's judgment of a URL before any connection (the agent profile)."""

    def allowed(self, url: httpx.URL) -> bool: ...

    def allow_rule_matches(self, host: str) -> bool: ...


class _Progress:
    started = False


class _Hop:
    """The state of the walk from the caller's URL to the page read."""

    def __init__(self, url: httpx.URL, text: str, upgraded: bool, location: str = "") -> None:
        self.url = url
        self.text = text  # the URL as it will be reported (the caller's own spelling first)
        self.upgraded = upgraded
        self.location = location  # a redirect's absolute target as the site named it


@attrs.frozen(kw_only=True)
class _Page:
    url: str
    status: int
    content_type: str | None
    body: bytes


@attrs.frozen(kw_only=True)
class _Read:
    title: str
    content: str
    notices: tuple[Notice, ...]


def _host_of(url: httpx.URL) -> str:
    return url.host.lower().rstrip(".")


class FetchPipeline:
    """One process's web_fetch: its client, policy, robots cache, slots and parse limiter."""

    def __init__(
        self,
        config: Config,
        *,
        client: httpx.AsyncClient,
        judge: UrlJudge,
        extractor: Extractor,
        robots: RobotsCache,
        slots: FetchSlots,
        parse_limiter: trio.CapacityLimiter,
        was_returned: Callable[[str], bool],
        user_agent: str,
    ) -> None:
        self._config = config
        self._fetch = config.fetch
        self._client = client
        self._judge = judge
        self._extract = extractor
        self._robots = robots
        self._slots = slots
        self._parse_limiter = parse_limiter
        self._was_returned = was_returned
        self._user_agent = user_agent

    # -- parameters, privacy, policy (no network) -------------------------------------------

    def _validate(self, request: FetchRequest) -> tuple[int, int]:
        if len(request.url) > URL_MAX_CHARS:
            raise errors.url_too_long(URL_MAX_CHARS)
        ceiling = self._fetch.max_chars_ceiling
        max_chars = self._fetch.max_chars if request.max_chars is None else request.max_chars
        if not MAX_CHARS_MIN <= max_chars <= ceiling:
            raise errors.invalid_range("max_chars", MAX_CHARS_MIN, ceiling)
        start_char = 0 if request.start_char is None else request.start_char
        if start_char < 0:
            raise errors.start_char_negative()
        return max_chars, start_char

    def _privacy(self, url: str) -> tuple[str, tuple[Notice, ...]]:
        mode = self._config.privacy.secret_detection
        if mode == "off":
            return url, ()
        if mode == "mask":
            masked, count = privacy.mask_secrets(url)
            if count == 0:
                return url, ()
            return masked, (Notice(code=NoticeCode.CREDENTIAL_MASKED, count=count),)
        finding = privacy.find_secret(url)
        if finding is None:
            return url, ()
        if mode == "warn":
            telemetry.warn("secret_in_url", kind=str(finding.kind), position=finding.position)
            return url, ()
        raise errors.denied_secret(DetailReason.SECRET_IN_URL, finding.kind, finding.position)

    def _parse_url(self, text: str) -> httpx.URL:
        scheme = text.split(":", 1)[0].lower() if ":" in text else ""
        if scheme and scheme not in ("http", "https") and scheme.isascii() and scheme.isalpha():
            raise errors.denied_scheme()
        try:
            url = httpx.URL(text)
        except (httpx.InvalidURL, ValueError, TypeError):
            raise errors.url_invalid() from None
        if url.scheme not in ("http", "https") or not url.host:
            if url.scheme and url.scheme not in ("http", "https"):
                raise errors.denied_scheme()
            raise errors.url_invalid()
        if url.userinfo:
            if url.password:
                # The secret check names user:password@ in refuse mode; other modes still
                # never send it (REQ-FETCH-007).
                raise errors.denied_secret(
                    DetailReason.SECRET_IN_URL,
                    SecretKind.URL_PASSWORD,
                    text.find(":", text.find("//") + 2) + 1,
                )
            raise errors.denied_credential_in_url()
        return url

    def _first_hop(self, text: str) -> _Hop:
        url = self._parse_url(text)
        upgraded = False
        if url.scheme == "http" and not self._config.egress.allow_http:
            url = url.copy_with(scheme="https")
            upgraded = True
        if not self._judge.allowed(url):
            raise errors.denied_egress()
        if self._fetch.strict_mode and not (
            self._was_returned(text) or self._judge.allow_rule_matches(_host_of(url))
        ):
            raise errors.denied_strict_mode()
        return _Hop(url, str(url) if upgraded else text, upgraded)

    # -- the call ---------------------------------------------------------------------------

    async def run(self, request: FetchRequest, *, start: float) -> FetchResponse:
        """One web_fetch; raises ToolError. The caller holds the LIM-F5 scope."""
        max_chars, start_char = self._validate(request)
        url_text, notices = self._privacy(request.url)
        hop = self._first_hop(url_text)
        network_deadline = start + self._fetch.deadline_ms / 1000
        progress = _Progress()
        with trio.move_on_at(network_deadline) as scope:
            page = await self._retrieve(hop, progress)
        if scope.cancelled_caught:
            # Still waiting for a slot at the deadline: the limit, not the site, was the cause.
            raise errors.deadline_fetch() if progress.started else errors.fetch_busy()
        essence = content_mod.media_type_of(page.content_type)
        kind = content_mod.classify(essence, page.body[:4096])
        if kind is None:
            raise errors.unsupported_media_type(
                content_mod.bounded_media_type(essence or "application/octet-stream")
            )
        read = await trio.to_thread.run_sync(
            self._read_page,
            page,
            kind,
            limiter=self._parse_limiter,
            abandon_on_cancel=True,
        )
        piece = content_mod.cut(read.content, start_char, max_chars)
        if isinstance(piece, int):
            raise errors.start_char_beyond(piece)
        return FetchResponse(
            url=page.url,
            title=read.title,
            content=piece.text,
            truncated=piece.truncated,
            next_start_char=piece.next_start_char,
            notices=notices + read.notices,
        )

    # -- network ------------------------------------------------------------------------------

    async def _retrieve(self, hop: _Hop, progress: _Progress) -> _Page:
        redirects = 0
        while True:
            async with self._slots.host(_host_of(hop.url)):
                progress.started = True
                outcome = await self._walk_host(hop, redirects)
            if isinstance(outcome, _Page):
                return outcome
            # A cross-host hop the operator lets the pipeline follow: a new host slot.
            hop, redirects = outcome

    async def _walk_host(self, hop: _Hop, redirects: int) -> _Page | tuple[_Hop, int]:
        host = _host_of(hop.url)
        telemetry.info("fetch", host=host)
        while True:
            await self._check_robots(hop)
            response = await self._send(hop)
            try:
                status = response.status_code
                if status in _REDIRECTS and "location" in response.headers:
                    target = self._redirect_target(hop, response.headers["location"])
                    redirects += 1
                    if redirects > self._fetch.max_redirects:
                        raise errors.too_many_redirects(self._fetch.max_redirects)
                    if _host_of(target.url) != host:
                        if not self._fetch.follow_cross_host_redirects:
                            raise errors.redirected(target.location)
                        return target, redirects
                    hop = target
                    continue
                if 400 <= status <= 599:
                    raise errors.http_status(status, _retry_after_ms(response.headers))
                if not 200 <= status <= 299:
                    raise errors.network()
                body = await self._read_body(response)
                return _Page(
                    url=hop.text,
                    status=status,
                    content_type=response.headers.get("content-type"),
                    body=body,
                )
            finally:
                await response.aclose()

    def _redirect_target(self, hop: _Hop, location: str) -> _Hop:
        """The next hop, judged by the egress policy; a refused target is never disclosed."""
        if len(location) > URL_MAX_CHARS:
            raise errors.denied_egress()
        try:
            url = hop.url.join(location.strip())
        except (httpx.InvalidURL, ValueError, TypeError):
            raise errors.network() from None
        if url.scheme not in ("http", "https") or not url.host or url.userinfo:
            raise errors.denied_egress()
        location = str(url)
        upgraded = False
        if url.scheme == "http" and not self._config.egress.allow_http:
            url = url.copy_with(scheme="https")
            upgraded = True
        if not self._judge.allowed(url):
            raise errors.denied_egress()
        text = str(url)
        if len(text) > URL_MAX_CHARS:
            raise errors.denied_egress()
        return _Hop(url, text, upgraded or hop.upgraded, location)

    def _timeout(self) -> httpx.Timeout:
        left = trio.current_effective_deadline() - trio.current_time()
        if math.isinf(left):
            left = self._fetch.deadline_ms / 1000
        left = max(left, 0.001)
        connect = min(self._fetch.connect_timeout_ms / 1000, left)
        return httpx.Timeout(connect=connect, read=left, write=left, pool=left)

    def _request(self, url: httpx.URL, accept: str) -> httpx.Request:
        # Built here, not by the client: no cookie, no authorization, only rypsok's headers
        # (REQ-FETCH-007).
        request = httpx.Request(
            "GET",
            url,
            headers={
                "User-Agent": self._user_agent,
                "Accept": accept,
                "Accept-Encoding": ACCEPT_ENCODING,
            },
        )
        timeout = self._timeout()
        request.extensions["timeout"] = timeout.as_dict()
        return request

    async def _send(self, hop: _Hop) -> httpx.Response:
        try:
            return await self._client.send(
                self._request(hop.url, _ACCEPT), stream=True, follow_redirects=False
            )
        except httpx.HTTPError:
            if hop.upgraded:
                raise errors.denied_scheme_upgrade() from None
            raise errors.network() from None

    async def _read_body(self, response: httpx.Response) -> bytes:
        try:
            return await read_bounded(response, self._fetch.max_bytes)
        except BodyTooLarge:
            raise errors.too_large(self._fetch.max_bytes) from None
        except (UnreadableBody, httpx.HTTPError):
            raise errors.network() from None

    # -- robots.txt ---------------------------------------------------------------------------

    async def _check_robots(self, hop: _Hop) -> None:
        if not self._fetch.robots_txt:
            return
        url = hop.url
        origin = origin_key(url.scheme, _host_of(url), url.port)

        async def read() -> Robots:
            return await self._read_robots(url.copy_with(path="/robots.txt", query=None))

        robots = await self._robots.rules_for(origin, read)
        if not robots.allows(str(url)):
            raise errors.denied_robots()

    async def _read_robots(self, url: httpx.URL) -> Robots:
        """RFC 9309 §2.3: 2xx rules; 4xx none; 5xx or unreachable everything disallowed.
        Redirects are followed up to five hops, each judged by the egress policy."""
        for _ in range(6):
            try:
                response = await self._client.send(
                    self._request(url, "text/plain"), stream=True, follow_redirects=False
                )
            except httpx.HTTPError:
                return Robots.unreachable()
            try:
                status = response.status_code
                if status in _REDIRECTS and "location" in response.headers:
                    try:
                        nxt = url.join(response.headers["location"].strip())
                    except (httpx.InvalidURL, ValueError, TypeError):
                        return Robots.unreachable()
                    if nxt.scheme not in ("http", "https") or not self._judge.allowed(nxt):
                        return Robots.unreachable()
                    url = nxt
                    continue
                if 200 <= status <= 299:
                    try:
                        body = await read_bounded(response, ROBOTS_MAX_BYTES, prefix=True)
                    except (UnreadableBody, httpx.HTTPError):
                        return Robots.unreachable()
                    return Robots.parse(body)
                if 400 <= status <= 499:
                    return Robots.allowing()
                return Robots.unreachable()
            finally:
                await response.aclose()
        # RFC 9309 §2.3.1.2: past five redirects the file may be taken as unavailable.
        return Robots.allowing()

    # -- worker thread: decode, extract, clean -------------------------------------------------

    def _read_page(self, page: _Page, kind: Kind) -> _Read:
        text = content_mod.decode(page.content_type, page.body, kind)
        notices: list[Notice] = []
        extracted = self._extract(text, kind, page.url)
        if extracted is None:
            raise errors.extraction_failed()
        title = clean_decoded_text(extracted.title, TITLE_MAX_CHARS)
        body, removed = remove_invisible(extracted.markdown)
        if not body.isascii() and not unicodedata.is_normalized("NFC", body):
            body = unicodedata.normalize("NFC", body)
        body = body.strip()
        if not body:
            raise errors.extraction_failed()
        if title.truncated:
            notices.append(Notice(code=NoticeCode.TITLE_TRUNCATED, count=1))
        if removed + title.removed:
            notices.append(
                Notice(code=NoticeCode.CHARACTERS_REMOVED, count=removed + title.removed)
            )
        if extracted.partial:
            notices.append(Notice(code=NoticeCode.EXTRACTION_PARTIAL))
        if title.instruction_like or looks_like_instruction(body):
            notices.append(Notice(code=NoticeCode.INSTRUCTION_LIKE_CONTENT))
        return _Read(title=title.text, content=body, notices=tuple(notices))


_RETRY_AFTER_MAX_S: Final = 3600


def _retry_after_ms(headers: httpx.Headers) -> int | None:
    """A Retry-After of delta-seconds up to an hour; a date or a larger value is ignored."""
    value = headers.get("retry-after", "").strip()
    if not value.isdigit() or len(value) > 5:
        return None
    seconds = int(value)
    if seconds > _RETRY_AFTER_MAX_S:
        return None
    return seconds * 1000
