"""The model of rypsok's contract: requests, responses, notices, errors and their vocabularies.

Every vocabulary a caller can observe is defined here once; schemas, validation and messages
are derived from these enumerations. Every class is a frozen attrs class so that a value that
crossed a boundary cannot change afterwards.

Implements REQ-CTX-002, REQ-SEC-001, REQ-SEC-016, REQ-ERR-002 and REQ-RUST-003.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import attrs

# Defined below the core, where the configuration can use them too; part of the model.
from rypsok.shared.jsontext import canonical_json
from rypsok.shared.vocabulary import Category, SafeSearch, TimeRange

__all__ = [
    "FAILURE_CLASSES",
    "SKIP_REASONS",
    "CallError",
    "Category",
    "DetailReason",
    "DisabledReason",
    "EngineState",
    "EngineStatus",
    "ErrorDetail",
    "ErrorKind",
    "FetchRequest",
    "FetchResponse",
    "Notice",
    "NoticeCode",
    "Outcome",
    "Reason",
    "RecentFailures",
    "SafeSearch",
    "SearchRequest",
    "SearchResponse",
    "SearchResult",
    "SecretKind",
    "StatusResponse",
    "TimeRange",
    "ToolError",
    "canonical_json",
]


class Outcome(StrEnum):
    OK = "ok"
    PARTIAL = "partial"
    EMPTY = "empty"


class ErrorKind(StrEnum):
    INVALID_REQUEST = "invalid_request"
    DENIED = "denied"
    UNAVAILABLE = "unavailable"
    REDIRECTED = "redirected"
    UNSUPPORTED_CONTENT = "unsupported_content"
    TOO_LARGE = "too_large"


class NoticeCode(StrEnum):
    ENGINE_UNAVAILABLE = "engine_unavailable"
    ENGINE_SKIPPED = "engine_skipped"
    SNIPPET_TRUNCATED = "snippet_truncated"
    TITLE_TRUNCATED = "title_truncated"
    CHARACTERS_REMOVED = "characters_removed"
    INSTRUCTION_LIKE_CONTENT = "instruction_like_content"
    RESULTS_DROPPED = "results_dropped"
    CREDENTIAL_MASKED = "credential_masked"
    EXTRACTION_PARTIAL = "extraction_partial"
    FROM_CACHE = "from_cache"
    # A PDF read in part (REQ-PDF-104): `reason` page_limit or character_limit, `count` the
    # pages read.
    DOCUMENT_PARTIAL = "document_partial"


class Reason(StrEnum):
    """The reasons a notice can carry."""

    # An engine's failure classes (REQ-ENG-006), used by engine_unavailable.
    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"
    BLOCKED = "blocked"
    PARSE_FAILURE = "parse_failure"
    AUTH_FAILURE = "auth_failure"
    REQUEST_FAILURE = "request_failure"
    # Why an engine was not asked, used by engine_skipped (RATE_LIMITED too).
    TIME_RANGE = "time_range"
    LANGUAGE = "language"
    QUERY_TOO_LONG = "query_too_long"
    COOLDOWN = "cooldown"
    # Why results were removed, used by results_dropped.
    INSTRUCTION_LIKE_CONTENT = "instruction_like_content"
    URL_TOO_LONG = "url_too_long"
    URL_INVALID = "url_invalid"
    # Which bound a document read in part reached, used by document_partial.
    PAGE_LIMIT = "page_limit"
    CHARACTER_LIMIT = "character_limit"


FAILURE_CLASSES: frozenset[Reason] = frozenset(
    {
        Reason.TIMEOUT,
        Reason.RATE_LIMITED,
        Reason.BLOCKED,
        Reason.PARSE_FAILURE,
        Reason.AUTH_FAILURE,
        Reason.REQUEST_FAILURE,
    }
)

SKIP_REASONS: frozenset[Reason] = frozenset(
    {
        Reason.TIME_RANGE,
        Reason.LANGUAGE,
        Reason.QUERY_TOO_LONG,
        Reason.COOLDOWN,
        Reason.RATE_LIMITED,
    }
)


class DetailReason(StrEnum):
    """The reasons an error's detail can carry."""

    EGRESS = "egress"
    ROBOTS_TXT = "robots_txt"
    SCHEME = "scheme"
    STRICT_MODE = "strict_mode"
    CREDENTIAL_IN_URL = "credential_in_url"
    SECRET_IN_QUERY = "secret_in_query"
    SECRET_IN_URL = "secret_in_url"
    NO_ENGINE = "no_engine"
    ALL_FAILED = "all_failed"
    RATE_LIMITED = "rate_limited"
    NETWORK = "network"
    DEADLINE = "deadline"
    HTTP_STATUS = "http_status"
    BUSY = "busy"
    MEDIA_TYPE = "media_type"
    EXTRACTION_FAILED = "extraction_failed"
    # A PDF that is not read (REQ-PDF-105): unsupported_content, or too_large for memory.
    PDF_ENCRYPTED = "pdf_encrypted"
    PDF_NO_TEXT = "pdf_no_text"
    PDF_UNREADABLE = "pdf_unreadable"
    PDF_MEMORY = "pdf_memory"


