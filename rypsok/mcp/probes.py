"""The requests the listener answers without a caller's token by design, judged once for
both who ask: the app's routing (`rypsok.mcp.http_app`, `rypsok.mcp.health`) and the room
made at the connection cap (`rypsok.mcp.listener.admission`), which reads a head's raw bytes
before hypercorn parses them.

A health probe is a `GET` or `HEAD` of `/healthz` or `/readyz`; a CORS preflight is an
`OPTIONS` with an `Access-Control-Request-Method` field (Fetch standard). The path is the one
the app routes: the request-target as the listener's framing passes it on
(`rypsok.mcp.http_framing`: the absolute form made origin form), its query cut off and its
percent-escapes decoded as hypercorn decodes them into the ASGI scope's `path`. So
`/healthz?x=1`, `/%68ealthz` and `http://host/readyz` are probes, and `/healthz/`, `//healthz`
and `/HEALTHZ` are not: the app asks those for a token as any other path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final
from urllib.parse import unquote

from rypsok.mcp.http_framing import Http1RequestParser
from rypsok.mcp.http_request import HEADER_BLOCK_BYTES

if TYPE_CHECKING:
    from collections.abc import Container

__all__ = [
    "HEALTHZ",
    "HEALTH_PATHS",
    "PROBE_METHODS",
    "READYZ",
    "is_preflight",
    "is_probe",
    "needs_no_token",
    "routed_path",
]

HEALTHZ: Final = "/healthz"
READYZ: Final = "/readyz"
HEALTH_PATHS: Final = frozenset({HEALTHZ, READYZ})
PROBE_METHODS: Final = frozenset({"GET", "HEAD"})
_PREFLIGHT_FIELD: Final = b"access-control-request-method"
# The methods of the requests judged here, as a request line begins (methods are
# case-sensitive, and the framing refuses a lower-case one): any other head is judged
# without a parse, so that a tokenless flood costs no more than a prefix each.
_EXEMPT_STARTS: Final = (b"GET ", b"HEAD ", b"OPTIONS ")


def is_probe(method: str, path: str) -> bool:
    """Whether a request (its method, its routed path) is a health probe."""
    return method in PROBE_METHODS and path in HEALTH_PATHS


def is_preflight(method: str, fields: Container[bytes]) -> bool:
    """Whether a request (its method, its lower-case field names) is a CORS preflight."""
    return method == "OPTIONS" and _PREFLIGHT_FIELD in fields


def routed_path(target: bytes) -> str:
    """The path hypercorn gives the app (the ASGI scope's `path`) for an origin-form
    request-target: the part before the query, percent-escapes decoded (UTF-8)."""
    return unquote(target.partition(b"?")[0].decode("ascii"))


def needs_no_token(head: bytes) -> bool:
    """Whether a whole HTTP/1 request head as the peer sent it (without the blank line that
    ends it) is a health probe or a CORS preflight as the app will route it. A head the
    framing refuses is neither: it is answered 400 before it reaches the app."""
    if not head.lstrip(b"\r\n").startswith(_EXEMPT_STARTS):
        return False
    # The very framing the connection's bytes go through, so that the method, the target
    # (the absolute form made origin form) and the fields are those hypercorn will read.
    framing = Http1RequestParser(HEADER_BLOCK_BYTES)
    passed = framing.feed(head + b"\r\n\r\n")
    if framing.refused is not None:
        return False
    line, _, fields = passed.partition(b"\r\n")
    method_bytes, target, _ = line.split(b" ")
    method = method_bytes.decode("ascii")
    if is_probe(method, routed_path(target)):
        return True
    names = {field.partition(b":")[0] for field in fields.split(b"\r\n")}
    return is_preflight(method, names)
