"""Constructors of every error rypsok returns, one per kind and reason.

Each message is rypsok's own English: it says what the caller can change, is at most
LIM-I4 characters, and never carries external text, a secret or an address.

Implements REQ-ERR-002 and REQ-ERR-004.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rypsok.core.model import DetailReason, ErrorDetail, ErrorKind, SecretKind, ToolError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any


def _error(kind: ErrorKind, message: str, /, **detail: Any) -> ToolError:
    """The one shape of every error: a kind, rypsok's sentence, and the detail's keys."""
    return ToolError(kind=kind, message=message, detail=ErrorDetail(**detail))


def _fixed(kind: ErrorKind, reason: DetailReason, message: str) -> Callable[[], ToolError]:
    """The constructor of an error that carries nothing of the call: its kind, reason and
    sentence are fixed. Each call makes a new error (an exception is raised where it is made,
    and carries its own traceback)."""

    def build() -> ToolError:
        return _error(kind, message, reason=reason)

    return build


__all__ = [
    "RETRYABLE_STATUSES",
    "all_failed",
    "busy",
    "deadline_fetch",
    "deadline_search",
    "denied_credential_in_url",
    "denied_egress",
    "denied_robots",
    "denied_scheme",
    "denied_scheme_upgrade",
    "denied_secret",
    "denied_strict_mode",
    "extraction_failed",
    "fetch_busy",
    "http_status",
    "integer_too_long",
    "invalid_allowed",
    "invalid_length",
    "invalid_range",
    "invalid_type",
    "network",
    "no_engine",
    "no_engine_skipped",
    "no_page",
    "pdf_encrypted",
    "pdf_memory",
    "pdf_no_text",
    "pdf_unreadable",
    "rate_limited",
    "redirected",
    "required",
    "start_char_beyond",
    "start_char_negative",
    "too_large",
    "too_many_redirects",
    "unknown_parameter",
    "unsupported_media_type",
    "url_invalid",
    "url_too_long",
]


def invalid_range(parameter: str, minimum: int, maximum: int) -> ToolError:
    return _error(
        ErrorKind.INVALID_REQUEST,
        f"{parameter} must be between {minimum} and {maximum}",
        parameter=parameter,
        min=minimum,
        max=maximum,
    )


def invalid_length(parameter: str, minimum: int, maximum: int) -> ToolError:
    return _error(
        ErrorKind.INVALID_REQUEST,
        f"{parameter} must be {minimum} to {maximum} characters after trimming",
        parameter=parameter,
        min=minimum,
        max=maximum,
    )


def invalid_allowed(parameter: str, allowed: Iterable[str]) -> ToolError:
    values = tuple(allowed)
    listed = ", ".join(values)
    message = f"{parameter} must be one of: {listed}"
    if len(message) > 200:
        message = f"{parameter} must be one of the values in detail.allowed"
    return _error(ErrorKind.INVALID_REQUEST, message, parameter=parameter, allowed=values)


def invalid_type(
    parameter: str, expected: str, minimum: int | None = None, maximum: int | None = None
) -> ToolError:
    # The bounds travel in the detail too: an invalid_request carries min/max or allowed.
    return _error(
        ErrorKind.INVALID_REQUEST,
        f"{parameter} must be {expected}",
        parameter=parameter,
        min=minimum,
        max=maximum,
    )


def required(parameter: str) -> ToolError:
    return _error(ErrorKind.INVALID_REQUEST, f"{parameter} is required", parameter=parameter)


def unknown_parameter(parameter_count: int, first: str | None, allowed: Sequence[str]) -> ToolError:
    """`first` is the first unknown name, already bounded by the caller of this function
    (None when none can be shown); it goes to the caller's detail, never to the message."""
    noun = "parameter" if parameter_count == 1 else "parameters"
    return _error(
        ErrorKind.INVALID_REQUEST,
        (
            f"the call has {parameter_count} unknown {noun}; "
            "use only those of the tool (detail.allowed)"
        ),
        parameter=first,
        allowed=tuple(allowed),
    )


def integer_too_long(parameter: str, minimum: int, digits: int) -> ToolError:
    # An integer too long to convert; the schema gives this parameter no maximum.
    return _error(
        ErrorKind.INVALID_REQUEST,
        f"{parameter} must be an integer of {minimum} or more, at most {digits} digits",
        parameter=parameter,
        min=minimum,
    )


