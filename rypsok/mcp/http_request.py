"""The checks on one HTTP request before its JSON-RPC message is read: its parts
(`Request`), the answers other than 200 decided on the way (`Refused`), and the rules of the
contract's headers (Host, Origin, Accept, Content-Type, the 2026-07-28 protocol headers).

Implements REQ-SEC-022.
"""

from __future__ import annotations

import binascii
import re
from base64 import b64decode
from typing import TYPE_CHECKING, Any, Final

from rypsok.config.rules import parse_bind
from rypsok.mcp.protocol import jsonrpc
from rypsok.mcp.protocol.dispatch import META_CAPABILITIES, META_CLIENT, META_VERSION

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, MutableMapping

    import trio

    from rypsok.config.schema import Config

    Scope = MutableMapping[str, Any]
    Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]

__all__ = [
    "CONNECTION_CANCELS",
    "CONNECTION_CLAIM",
    "CORS_EXPOSED",
    "CORS_PREFLIGHT",
    "EXPECT_CONTINUE",
    "HEADER_BLOCK_BYTES",
    "HEADER_MISMATCH",
    "JSON",
    "MCP_PATH",
    "RETRY_AFTER_S",
    "SSE",
    "BadHeader",
    "PeerGone",
    "Refused",
    "Request",
    "accepted_types",
    "address_family",
    "allowed_hosts",
    "check_modern_headers",
    "is_json_content",
    "is_modern",
    "origin_allowed",
    "refusal",
    "reply_status",
]

MCP_PATH: Final = "/mcp"
HEADER_BLOCK_BYTES: Final = 16384  # LIM-H7, fixed
# Set in the scope by the listener when it cancels the request itself as soon as the peer
# closes the connection (HTTP/1, one request at a time), so the app need not watch for it:
# a set into which the app puts the request's cancel scope while it runs.
CONNECTION_CANCELS: Final = "rypsok.connection_cancels"
HEADER_MISMATCH: Final = -32020  # 2026-07-28, HeaderMismatch
RETRY_AFTER_S: Final = b"30"
_SENTINEL_START: Final = "=?base64?"
_SENTINEL_END: Final = "?="
JSON: Final = b"application/json"
# Outside RFC 9110's field value (visible ASCII, space, tab).
_INVALID_FIELD_BYTE: Final = re.compile(rb"[^\t\x20-\x7e]")
SSE: Final = b"text/event-stream"
_LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "[::1]")

# Set in the scope by the listener: the connection's claim by a caller (`Listener.claim`),
# and (HTTP/1) what sends `100 Continue` once the gate has decided to read the body.
CONNECTION_CLAIM: Final = "rypsok.connection_claim"
EXPECT_CONTINUE: Final = "rypsok.expect_continue"
# CORS: what a browser host of a listed origin may send and read.
_CORS_METHODS: Final = b"POST, DELETE"
_CORS_REQUEST_HEADERS: Final = (
    b"authorization, content-type, accept, mcp-protocol-version, mcp-method, mcp-name, "
    b"mcp-session-id, last-event-id"
)
CORS_EXPOSED: Final = b"mcp-session-id, www-authenticate, retry-after"
_CORS_MAX_AGE_S: Final = b"600"
CORS_PREFLIGHT: Final = (
    (b"access-control-allow-methods", _CORS_METHODS),
    (b"access-control-allow-headers", _CORS_REQUEST_HEADERS),
    (b"access-control-max-age", _CORS_MAX_AGE_S),
)


def address_family(host: str | None) -> str:
    """`ipv6` or `ipv4`: what the log may say about a peer's address."""
    return "ipv6" if host is not None and ":" in host else "ipv4"


class Refused(Exception):
    """An HTTP answer other than 200 decided before the call runs."""

    def __init__(
        self,
        status: int,
        *,
        reason: str | None = None,
        body: dict[str, Any] | None = None,
        headers: tuple[tuple[bytes, bytes], ...] = (),
    ) -> None:
        super().__init__(status)
        self.status = status
        self.reason = reason
        self.body = body
        self.headers = headers


def refusal(
    status: int,
    code: int,
    message: str,
    *,
    reason: str | None = None,
    request_id: jsonrpc.RequestId | None = None,
    headers: tuple[tuple[bytes, bytes], ...] = (),
    data: dict[str, Any] | None = None,
) -> Refused:
    body = jsonrpc.error_response(request_id, code, message, data)
    return Refused(status, reason=reason, body=body, headers=headers)


class PeerGone(Exception):
    """The client closed its side: nobody is left to answer."""


_ACCEPT_CACHE: dict[bytes, frozenset[bytes]] = {}
_ACCEPT_CACHE_SIZE: Final = 64


