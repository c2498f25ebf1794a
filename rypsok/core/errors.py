"""Constructors of every error rypsok returns, one per kind and reason.

Each message is rypsok's own English: it says what the caller can change, is at most
LIM-I4 characters, and never carries external text, a secret or an address.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rypsok.core.model import DetailReason, ErrorDetail, ErrorKind, SecretKind, ToolError

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = [
    "all_failed",
    "busy",
    "deadline_search",
    "denied_secret",
    "invalid_allowed",
    "invalid_range",
    "invalid_type",
    "no_engine",
    "no_engine_skipped",
    "rate_limited",
    "required",
]


def invalid_range(parameter: str, minimum: int, maximum: int) -> ToolError:
    return ToolError(
        kind=ErrorKind.INVALID_REQUEST,
        message=f"{parameter} must be between {minimum} and {maximum}",
        detail=ErrorDetail(parameter=parameter, min=minimum, max=maximum),
    )


def invalid_length(parameter: str, minimum: int, maximum: int) -> ToolError:
    return ToolError(
        kind=ErrorKind.INVALID_REQUEST,
        message=f"{parameter} must be {minimum} to {maximum} characters after trimming",
        detail=ErrorDetail(parameter=parameter, min=minimum, max=maximum),
    )


def invalid_allowed(parameter: str, allowed: Iterable[str]) -> ToolError:
    values = tuple(allowed)
    listed = ", ".join(values)
    message = f"{parameter} must be one of: {listed}"
    if len(message) > 200:
        message = f"{parameter} must be one of the values in detail.allowed"
    return ToolError(
        kind=ErrorKind.INVALID_REQUEST,
        message=message,
        detail=ErrorDetail(parameter=parameter, allowed=values),
    )


def invalid_type(
    parameter: str, expected: str, minimum: int | None = None, maximum: int | None = None
) -> ToolError:
    # The bounds travel in the detail too: an invalid_request carries min/max or allowed.
    return ToolError(
        kind=ErrorKind.INVALID_REQUEST,
        message=f"{parameter} must be {expected}",
        detail=ErrorDetail(parameter=parameter, min=minimum, max=maximum),
    )


def required(parameter: str) -> ToolError:
    return ToolError(
        kind=ErrorKind.INVALID_REQUEST,
        message=f"{parameter} is required",
        detail=ErrorDetail(parameter=parameter),
    )


def unknown_parameter(parameter_count: int) -> ToolError:
    # The unknown name is the caller's text: it is not repeated.
    noun = "parameter" if parameter_count == 1 else "parameters"
    return ToolError(
        kind=ErrorKind.INVALID_REQUEST,
        message=f"the call has {parameter_count} unknown {noun}; use only those of the tool",
    )


def denied_secret(reason: DetailReason, kind: SecretKind, position: int) -> ToolError:
    what = "query" if reason is DetailReason.SECRET_IN_QUERY else "url"
    return ToolError(
        kind=ErrorKind.DENIED,
        message=(
            f"the {what} looks like it carries a credential ({kind}) at character "
            f"{position}; remove it and call again"
        ),
        detail=ErrorDetail(reason=reason, kind=kind, position=position),
    )


def no_engine() -> ToolError:
    return ToolError(
        kind=ErrorKind.UNAVAILABLE,
        message="no enabled engine serves this category; choose another category",
        detail=ErrorDetail(reason=DetailReason.NO_ENGINE),
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
    return ToolError(
        kind=ErrorKind.UNAVAILABLE,
        message=message,
        detail=ErrorDetail(
            reason=DetailReason.NO_ENGINE, retry_after_ms=retry_after_ms if waiting else None
        ),
    )


def all_failed(retry_after_ms: int | None = None) -> ToolError:
    return ToolError(
        kind=ErrorKind.UNAVAILABLE,
        message="every engine asked failed; retry later",
        detail=ErrorDetail(reason=DetailReason.ALL_FAILED, retry_after_ms=retry_after_ms),
    )


def deadline_search() -> ToolError:
    return ToolError(
        kind=ErrorKind.UNAVAILABLE,
        message="no engine answered before the deadline; retry later",
        detail=ErrorDetail(reason=DetailReason.DEADLINE),
    )


def rate_limited(tool: str, retry_after_ms: int) -> ToolError:
    return ToolError(
        kind=ErrorKind.UNAVAILABLE,
        message=f"the {tool} rate limit is reached; retry later",
        detail=ErrorDetail(reason=DetailReason.RATE_LIMITED, retry_after_ms=retry_after_ms),
    )


def busy() -> ToolError:
    return ToolError(
        kind=ErrorKind.UNAVAILABLE,
        message="rypsok is at its concurrency limit; retry later",
        detail=ErrorDetail(reason=DetailReason.BUSY),
    )
