"""web_fetch's reading of a PDF body (REQ-PDF-101..105): a worker process reads the document
under its limits (isolation.py), the callers share the workers (share.py), and the document
comes back to be written as Markdown with the links a page's links would keep.

The serving process's part is `PdfFetching.read` (async: the worker, which the call's scope
kills) and `PdfFetching.markdown` (synchronous: run in a worker thread under the parse
permit, as a page's extraction is). The cleaning, the bounds and the cut that follow are the
page's own (pipeline.py), so a PDF's content crosses the same content boundary as HTML.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Final

import attrs

from rypsok.config.memory import pdf_read_bytes
from rypsok.core import errors, telemetry
from rypsok.core.fetch.markdown.links import link_target
from rypsok.core.fetch.pdf.isolation import Failure, WorkerFailed, WorkerLimits, run_worker
from rypsok.core.fetch.pdf.render import render_markdown
from rypsok.core.fetch.pdf.share import WorkerShare
from rypsok.core.model import Notice, NoticeCode, Reason, ToolError

if TYPE_CHECKING:
    from rypsok.config.schema import FetchConfig
    from rypsok.core.fetch.pdf.model import PdfText

__all__ = ["MIB", "PdfFetching", "PdfMarkdown"]

MIB: Final = 1024 * 1024
# The CPU seconds a worker may use beyond the call's own time (a backstop: the call's
# deadline kills it first; the CPU limit ends a worker whose parent could not).
_CPU_MARGIN_S: Final = 2


@attrs.frozen(kw_only=True)
class PdfMarkdown:
    """A document written as Markdown: its title (None: none found), and notices of how it
    was read (document_partial)."""

    title: str | None
    markdown: str
    notices: tuple[Notice, ...]
    partial: bool


class PdfFetching:
    """One process's PDF reading: its workers' share and limits."""

    def __init__(self, fetch: FetchConfig, *, at_once: int | None = None) -> None:
        """`at_once`: how many PDF reads the parse budget and permits admit together; the
        workers are at most that many, so that a read waits for its turn in the callers'
        share (fair), never for the budget (first come) with a worker's place held."""
        self._fetch = fetch
        workers = fetch.pdf_workers if at_once is None else min(fetch.pdf_workers, at_once)
        self.share = WorkerShare(max(workers, 1))

    @property
    def cost(self) -> int:
        """The memory one PDF read may take, the worker's and this process's part."""
        return pdf_read_bytes(self._fetch.pdf_memory_mib, self._fetch.pdf_max_chars)

    @property
    def memory_bytes(self) -> int:
        return self._fetch.pdf_memory_mib * MIB

    def limits(self) -> WorkerLimits:
        call_s = self._fetch.deadline_ms / 1000
        return WorkerLimits(
            max_bytes=self._fetch.max_bytes,
            max_pages=self._fetch.pdf_max_pages,
            max_chars=self._fetch.pdf_max_chars,
            memory_bytes=self.memory_bytes,
            cpu_s=math.ceil(call_s) + _CPU_MARGIN_S,
        )

    async def read(self, body: bytes | bytearray) -> PdfText:
        """The document, read by a worker; raises the ToolError of a document not read.
        The caller holds a worker's place (`share.worker`) and the deadline's scope."""
        if not body:
            # An empty body is no document: no worker is started for it.
            raise errors.pdf_unreadable()
        try:
            return await run_worker(body, self.limits())
        except WorkerFailed as failed:
            # The class of the failure, never the document's text or its host.
            telemetry.info("pdf_not_read", failure=str(failed.failure))
            raise _error_of(failed.failure, self.memory_bytes) from None

    def markdown(self, doc: PdfText, url: str) -> PdfMarkdown:
        """The document as Markdown, its links judged as a page's links are (`link_target`
        against the document's URL: http and https only, as web_search returns them)."""
        if not doc.has_text_layer:
            raise errors.pdf_no_text()
        rendered = render_markdown(doc, judge_link=functools.partial(link_target, url))
        # The bound the reading stopped at, if any: pages first, then characters.
        stopped: Reason | None = None
        if doc.pages_read < doc.pages_total:
            stopped = Reason.PAGE_LIMIT
        elif doc.text_cut:
            stopped = Reason.CHARACTER_LIMIT
        # A page bound counts the pages read; a character bound the pages the kept text reaches.
        count = _pages_reached(doc) if stopped is Reason.CHARACTER_LIMIT else doc.pages_read
        notices = (
            ()
            if stopped is None
            else (Notice(code=NoticeCode.DOCUMENT_PARTIAL, reason=stopped, count=count),)
        )
        return PdfMarkdown(
            title=rendered.title,
            markdown=rendered.markdown,
            notices=notices,
            partial=stopped is not None,
        )


def _error_of(failure: Failure, memory_bytes: int) -> ToolError:
    if failure is Failure.ENCRYPTED:
        return errors.pdf_encrypted()
    if failure is Failure.MEMORY:
        return errors.pdf_memory(memory_bytes)
    if failure is Failure.CPU:
        return errors.deadline_fetch()
    if failure is Failure.START:
        return errors.fetch_busy()
    return errors.pdf_unreadable()


def _pages_reached(doc: PdfText) -> int:
    """The pages the kept text reaches, the last of them read in part: what the character
    bound let be read (the worker parsed more pages, whose text was cut)."""
    return max((block.page for block in doc.blocks), default=-1) + 1
