"""A value that must never be printed: tokens, API keys, proxy credentials.

Implements REQ-SEC-020's redaction.
"""

from __future__ import annotations

from typing import Final, final

__all__ = ["REDACTED", "Secret"]

REDACTED: Final = "[redacted]"


@final
class Secret:
    """A str that prints as ``[redacted]`` everywhere except through `reveal()`.

    It deliberately does not subclass ``str``: a ``str`` subclass would be written out in
    full by ``json.dumps``, ``"%s"`` formatting and string concatenation. Equality compares
    the values in constant time, since a token is compared against what a caller presents.
    """

    __slots__ = ("_value",)
    _value: str

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError("Secret holds a str")
        object.__setattr__(self, "_value", value)

    def reveal(self) -> str:
        """The value itself, for the one place that sends it (a header, a proxy URL)."""
        return self._value

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Secret is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Secret is immutable")

    def __repr__(self) -> str:
        return REDACTED

    def __str__(self) -> str:
        return REDACTED

    def __format__(self, format_spec: str) -> str:
        return format(REDACTED, format_spec)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        import hmac  # here, not at import: comparing secrets is rare, and hmac loads OpenSSL

        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __reduce__(self) -> tuple[type[Secret], tuple[str]]:
        # Copying a configuration must keep working; pickling is not a printing path.
        return (Secret, (self._value,))