class EngineState(StrEnum):
    DISABLED = "disabled"
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class DisabledReason(StrEnum):
    DISABLED = "disabled"
    NO_CREDENTIAL = "no_credential"


class SecretKind(StrEnum):
    """The kinds of credential the secret check names (never the value)."""

    AWS_ACCESS_KEY_ID = "aws_access_key_id"
    AWS_SECRET_ACCESS_KEY = "aws_secret_access_key"
    GITHUB_TOKEN = "github_token"
    GITLAB_TOKEN = "gitlab_token"
    NPM_TOKEN = "npm_token"
    HUGGING_FACE_TOKEN = "hugging_face_token"
    SLACK_TOKEN = "slack_token"
    STRIPE_KEY = "stripe_key"
    GOOGLE_API_KEY = "google_api_key"
    OPENAI_KEY = "openai_key"
    ANTHROPIC_KEY = "anthropic_key"
    SENDGRID_KEY = "sendgrid_key"
    TELEGRAM_BOT_TOKEN = "telegram_bot_token"
    TWILIO_KEY = "twilio_key"
    JSON_WEB_TOKEN = "json_web_token"
    BEARER_TOKEN = "bearer_token"
    BASIC_AUTH = "basic_auth"
    AZURE_ACCOUNT_KEY = "azure_account_key"
    PRIVATE_KEY = "private_key"
    URL_PASSWORD = "url_password"
    PASSWORD_ASSIGNMENT = "password_assignment"


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


@attrs.frozen(kw_only=True)
class Notice:
    """What rypsok did or could not do; every field comes from a fixed vocabulary."""

    code: NoticeCode
    engine: str | None = None
    reason: Reason | None = None
    count: int | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "code": str(self.code),
                "engine": self.engine,
                "reason": None if self.reason is None else str(self.reason),
                "count": self.count,
            }
        )


@attrs.frozen(kw_only=True)
class SearchRequest:
    """A web_search call as the caller gave it; the service validates every field.

    The fields are kept as given (text, not enumerations) so that the service, not the
    transport, decides what is valid and words the error.
    """

    query: str
    category: str | None = None
    max_results: int | None = None
    language: str | None = None
    time_range: str | None = None


@attrs.frozen(kw_only=True)
class SearchResult:
    title: str
    url: str
    snippet: str
    date: str | None = None
    engines: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "title": self.title,
                "url": self.url,
                "snippet": self.snippet,
                "date": self.date,
                "engines": None if self.engines is None else list(self.engines),
            }
        )


@attrs.frozen(kw_only=True)
class SearchResponse:
    outcome: Outcome
    notices: tuple[Notice, ...] = ()
    results: tuple[SearchResult, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": str(self.outcome),
            "notices": [n.to_json() for n in self.notices],
            "results": [r.to_json() for r in self.results],
        }


