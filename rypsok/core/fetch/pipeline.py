"""The web_fetch pipeline, in the order of REQ-PAGE-001.

parameter validation → privacy check of the URL → egress policy (and strict mode) →
robots.txt → request → byte limit while streaming → media type → charset → parsing under
bounds → extraction → cleaning → truncation → structured response.

Redirects are followed here, hop by hop, never by the client: each hop is judged again by the
egress policy and by robots.txt (REQ-FETCH-006, REQ-CMP-005). The network part runs under
the fetch deadline (LIM-F4); parsing and extraction run in worker threads under the parse
limiter (LIM-C5, REQ-PAGE-008), each page with its share of the parse budget (slots.py); the
service holds the one scope that ends the call at LIM-F5.

A PDF is read by a worker process instead (pdf/fetching.py): under a worker's place, the
caller's share of them, and the parse permit with a share of the parse budget for the
worker's memory; the worker is killed when the call's parse deadline passes. Its Markdown is
then cleaned, bounded and cut as a page's is (REQ-PDF-101).

Implements REQ-FETCH-001, REQ-FETCH-003, LIM-F1, LIM-F2 and LIM-F7.
"""

from __future__ import annotations

import math
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Final, Protocol, cast

import attrs
import trio

from rypsok.config.memory import pdf_read_bytes
from rypsok.core import errors, secret_scan, telemetry
from rypsok.core.egress import (
    AdmittedURL,
    Denial,
    EgressPolicy,
    EgressRefused,
    FetchClient,
    Refusal,
)
from rypsok.core.egress.clients import CONNECT_ERRORS, TRANSPORT_ERRORS, FetchTimeouts
from rypsok.core.fetch import content as content_mod
from rypsok.core.fetch.body import BodyTooLarge, UnreadableBody, read_bounded
from rypsok.core.fetch.content import Kind
from rypsok.core.fetch.extract import DocumentText
from rypsok.core.fetch.markdown.escape import escape_line_start, escape_text
from rypsok.core.fetch.parse import stop_if_abandoned
from rypsok.core.fetch.pdf.fetching import PdfFetching
from rypsok.core.fetch.robots import ROBOTS_MAX_BYTES, Robots, RobotsCache
from rypsok.core.model import (
    DetailReason,
    FetchRequest,
    FetchResponse,
    Notice,
    NoticeCode,
    ToolError,
)
from rypsok.core.parsing import MAX_NODES, ParseBudget, ParsePermit, page_share
from rypsok.core.untrusted_text import (
    Cleaned,
    clean_decoded_text,
    clean_in_pieces,
    looks_like_instruction,
)
from rypsok.shared.allocator import malloc_trim

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from rypsok.config.schema import Config
    from rypsok.core.egress.clients import HttpResponse, ResponseHeaders
    from rypsok.core.fetch.pdf.model import PdfText
    from rypsok.core.fetch.slots import BodySlot, FetchSlots

__all__ = [
    "MAX_CHARS_MIN",
    "URL_MAX_CHARS",
    "Extracted",
    "Extractor",
    "FetchPipeline",
]

URL_MAX_CHARS: Final = 2048  # LIM-F9
MAX_CHARS_MIN: Final = 500  # the floor of max_chars (external design §3.2)
TITLE_MAX_CHARS: Final = 150  # LIM-S10
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_TIMER_MARGIN_S: Final = 0.5
# A parse may run this long past the fetch deadline (LIM-F4); the rest of LIM-F5's margin is
# the answer's: under load, ending a call and writing its answer take loop turns that the
# parse threads compete for (calls cut at LIM-F5 itself were answered 0.5 s late).
_PARSE_MARGIN_S: Final = 0.5
_ROBOTS_REDIRECTS: Final = 5  # RFC 9309 §2.3.1.2
# A parse of a body this large hands what it freed back to the system when it ends (glibc's
# malloc_trim): its tree and strings were freed into its worker thread's malloc arena, where
# a later parse in another thread could not use them, and two parses at once then cost more
# than two alone (REQ-PERF-003). A trim walks every arena, up to 43 ms: small
# pages, the HTML engines' answers among them, are not worth it.
TRIM_AFTER_BYTES: Final = 1024 * 1024
_TRIM: Final = malloc_trim()
# The part of the fetch deadline a robots.txt read may take (decisions/fetch-robots-txt).
_ROBOTS_SHARE: Final = 0.5
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
    runs in a worker thread under the parse limiter, parsing under LIM-F10 and LIM-F11. The
    text is handed over in a `DocumentText`, which the parse empties: once the tree is built
    nothing holds the text."""

    def __call__(self, document: DocumentText, kind: Kind, base_url: str) -> Extracted | None: ...


class _Progress:
    started = False


class _Hop:
    """One request of the walk from the caller's URL to the page read."""

    def __init__(self, target: AdmittedURL, text: str, location: str = "") -> None:
        self.target = target
        self.text = text  # the URL as it is reported (the caller's own spelling first)
        self.location = location  # a redirect's absolute target as the site named it