def accepted_types(accept: bytes) -> frozenset[bytes]:
    """`_media_types`, remembered for the few Accept values clients send over and over."""
    found = _ACCEPT_CACHE.get(accept)
    if found is None:
        found = frozenset(_media_types(accept))
        if len(_ACCEPT_CACHE) >= _ACCEPT_CACHE_SIZE:
            _ACCEPT_CACHE.clear()  # bounded: a client varying its header gains nothing
        _ACCEPT_CACHE[accept] = found
    return found


def _media_types(accept: bytes) -> set[bytes]:
    """The media types an Accept header lists with a q above 0, in lower case."""
    found: set[bytes] = set()
    for item in accept.lower().split(b","):
        parts = [p.strip() for p in item.split(b";")]
        if not parts[0]:
            continue
        acceptable = True
        for param in parts[1:]:
            name, _, value = param.partition(b"=")
            if name.strip() == b"q":
                try:
                    acceptable = float(value.strip()) > 0
                except ValueError:
                    acceptable = False
        if acceptable:
            found.add(parts[0])
    return found


def is_json_content(content_type: bytes | None) -> bool:
    if content_type is None:
        return False
    return content_type.split(b";", 1)[0].strip().lower() == JSON


class BadHeader(Exception):
    pass


_HEADER_TEXTS: dict[bytes, str] = {}
_HEADER_TEXTS_SIZE: Final = 64


def header_text(value: bytes, name: str) -> str:
    """`_decode_header`, remembered for the few values (revision, method, tool name) clients
    send over and over; a value that fails is decoded, and refused, every time."""
    text = _HEADER_TEXTS.get(value)
    if text is None:
        text = _decode_header(value, name)
        if len(_HEADER_TEXTS) >= _HEADER_TEXTS_SIZE:
            _HEADER_TEXTS.clear()  # bounded: a client varying its headers gains nothing
        _HEADER_TEXTS[value] = text
    return text


def _decode_header(value: bytes, name: str) -> str:
    """A protocol header's value, decoded from the `=?base64?…?=` form when it has it."""
    if not value.isascii():
        raise BadHeader(f"{name} is not ASCII")
    if _INVALID_FIELD_BYTE.search(value):
        raise BadHeader(f"{name} has invalid characters")
    text = value.decode("ascii")
    if text.startswith(_SENTINEL_START) and text.endswith(_SENTINEL_END) and len(text) >= 11:
        encoded = text[len(_SENTINEL_START) : -len(_SENTINEL_END)]
        try:
            return b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise BadHeader(f"{name} is not valid base64 UTF-8") from None
    return text


class Request:
    """The parts of one HTTP request the handler reads."""

    __slots__ = (
        "body_unread",
        "claim",
        "connection_cancels",
        "cors",
        "expect_continue",
        "family",
        "head_bytes",
        "headers",
        "method",
        "path",
    )

    def __init__(self, scope: Scope) -> None:
        self.connection_cancels: set[trio.CancelScope] | None = scope.get(CONNECTION_CANCELS)
        self.claim: Callable[[str], bool] | None = scope.get(CONNECTION_CLAIM)
        self.expect_continue: Callable[[], Awaitable[None]] | None = scope.get(EXPECT_CONTINUE)
        self.cors: tuple[tuple[bytes, bytes], ...] = ()
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        client = scope.get("client")
        self.family = address_family(client[0] if client else None)
        headers: dict[bytes, bytes | None] = {}
        # The request line and the header block as HTTP/1 writes them (LIM-H7).
        size = len(self.method) + len(scope.get("raw_path") or b"") + len(scope["query_string"])
        size += 14
        for name, value in scope["headers"]:
            size += len(name) + len(value) + 4
            # A repeated header is ambiguous: recorded as None, which no check accepts.
            headers[name] = None if name in headers else value
        self.headers = headers
        self.head_bytes = size + 2
        # A body announced and not yet read to its end (`McpHttpApp._body` reads it).
        length = headers.get(b"content-length")
        self.body_unread = b"transfer-encoding" in headers or (
            length is not None and length.strip() not in (b"", b"0")
        )

    def closing(self, headers: tuple[tuple[bytes, bytes], ...]) -> tuple[tuple[bytes, bytes], ...]:
        """`headers` of an answer sent before the request's body was read, with HTTP/1's
        `Connection: close`: the connection ends with the answer instead of reading a body
        nobody wants (a refused peer would otherwise hold its connection, unable to be
        closed for room, as long as it trickles that body). HTTP/2 ends the stream alone."""
        if not self.body_unread or self.connection_cancels is None:
            return headers
        if any(name == b"connection" for name, _ in headers):
            return headers
        return (*headers, (b"connection", b"close"))

    def disconnect_watch(self, receive: Receive) -> Receive | None:
        """What a call watches for its peer going away: nothing when the listener cancels
        the request itself once the connection closes (HTTP/1, `CONNECTION_CANCELS`);
        `receive` otherwise (HTTP/2, where the stream's reset comes through it)."""
        return None if self.connection_cancels is not None else receive