def denied_secret(reason: DetailReason, kind: SecretKind, position: int) -> ToolError:
    what = "query" if reason is DetailReason.SECRET_IN_QUERY else "url"
    return _error(
        ErrorKind.DENIED,
        (
            f"the {what} looks like it carries a credential ({kind}) at character "
            f"{position}; remove it and call again"
        ),
        reason=reason,
        kind=kind,
        position=position,
    )


no_engine = _fixed(
    ErrorKind.UNAVAILABLE,
    DetailReason.NO_ENGINE,
    "no enabled engine serves this category; choose another category",
)


def no_engine_skipped(
    retry_after_ms: int | None = None, *, waiting: bool = True, unmet: Sequence[str] = ()
) -> ToolError:
    """N = 0 because every engine of the category was skipped for this call.

    `waiting`: at least one was held back by a wait (its cooldown, a provider's Retry-After,
    its rate), so retrying helps, after `retry_after_ms` when that wait is known. Otherwise
    every engine was skipped for what the call asks (`unmet`: the parameters it cannot
    honor), and retrying the same call will not help.
    """
    if waiting:
        message = (
            "no engine of this category could be asked now (resting, or its rate used up); "
            "retry later"
        )
    else:
        asked = " or ".join(unmet) or "this call"
        it = "them" if len(unmet) > 1 else "it"
        message = (
            f"no engine of this category can honor {asked}; change {it} or choose another "
            "category, since retrying the same call will not help"
        )
    return _error(
        ErrorKind.UNAVAILABLE,
        message,
        reason=DetailReason.NO_ENGINE,
        retry_after_ms=retry_after_ms if waiting else None,
    )


def all_failed(retry_after_ms: int | None = None) -> ToolError:
    return _error(
        ErrorKind.UNAVAILABLE,
        "every engine asked failed; retry later",
        reason=DetailReason.ALL_FAILED,
        retry_after_ms=retry_after_ms,
    )


deadline_search = _fixed(
    ErrorKind.UNAVAILABLE,
    DetailReason.DEADLINE,
    "no engine answered before the deadline; retry later",
)


def rate_limited(tool: str, retry_after_ms: int) -> ToolError:
    return _error(
        ErrorKind.UNAVAILABLE,
        f"the {tool} rate limit is reached; retry later",
        reason=DetailReason.RATE_LIMITED,
        retry_after_ms=retry_after_ms,
    )


busy = _fixed(
    ErrorKind.UNAVAILABLE,
    DetailReason.BUSY,
    "rypsok is at its concurrency limit; retry later",
)


# --- web_fetch -------------------------------------------------------------------------------


def start_char_beyond(length: int) -> ToolError:
    # The content length is rypsok's count, not external text: the caller needs it.
    return _error(
        ErrorKind.INVALID_REQUEST,
        (
            f"start_char must be below the content length, {length} characters; "
            "call again with a smaller start_char"
        ),
        parameter="start_char",
        min=0,
        max=max(0, length - 1),
    )


def url_too_long(maximum: int) -> ToolError:
    return _error(
        ErrorKind.INVALID_REQUEST,
        f"url must be at most {maximum} characters",
        parameter="url",
        min=1,
        max=maximum,
    )


def url_invalid() -> ToolError:
    return _error(
        ErrorKind.INVALID_REQUEST,
        "url must be an absolute http or https URL with a host name",
        parameter="url",
        allowed=("https", "http"),
    )


denied_egress = _fixed(
    ErrorKind.DENIED,
    DetailReason.EGRESS,
    "the destination is not allowed by the egress policy",
)


denied_robots = _fixed(
    ErrorKind.DENIED,
    DetailReason.ROBOTS_TXT,
    "the site's robots.txt does not allow rypsok to read this page; do not retry",
)


# DAT-3: a scheme that is not http at all has its own message, never "retried".
denied_scheme = _fixed(
    ErrorKind.DENIED,
    DetailReason.SCHEME,
    "the URL scheme is not allowed; use https (http only where the operator allows)",
)


denied_scheme_upgrade = _fixed(
    ErrorKind.DENIED,
    DetailReason.SCHEME,
    (
        "plain http is not allowed; the URL was retried over https and that request "
        "failed; use a page served over https"
    ),
)


denied_strict_mode = _fixed(
    ErrorKind.DENIED,
    DetailReason.STRICT_MODE,
    (
        "strict mode: only URLs a web_search returned in this process or hosts the "
        "operator allows can be fetched"
    ),
)