@attrs.define(kw_only=True)
class _Page:
    """A page read; internal and mutable so that its body can be let go once decoded."""

    url: str
    status: int
    content_type: str | None
    body: bytes | bytearray


@attrs.frozen(kw_only=True)
class _Read:
    title: str
    # The part of the content asked for (or the content's length, when start_char is past
    # its end), cut in the worker thread: the whole content (20 MiB of a 5 MiB page with a
    # character beyond U+FFFF) is freed there, under the parse's permit and budget share,
    # not in the event loop once the next parse has already begun.
    piece: content_mod.Cut | int
    notices: tuple[Notice, ...]
    partial: bool = False  # a document read in part (a PDF past its page or character bound)


class FetchPipeline:
    """One process's web_fetch: its client, policy, robots cache, slots and parse limiter."""

    def __init__(
        self,
        config: Config,
        *,
        client: FetchClient,
        policy: EgressPolicy,
        extractor: Extractor,
        robots: RobotsCache,
        slots: FetchSlots,
        parse_limiter: trio.CapacityLimiter,
        parse_budget: ParseBudget | None = None,
        was_returned: Callable[[str], bool],
    ) -> None:
        self._config = config
        self._fetch = config.fetch
        self._client = client
        self._policy = policy
        self._extract = extractor
        self._robots = robots
        self._slots = slots
        self._parse_limiter = parse_limiter
        self._was_returned = was_returned
        self._max_nodes = MAX_NODES  # the node bound the extractor parses under
        # The pages parsing at once hold at most one page at the bounds between them: LIM-F3's
        # bytes and LIM-F10's elements (slots.page_share; decisions/fetch-parse-budget). The
        # service passes the budget it shares with the engines' large answers (services.py).
        self._budget = (
            parse_budget
            if parse_budget is not None
            else ParseBudget(config.fetch.max_bytes * MAX_NODES)
        )
        # As many PDF workers as the budget and the permits admit reads at once (one at the
        # defaults), however many fetch.pdf_workers allows.
        pdf_cost = pdf_read_bytes(config.fetch.pdf_memory_mib, config.fetch.pdf_max_chars)
        pdf_share = max(self._budget.share_of_cost(pdf_cost), 1)
        self._pdf = PdfFetching(
            config.fetch,
            at_once=min(self._budget.total // pdf_share, config.limits.parsing_in_flight),
        )

    # -- parameters, privacy, policy (no network) -------------------------------------------

    def _validate(self, request: FetchRequest) -> tuple[int, int]:
        if len(request.url) > URL_MAX_CHARS:
            raise errors.url_too_long(URL_MAX_CHARS)
        if not request.url:
            # No URL at all is a parameter to fix, as a blank one is, not a refused scheme.
            raise errors.url_invalid()
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
            masked, count = secret_scan.mask_secrets(url)
            if count == 0:
                return url, ()
            return masked, (Notice(code=NoticeCode.CREDENTIAL_MASKED, count=count),)
        finding = secret_scan.find_secret(url)
        if finding is None:
            return url, ()
        if mode == "warn":
            telemetry.warn("secret_in_url", kind=str(finding.kind), position=finding.position)
            return url, ()
        raise errors.denied_secret(DetailReason.SECRET_IN_URL, finding.kind, finding.position)

    def _refuse(self, denial: Denial) -> ToolError:
        # The operator's log gets the class of the refusal, never the host (REQ-PRIV-004).
        telemetry.info("refused", tool="web_fetch", refusal=str(denial.refusal))
        if denial.refusal is Refusal.MALFORMED_URL:
            return errors.url_invalid()
        if denial.reason is DetailReason.SCHEME:
            return errors.denied_scheme()
        if denial.reason is DetailReason.CREDENTIAL_IN_URL:
            return errors.denied_credential_in_url()
        return errors.denied_egress()

    def _first_hop(self, text: str) -> _Hop:
        judged = self._policy.judge_url(text)
        if isinstance(judged, Denial):
            raise self._refuse(judged)
        if self._fetch.strict_mode and not (self._was_returned(text) or judged.allowed_by_rule):
            raise errors.denied_strict_mode()
        return _Hop(judged, judged.url if judged.upgraded else text)

    # -- the call ---------------------------------------------------------------------------

    async def run(self, request: FetchRequest, *, start: float) -> FetchResponse:
        """One web_fetch; raises ToolError. The caller holds the LIM-F5 scope."""
        max_chars, start_char = self._validate(request)
        url_text, notices = self._privacy(request.url)
        hop = self._first_hop(url_text)
        network_deadline = start + self._fetch.deadline_ms / 1000
        progress = _Progress()
        permit: ParsePermit | None = None
        worker = AsyncExitStack()
        try:
            async with self._slots.body() as slot:
                with trio.move_on_at(network_deadline) as scope:
                    page = await self._retrieve(hop, progress, slot)
                    kind = _kind_of(page)
                    if kind is Kind.PDF:
                        # A worker's place first, in the caller's turn among the callers
                        # (REQ-PDF-103); the budget's share stands for the worker's memory.
                        caller = telemetry.current_caller() or telemetry.LOCAL_CALLER
                        await worker.enter_async_context(self._pdf.share.worker(caller))
                        share = self._budget.share_of_cost(self._pdf.cost)
                    else:
                        share, _ = page_share(
                            page.body, max_bytes=self._fetch.max_bytes, max_nodes=self._max_nodes
                        )
                    permit = ParsePermit(self._parse_limiter, self._budget, share)
                    # The body waits for its share and its permit under its slot
                    # (REQ-PERF-003), and no longer than the fetch deadline: a call still
                    # waiting then answers at LIM-F4, LIM-F5's margin left for the answer,
                    # however many wait.
                    await permit.take()
                if scope.cancelled_caught or permit is None:
                    # Still waiting for a slot, the parse budget or a permit at the
                    # deadline: the limit, not the site, was the cause.
                    raise errors.deadline_fetch() if progress.started else errors.fetch_busy()
            read: _Read | None = None
            with trio.move_on_at(network_deadline + _PARSE_MARGIN_S):
                read = await self._read(page, kind, worker, permit, start_char, max_chars)
        finally:
            await worker.aclose()
            if permit is not None:
                permit.release_unless_handed()
        if read is None:
            # The parse goes on in its thread, abandoned; the call answers now.
            raise errors.deadline_fetch()
        piece = read.piece
        if isinstance(piece, int):
            raise errors.start_char_beyond(piece)
        return FetchResponse(
            url=page.url,
            title=read.title,
            content=piece.text,
            # A document read in part has more than its last part shows (REQ-PDF-104).
            truncated=piece.truncated or read.partial,
            next_start_char=piece.next_start_char,
            notices=notices + read.notices,
        )

    async def _read(
        self,
        page: _Page,
        kind: Kind,
        worker: AsyncExitStack,
        permit: ParsePermit,
        start_char: int,
        max_chars: int,
    ) -> _Read:
        """The body read in a worker thread under `permit`, which goes with the thread (trio
        returns it when it ends); a PDF is read by its worker process first."""
        limiter = cast("trio.CapacityLimiter", permit)
        if kind is not Kind.PDF:
            return await trio.to_thread.run_sync(
                self._read_page_and_trim,
                page,
                kind,
                start_char,
                max_chars,
                limiter=limiter,
                abandon_on_cancel=True,
            )
        async with worker:
            # The worker is killed if the deadline passes while it reads.
            document = await self._pdf.read(page.body)
        page.body = b""
        return await trio.to_thread.run_sync(
            self._read_pdf,
            document,
            page.url,
            start_char,
            max_chars,
            limiter=limiter,
            abandon_on_cancel=True,
        )

    # -- network ------------------------------------------------------------------------------

    async def _retrieve(self, hop: _Hop, progress: _Progress, slot: BodySlot) -> _Page:
        redirects = 0
        while True:
            async with self._slots.host(hop.target.host, slot):
                progress.started = True
                outcome = await self._walk_host(hop, redirects)
            if isinstance(outcome, _Page):
                return outcome
            # A cross-host hop the operator lets the pipeline follow: a new host slot.
            hop, redirects = outcome

    async def _walk_host(self, hop: _Hop, redirects: int) -> _Page | tuple[_Hop, int]:
        host = hop.target.host
        while True:
            await self._check_robots(hop)
            async with self._send(hop) as response:
                status = response.status_code
                location = response.headers.get("location")
                if status in _REDIRECTS and location is not None:
                    target = self._redirect_target(hop, location)
                    cross_host = target.target.host != host
                    if cross_host and not self._fetch.follow_cross_host_redirects:
                        # Returned, not followed: no hop was made, so none is counted (LIM-F7).
                        raise errors.redirected(target.location)
                    redirects += 1
                    if redirects > self._fetch.max_redirects:
                        raise errors.too_many_redirects(self._fetch.max_redirects)
                    if cross_host:
                        return target, redirects
                    hop = target
                    continue
                if 400 <= status <= 599:
                    raise errors.http_status(status, _retry_after_ms(response.headers))
                if not 200 <= status <= 299:
                    # The site was reached and answered, with no page and no target to follow
                    # (a redirect without Location, 304, 1xx): not a network failure.
                    raise errors.no_page()
                body = await self._read_body(response)
                # The host only after the policy admitted it, never the path (REQ-PRIV-004).
                telemetry.info("fetched", host=host, status=status, bytes=len(body))
                telemetry.COUNTERS.fetched(len(body))
                return _Page(
                    url=hop.text,
                    status=status,
                    content_type=response.headers.get("content-type"),
                    body=body,
                )

    def _redirect_target(self, hop: _Hop, location: str) -> _Hop:
        """The next hop, judged by the egress policy (REQ-SEC-008) relative to the URL that
        answered; a target the policy refuses ends the call with denied and is never
        disclosed: reason scheme for a scheme that is not allowed (plain http too, unless
        the operator allows it), egress for everything else (a credential or a malformed
        URL included: the caller cannot remove what the site wrote)."""
        judged = self._policy.judge_redirect(hop.target, location)
        if isinstance(judged, Denial):
            telemetry.info("refused", tool="web_fetch", refusal=str(judged.refusal), hop="redirect")
            if judged.reason is DetailReason.SCHEME:
                # Not https, nor an http URL the operator allows (ftp:, javascript:, plain
                # http with allow_http off): the book's denied, scheme for a redirect target.
                raise errors.denied_scheme()
            raise errors.denied_egress()
        if len(judged.url) > URL_MAX_CHARS:
            # Not a URL web_fetch would take from a caller either (LIM-F9).
            raise errors.denied_egress()
        return _Hop(judged, judged.url, judged.url)

    def _timeouts(self) -> FetchTimeouts:
        # The read timeout is the time left of the deadline (REQ-SEC-011).
        left = trio.current_effective_deadline() - trio.current_time()
        if math.isinf(left):
            left = self._fetch.deadline_ms / 1000
        left = max(left, 0.001)
        connect = min(self._fetch.connect_timeout_ms / 1000, left)
        # Past the deadline by a margin: the pipeline's Trio deadline, not httpcore's timer, ends
        # a slow read, so that it is answered as the deadline it is.
        return FetchTimeouts(left + _TIMER_MARGIN_S, connect=connect)

    @asynccontextmanager
    async def _send(self, hop: _Hop) -> AsyncIterator[HttpResponse]:
        try:
            async with self._client.stream(
                hop.target, accept=_ACCEPT, timeouts=self._timeouts()
            ) as response:
                yield response
        except TRANSPORT_ERRORS as exc:
            _log_connect_refusal(exc)
            if hop.target.upgraded:
                # REQ-FETCH-010: the https retry of a plain http URL failed.
                raise errors.denied_scheme_upgrade() from None
            raise errors.network() from None

    async def _read_body(self, response: HttpResponse) -> bytearray:
        try:
            return await read_bounded(response, self._fetch.max_bytes)
        except BodyTooLarge:
            raise errors.too_large(self._fetch.max_bytes) from None
        except UnreadableBody:
            raise errors.network() from None

    # -- robots.txt ---------------------------------------------------------------------------

    async def _check_robots(self, hop: _Hop) -> None:
        if not self._fetch.robots_txt:
            return
        target = hop.target

        async def read() -> Robots:
            # A file that drips or hangs is one that cannot be read: it disallows, and the
            # page keeps the rest of the deadline (the fetch deadline, if earlier, still
            # answers as the deadline).
            with trio.move_on_after(self._fetch.deadline_ms / 1000 * _ROBOTS_SHARE):
                return await self._read_robots(f"{target.origin}/robots.txt", target.upgraded)
            return Robots.unreachable()

        robots = await self._robots.rules_for(target.origin, read)
        if not robots.allows(target.url):
            raise errors.denied_robots()

    async def _read_robots(self, url: str, upgraded: bool) -> Robots:
        """RFC 9309 §2.3: 2xx rules; 4xx none; 5xx or unreachable everything disallowed.
        Up to five redirects are followed, each judged by the egress policy; a loop, or a
        file not reached within five, cannot be read and disallows.

        A site that cannot be connected to is unavailable, network, as the page would be;
        for a plain http URL retried over https that is the retry failing (REQ-FETCH-010)."""
        judged: AdmittedURL | Denial = self._policy.judge_url(url)
        asked: set[str] = set()
        for _ in range(_ROBOTS_REDIRECTS + 1):
            if isinstance(judged, Denial) or judged.url in asked:
                return Robots.unreachable()
            asked.add(judged.url)
            try:
                async with self._client.stream(
                    judged, accept="text/plain", timeouts=self._timeouts()
                ) as response:
                    status = response.status_code
                    location = response.headers.get("location")
                    if status in _REDIRECTS and location is not None:
                        judged = self._policy.judge_redirect(judged, location)
                        continue
                    if 200 <= status <= 299:
                        try:
                            body = await read_bounded(response, ROBOTS_MAX_BYTES, prefix=True)
                        except UnreadableBody:
                            return Robots.unreachable()
                        return Robots.parse(body)
                    if 400 <= status <= 499:
                        return Robots.allowing()
                    return Robots.unreachable()
            except CONNECT_ERRORS as exc:
                _log_connect_refusal(exc)
                # The site itself cannot be reached: the page could not be either, and the
                # answer is the one of an unreachable site (never a hint about why).
                if upgraded:
                    raise errors.denied_scheme_upgrade() from None
                raise errors.network() from None
            except TRANSPORT_ERRORS:
                return Robots.unreachable()
        # RFC 9309 §2.3.1.2 lets a crawler take the file as unavailable past five redirects;
        # a file that cannot be read disallows (decisions/fetch-robots-txt).
        return Robots.unreachable()

    # -- worker thread: decode, extract, clean -------------------------------------------------

    def _read_page_and_trim(
        self, page: _Page, kind: Kind, start_char: int, max_chars: int
    ) -> _Read:
        large = len(page.body) >= TRIM_AFTER_BYTES
        try:
            return self._read_page(page, kind, start_char, max_chars)
        finally:
            # `_read_page`'s frame is gone here: its tree and texts are freed.
            if large and _TRIM is not None:
                _TRIM()

    def _read_page(self, page: _Page, kind: Kind, start_char: int, max_chars: int) -> _Read:
        document = DocumentText(content_mod.decode(page.content_type, page.body, kind))
        # From here on the bytes are not needed; nor is each step's input after it: a page
        # is held at most twice at any moment (REQ-PERF-003's estimate counts on it), and
        # the decoded text only until its tree is built (the parse takes it from `document`).
        page.body = b""
        extracted = self._extract(document, kind, page.url)
        del document
        if extracted is None:
            raise errors.extraction_failed()
        return self._clean_and_cut(extracted, start_char, max_chars)

    def _read_pdf(self, document: PdfText, url: str, start_char: int, max_chars: int) -> _Read:
        """A PDF's document as Markdown, then the page's cleaning and cut (REQ-PDF-101)."""
        written = self._pdf.markdown(document, url)
        del document
        extracted = Extracted(title=written.title or "", markdown=written.markdown, partial=False)
        read = self._clean_and_cut(extracted, start_char, max_chars, written.notices)
        return attrs.evolve(read, partial=written.partial)

    def _clean_and_cut(
        self,
        extracted: Extracted,
        start_char: int,
        max_chars: int,
        read_notices: tuple[Notice, ...] = (),
    ) -> _Read:
        """The content boundary of every document read, a page or a PDF: invisible
        characters out and NFC, the title bounded, instruction-like passages noticed, and
        the part asked for cut."""
        notices: list[Notice] = []
        title = _title(extracted.title)
        partial = extracted.partial
        # Invisible characters out, NFC, and the instruction check below: read in pieces, the
        # GIL passing between them, so that the event loop still ends calls at LIM-F5 while
        # a large page is read here; an abandoned read stops at its next piece.
        body, removed = clean_in_pieces(extracted.markdown, stop_if_abandoned)
        del extracted
        body = body.strip()
        if not body:
            raise errors.extraction_failed()
        if title.truncated:
            notices.append(Notice(code=NoticeCode.TITLE_TRUNCATED, count=1))
        if removed + title.removed:
            notices.append(
                Notice(code=NoticeCode.CHARACTERS_REMOVED, count=removed + title.removed)
            )
        if partial:
            notices.append(Notice(code=NoticeCode.EXTRACTION_PARTIAL))
        notices += read_notices
        flagged = int(title.instruction_like) + _instruction_like_passages(body)
        if flagged:
            notices.append(Notice(code=NoticeCode.INSTRUCTION_LIKE_CONTENT, count=flagged))
        return _Read(
            title=title.text,
            piece=content_mod.cut(body, start_char, max_chars),
            notices=tuple(notices),
        )


def _title(raw: str) -> Cleaned:
    """The page's title as the answer shows it: escaped as the content is (external text in
    a Markdown answer, REQ-SEC-001: `[x](javascript:…)` in a <title> stays text), then
    cleaned and bounded as every title is (REQ-CTX-004, LIM-S10).

    The instruction check reads the title before it is escaped, as its phrases are written
    (`[INST]`, not `\\[INST\\]`). A cut that falls between a backslash and the character it
    escapes drops the backslash, which would otherwise escape whatever follows the title.
    """
    plain = clean_decoded_text(raw, TITLE_MAX_CHARS)
    shown = clean_decoded_text(escape_line_start(escape_text(raw)), TITLE_MAX_CHARS)
    text = shown.text
    if shown.truncated and (len(text) - len(text.rstrip("\\"))) % 2:
        text = text[:-1]
    return attrs.evolve(shown, text=text, instruction_like=plain.instruction_like)


def _instruction_like_passages(content: str) -> int:
    """How many paragraphs of the content read like an instruction; 1 when the content does
    only as a whole (a pattern's parts in different paragraphs), 0 when it does not."""
    if not looks_like_instruction(content, stop_if_abandoned):
        return 0
    # Only a page that is flagged pays for the second, per-paragraph look.
    passages = 0
    start = 0
    while start <= len(content):
        end = content.find("\n\n", start)
        end = len(content) if end < 0 else end
        passages += looks_like_instruction(content[start:end], stop_if_abandoned)
        start = end + 2
    return max(passages, 1)


def _kind_of(page: _Page) -> Kind:
    """The kind of document a page is, or unsupported_content for a media type that is
    not read (judged before the body waits for a parse permit)."""
    essence = content_mod.media_type_of(page.content_type)
    kind = content_mod.classify(essence, page.body[:4096])
    if kind is None:
        raise errors.unsupported_media_type(
            content_mod.bounded_media_type(essence or "application/octet-stream")
        )
    return kind


def _log_connect_refusal(exc: BaseException) -> None:
    """A refusal met at connect time is answered as a network failure; the operator's log
    still records it, with its class and never the host (external design §8)."""
    if isinstance(exc, EgressRefused):
        telemetry.info("refused", tool="web_fetch", refusal=str(exc.refusal), stage="connect")


_RETRY_AFTER_MAX_S: Final = 3600


def _retry_after_ms(headers: ResponseHeaders) -> int | None:
    """A Retry-After of delta-seconds up to an hour; a date or a larger value is ignored."""
    value = headers.get("retry-after", "").strip()
    if not value.isdigit() or len(value) > 5:
        return None
    seconds = int(value)
    if seconds > _RETRY_AFTER_MAX_S:
        return None
    return seconds * 1000