@attrs.frozen(kw_only=True)
class RecentFailures:
    """The failures among an engine's last requests (LIM-S14): `requests` made (at most the
    window), `count` of them failed, and how many ended in each failure class (REQ-ENG-006),
    in the order of the class names; a class without a failure is absent."""

    requests: int
    count: int
    classes: tuple[tuple[Reason, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "count": self.count,
            "classes": {str(reason): n for reason, n in self.classes},
        }


@attrs.frozen(kw_only=True)
class EngineStatus:
    """One engine in engine_status; `recent_failures` is set for an active engine once it
    made a request (a disabled one makes none)."""

    id: str
    state: EngineState
    latency_ms: int | None = None
    reason: DisabledReason | None = None
    recent_failures: RecentFailures | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "state": str(self.state),
            "latency_ms": self.latency_ms,
        }
        if self.reason is not None:
            out["reason"] = str(self.reason)
        if self.recent_failures is not None:
            out["recent_failures"] = self.recent_failures.to_json()
        return out


@attrs.frozen(kw_only=True)
class StatusResponse:
    engines: tuple[EngineStatus, ...]
    outcome: Outcome = Outcome.OK
    notices: tuple[Notice, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": str(self.outcome),
            "notices": [n.to_json() for n in self.notices],
            "engines": [e.to_json() for e in self.engines],
        }


@attrs.frozen(kw_only=True)
class FetchRequest:
    url: str
    max_chars: int | None = None
    start_char: int | None = None


@attrs.frozen(kw_only=True)
class FetchResponse:
    url: str
    title: str
    content: str
    truncated: bool
    next_start_char: int | None = None
    outcome: Outcome = Outcome.OK
    notices: tuple[Notice, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "outcome": str(self.outcome),
            "notices": [n.to_json() for n in self.notices],
            "url": self.url,
            "title": self.title,
            "content": self.content,
            "truncated": self.truncated,
        }
        if self.next_start_char is not None:
            out["next_start_char"] = self.next_start_char
        return out


@attrs.frozen(kw_only=True)
class ErrorDetail:
    """The machine-readable part of an error; only the keys of the error's kind are set."""

    parameter: str | None = None
    min: int | None = None
    max: int | None = None
    allowed: tuple[str, ...] | None = None
    reason: DetailReason | None = None
    kind: SecretKind | None = None
    position: int | None = None
    status: int | None = None
    retry_after_ms: int | None = None
    location: str | None = None
    media_type: str | None = None
    limit_bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "parameter": self.parameter,
                "min": self.min,
                "max": self.max,
                "allowed": None if self.allowed is None else list(self.allowed),
                "reason": None if self.reason is None else str(self.reason),
                "kind": None if self.kind is None else str(self.kind),
                "position": self.position,
                "status": self.status,
                "retry_after_ms": self.retry_after_ms,
                "location": self.location,
                "media_type": self.media_type,
                "limit_bytes": self.limit_bytes,
            }
        )


MAX_MESSAGE_CHARS = 200  # LIM-I4


@attrs.frozen(kw_only=True, auto_exc=True)
class ToolError(Exception):
    """A call that ended with an error object: `{"error": {kind, message, detail}}`.

    Build one through `rypsok.core.errors`, whose constructors word the message; the
    message is rypsok's own English, never external text, at most LIM-I4 characters.
    """

    kind: ErrorKind
    message: str
    detail: ErrorDetail = attrs.field(factory=ErrorDetail)

    def __attrs_post_init__(self) -> None:
        if len(self.message) > MAX_MESSAGE_CHARS:
            raise ValueError("an error message is bounded by LIM-I4 (200 characters)")

    def to_json(self) -> dict[str, Any]:
        return {
            "error": {
                "kind": str(self.kind),
                "message": self.message,
                "detail": self.detail.to_json(),
            }
        }


# The two ways a call ends without a response: an error object, or the caller's
# cancellation (trio.Cancelled, which is never turned into an answer).
CallError = ToolError