denied_credential_in_url = _fixed(
    ErrorKind.DENIED,
    DetailReason.CREDENTIAL_IN_URL,
    "the url carries a user name before the host; remove it and call again",
)


def redirected(location: str) -> ToolError:
    return _error(
        ErrorKind.REDIRECTED,
        "the page moved to another host; see detail.location",
        location=location,
    )


# The same answer whatever the cause, so that it tells nothing about internal names.
network = _fixed(
    ErrorKind.UNAVAILABLE,
    DetailReason.NETWORK,
    "the site could not be reached; retry later or choose another page",
)


deadline_fetch = _fixed(
    ErrorKind.UNAVAILABLE,
    DetailReason.DEADLINE,
    "the page was not retrieved before the deadline; retry later",
)


RETRYABLE_STATUSES = frozenset({408, 425, 429})


def http_status(status: int, retry_after_ms: int | None = None) -> ToolError:
    """A 4xx or 5xx answer (REQ-FETCH-011, DAT-4): the message says whether a retry helps."""
    if status in RETRYABLE_STATUSES or 500 <= status <= 599:
        return _error(
            ErrorKind.UNAVAILABLE,
            f"the site answered with status {status}; retry later",
            reason=DetailReason.HTTP_STATUS,
            status=status,
            retry_after_ms=retry_after_ms,
        )
    return _error(
        ErrorKind.UNAVAILABLE,
        (
            f"the site answered with status {status}: it refused the request or has no such "
            "page, and retrying the same URL will not help"
        ),
        reason=DetailReason.HTTP_STATUS,
        status=status,
    )


def unsupported_media_type(media_type: str) -> ToolError:
    return _error(
        ErrorKind.UNSUPPORTED_CONTENT,
        (
            "only HTML, XHTML, plain text, Markdown and PDF are read; the type is in "
            "detail.media_type; choose another page"
        ),
        reason=DetailReason.MEDIA_TYPE,
        media_type=media_type,
    )


extraction_failed = _fixed(
    ErrorKind.UNSUPPORTED_CONTENT,
    DetailReason.EXTRACTION_FAILED,
    "nothing could be extracted from the page; choose another page",
)


def too_large(limit_bytes: int) -> ToolError:
    return _error(
        ErrorKind.TOO_LARGE,
        (f"the page is larger than {limit_bytes} bytes after decompression; choose another page"),
        limit_bytes=limit_bytes,
    )


fetch_busy = _fixed(
    ErrorKind.UNAVAILABLE,
    DetailReason.BUSY,
    "rypsok is reading as many pages as it may at once; retry later",
)


# Reason network, as too_many_redirects: the book's vocabulary has no other reason for a
# site that answered without anything to read, and http_status is for 4xx and 5xx.
no_page = _fixed(
    ErrorKind.UNAVAILABLE,
    DetailReason.NETWORK,
    "the site answered without a page or a redirect target; choose another page",
)


def too_many_redirects(maximum: int) -> ToolError:
    return _error(
        ErrorKind.UNAVAILABLE,
        f"the page redirected more than {maximum} times; choose another page",
        reason=DetailReason.NETWORK,
    )


def start_char_negative() -> ToolError:
    return _error(
        ErrorKind.INVALID_REQUEST, "start_char must be 0 or more", parameter="start_char", min=0
    )


# --- web_fetch of a PDF (REQ-PDF-105) -------------------------------------------------------


pdf_encrypted = _fixed(
    ErrorKind.UNSUPPORTED_CONTENT,
    DetailReason.PDF_ENCRYPTED,
    "the PDF is encrypted and opens only with a password; choose another page",
)


pdf_no_text = _fixed(
    ErrorKind.UNSUPPORTED_CONTENT,
    DetailReason.PDF_NO_TEXT,
    (
        "the PDF has no text layer (a scanned document?) and rypsok does not read text "
        "from images; choose another page"
    ),
)


# Empty, cut short, broken past repair, or not a PDF at all: the same answer.
pdf_unreadable = _fixed(
    ErrorKind.UNSUPPORTED_CONTENT,
    DetailReason.PDF_UNREADABLE,
    "the PDF is empty, incomplete or broken and could not be read; choose another page",
)


def pdf_memory(limit_bytes: int) -> ToolError:
    return _error(
        ErrorKind.TOO_LARGE,
        (
            f"reading the PDF needs more than {limit_bytes} bytes of memory (it decompresses "
            "to more than rypsok reads); choose another page"
        ),
        reason=DetailReason.PDF_MEMORY,
        limit_bytes=limit_bytes,
    )