def allowed_hosts(config: Config, bound_port: int | None) -> frozenset[bytes]:
    """The Host values a request may carry: `allowed_hosts`, else the loopback names and
    the bound address, each with and without its port."""
    http = config.service.http
    if http.allowed_hosts:
        return frozenset(h.lower().encode("ascii") for h in http.allowed_hosts)
    # Empty: the loopback names, and the address the listener is bound to, with or
    # without its port (DNS rebinding: a foreign name pointing at us is refused).
    bind = parse_bind(http.bind)
    port = bind.port if bound_port is None else bound_port
    host = f"[{bind.host}]" if bind.host.version == 6 else str(bind.host)
    names = {*_LOOPBACK_NAMES, host}
    allowed: set[bytes] = set()
    for name in names:
        allowed.add(name.encode("ascii"))
        allowed.add(f"{name}:{port}".encode("ascii"))
    return frozenset(allowed)


def origin_allowed(origins: tuple[str, ...], origin: bytes) -> bool:
    """Whether `origin` is one of `allowed_origins` (lower case; `:*` for any port)."""
    text = origin.decode("latin-1").lower()
    for allowed in origins:
        if allowed.endswith(":*"):
            base = allowed[:-2]
            if text == base or (text.startswith(base + ":") and text[len(base) + 1 :].isdigit()):
                return True
        elif text == allowed:
            return True
    return False


def check_modern_headers(request: Request, message: jsonrpc.Request) -> None:
    """A 2026-07-28 request's metadata and protocol headers, against its body."""
    problem = meta_problem(message)
    if problem is not None:
        # The request names the stateless revision (header or body) without the metadata
        # it requires: Invalid params, and 400 since nothing was served.
        raise refusal(
            400, jsonrpc.INVALID_PARAMS, f"Invalid params: {problem}",
            reason="sdk_bad_request", request_id=message.id,
        )  # fmt: skip
    try:
        _compare_headers(request, message)
    except BadHeader as exc:
        raise refusal(
            400, HEADER_MISMATCH, f"Header mismatch: {exc}",
            reason="sdk_bad_request", request_id=message.id,
        ) from None  # fmt: skip


def _compare_headers(request: Request, message: jsonrpc.Request) -> None:
    def mismatch(what: str) -> Refused:
        return refusal(
            400, HEADER_MISMATCH, f"Header mismatch: {what}",
            reason="sdk_bad_request", request_id=message.id,
        )  # fmt: skip

    params = message.params or {}
    meta = params.get("_meta")
    body_version = meta.get(META_VERSION) if isinstance(meta, dict) else None
    version = request.headers.get(b"mcp-protocol-version")
    if version is None:
        raise mismatch("MCP-Protocol-Version is missing")
    if header_text(version, "MCP-Protocol-Version") != body_version:
        raise mismatch("MCP-Protocol-Version does not match the body's protocolVersion")
    method = request.headers.get(b"mcp-method")
    if method is None:
        raise mismatch("Mcp-Method is missing")
    if header_text(method, "Mcp-Method") != message.method:
        raise mismatch("Mcp-Method does not match the body's method")
    if message.method == "tools/call":
        name = request.headers.get(b"mcp-name")
        if name is None:
            raise mismatch("Mcp-Name is missing")
        if header_text(name, "Mcp-Name") != params.get("name"):
            raise mismatch("Mcp-Name does not match the body's params.name")


def meta_problem(message: jsonrpc.Request) -> str | None:
    """What the per-request metadata of 2026-07-28 lacks, or None."""
    meta = (message.params or {}).get("_meta")
    if not isinstance(meta, dict):
        return "params._meta is required (an object)"
    if not isinstance(meta.get(META_VERSION), str):
        return f"_meta must carry {META_VERSION}, a string"
    if not isinstance(meta.get(META_CAPABILITIES), dict):
        return f"_meta must carry {META_CAPABILITIES}, an object"
    info = meta.get(META_CLIENT)
    if META_CLIENT in meta and not (
        isinstance(info, dict)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("version"), str)
    ):
        return f"{META_CLIENT} needs a name and a version"
    return None


def is_modern(message: jsonrpc.Message) -> bool:
    if not isinstance(message, jsonrpc.Request) or message.params is None:
        return False
    meta = message.params.get("_meta")
    return isinstance(meta, dict) and META_VERSION in meta


def reply_status(payload: dict[str, Any], *, modern: bool) -> int:
    error = payload.get("error")
    if not isinstance(error, dict) or not modern:
        return 200
    code = error.get("code")
    if code == jsonrpc.METHOD_NOT_FOUND:
        return 404
    if code in (jsonrpc.UNSUPPORTED_PROTOCOL_VERSION, HEADER_MISMATCH):
        return 400
    return 200
