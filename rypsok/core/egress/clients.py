"""The agent-directed client of the egress component (REQ-SEC-006 to REQ-SEC-009).

`FetchClient` sends web_fetch's requests and its robots.txt reads. Each request is built from
the parts of an `AdmittedURL` the policy produced: the scheme, host and port the backend
connects to, and the request target written exactly as the policy wrote it, so the URL judged
is the URL sent (one URL reading). The pool is an httpcore pool over `EgressBackend`, so every
connection goes to an address the policy judged. It never follows a redirect (the fetch
pipeline does, hop by hop, judging each target), reads no environment variable (no proxy,
ever), keeps and sends no cookie (REQ-FETCH-007), and sends GET with rypsok's own headers only.

`EgressTransport` is the pool itself, shared in shape with the engines' client: each client
holds its own, with its own TLS context.

Implements REQ-PERF-001.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final, overload

import httpcore

from rypsok.core.egress.backend import EgressBackend, EgressRefused
from rypsok.core.egress.trust import ClientBuildError, client_context
from rypsok.core.egress.vocabulary import Refusal

if TYPE_CHECKING:
    import ssl
    from collections.abc import AsyncIterator, Iterable
    from types import TracebackType

    from rypsok.core.egress.backend import NetworkBackend, Resolver
    from rypsok.core.egress.policy import AdmittedURL, EgressPolicy

__all__ = [
    "CONNECT_ERRORS",
    "DEFAULT_ACCEPT",
    "TRANSPORT_ERRORS",
    "ClientBuildError",
    "EgressTransport",
    "FetchClient",
    "FetchTimeouts",
    "HttpResponse",
    "ResponseHeaders",
    "build_fetch_client",
]

# What web_fetch can extract, preferred in this order (REQ-FETCH-008).
DEFAULT_ACCEPT: Final = (
    "text/html, application/xhtml+xml, text/markdown;q=0.9, text/plain;q=0.8, */*;q=0.1"
)
_ACCEPT_ENCODING: Final = "gzip, deflate"

# The destination was not reached: refused by the policy at connect time, or the connection
# itself failed or timed out before any byte of an answer.
CONNECT_ERRORS: Final = (httpcore.ConnectError, httpcore.ConnectTimeout, EgressRefused)
# Everything the exchange can raise for a reason on the wire (never a programming error).
# Not httpcore's UnsupportedProtocol: it names a request URL whose scheme is neither http
# nor https, and every request is built from an AdmittedURL, whose scheme is one of the two.
TRANSPORT_ERRORS: Final = (
    httpcore.NetworkError,
    httpcore.TimeoutException,
    httpcore.ProtocolError,
    EgressRefused,
)

# The request body of a GET: none, and no Content-Length or Transfer-Encoding for it.
_NO_BODY: Final = b""


def _without_peer_text(exc: Exception) -> Exception:
    """`exc` again, of the same class, with rypsok's own text: httpcore's message may quote
    the bytes a server sent (a status line, a header), which must never reach a log or an
    answer (REQ-PRIV-004). A refusal's text is already rypsok's own."""
    if isinstance(exc, EgressRefused):
        return exc
    return type(exc)(f"the exchange failed ({type(exc).__name__})")


class FetchTimeouts:
    """The timeouts of one exchange, in seconds: `connect` (LIM-F6) and `read` (the time left
    of the deadline); httpcore's own timers, below the pipeline's Trio deadline."""

    __slots__ = ("connect", "read")

    def __init__(self, read: float, *, connect: float) -> None:
        self.connect: Final = connect
        self.read: Final = read

    def extension(self) -> dict[str, float]:
        return {"connect": self.connect, "read": self.read, "write": self.read, "pool": self.read}


def _field_text(value: bytes) -> str:
    # UTF-8 where the bytes are UTF-8, as a browser reads a Location's non-ASCII bytes;
    # otherwise Latin-1, which reads any byte (RFC 9110 §5.5).
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


class ResponseHeaders:
    """The header fields of an answer, names read case-insensitively."""

    __slots__ = ("_fields",)

    def __init__(self, raw: Iterable[tuple[bytes, bytes]]) -> None:
        self._fields: Final = tuple(
            (name.decode("latin-1").lower(), _field_text(value)) for name, value in raw
        )

    @overload
    def get(self, name: str) -> str | None: ...
    @overload
    def get(self, name: str, default: str) -> str: ...
    def get(self, name: str, default: str | None = None) -> str | None:
        """The first value of `name`, or `default`."""
        key = name.lower()
        for field, value in self._fields:
            if field == key:
                return value
        return default


class HttpResponse:
    """One answer: its status and headers, the body unread (`aiter_raw` yields it as it
    arrives, still content-coded)."""

    __slots__ = ("_response", "headers", "status_code")

    def __init__(self, response: httpcore.Response) -> None:
        self._response: Final = response
        self.status_code: Final = response.status
        self.headers: Final = ResponseHeaders(response.headers)

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_stream():
                yield chunk
        except TRANSPORT_ERRORS as exc:
            raise _without_peer_text(exc) from None

    async def aclose(self) -> None:
        await self._response.aclose()


class EgressTransport:
    """An httpcore pool whose network backend is `EgressBackend`.

    HTTP/1.1 only, and said so to the server: httpcore sets the TLS context's ALPN protocols
    to `http/1.1` before every handshake, which is why no two pools share a context.
    Connections are pooled per origin and each was opened to an address the policy admitted.

    `proxy`, an operator's `[egress] proxy` as (URL without credentials, credentials or
    None), sends every request through that proxy (CONNECT for https); the backend then dials
    the proxy only, which the policy must admit.
    """

    def __init__(
        self,
        policy: EgressPolicy,
        *,
        ssl_context: ssl.SSLContext,
        resolver: Resolver | None = None,
        network_backend: NetworkBackend | None = None,
        max_connections: int = 16,
        proxy: tuple[str, tuple[bytes, bytes] | None] | None = None,
    ) -> None:
        self.ssl_context: Final = ssl_context
        self.backend: Final = EgressBackend(
            policy, resolver=resolver, network_backend=network_backend
        )
        pool_options = {
            "ssl_context": ssl_context,
            "max_connections": max_connections,
            "max_keepalive_connections": max_connections,
            "keepalive_expiry": 5.0,
            "http1": True,
            "http2": False,
            "retries": 0,
            "network_backend": self.backend,
        }
        self._pool: httpcore.AsyncConnectionPool
        if proxy is None:
            self._pool = httpcore.AsyncConnectionPool(**pool_options)  # type: ignore[arg-type]
        else:
            url, auth = proxy
            self._pool = httpcore.AsyncHTTPProxy(
                proxy_url=url,
                proxy_auth=auth,
                # An https proxy is reached with the same trust as everything else.
                proxy_ssl_context=ssl_context if url.startswith("https:") else None,
                **pool_options,  # type: ignore[arg-type]
            )

    async def handle_core(self, request: httpcore.Request) -> httpcore.Response:
        """One exchange; the response's body is not read yet. GET only."""
        if request.method != b"GET":
            raise EgressRefused(Refusal.METHOD)
        return await self._pool.handle_async_request(request)

    async def aclose(self) -> None:
        await self._pool.aclose()


def fetch_request(
    target: AdmittedURL,
    *,
    user_agent: str,
    accept: str,
    timeouts: FetchTimeouts,
) -> httpcore.Request:
    """The GET of `target`, built from the parts the policy admitted: nothing is parsed
    again. The request line's target is `target.path` byte for byte, and Host is the
    admitted authority (REQ-SEC-009: rypsok's own headers only)."""
    return httpcore.Request(
        b"GET",
        httpcore.URL(
            scheme=target.scheme.encode("ascii"),
            host=target.host.encode("ascii"),
            port=target.port,
            target=target.path.encode("ascii"),
        ),
        headers=[
            (b"Host", target.authority.encode("ascii")),
            (b"User-Agent", user_agent.encode("ascii")),
            (b"Accept", accept.encode("ascii")),
            (b"Accept-Encoding", _ACCEPT_ENCODING.encode("ascii")),
        ],
        content=_NO_BODY,
        extensions={"timeout": timeouts.extension()},
    )


class FetchClient:
    """The client of agent-directed requests (web_fetch and its robots.txt reads).

    `stream(target)` sends one GET for an `AdmittedURL` and yields the response unread; the
    caller reads the body under its own bound. `deadline_s` is the read timeout of a request
    sent without its own (`timeouts`); the pipeline's Trio deadline ends a call earlier.
    """

    def __init__(
        self,
        *,
        policy: EgressPolicy,
        user_agent: str,
        ssl_context: ssl.SSLContext | None = None,
        resolver: Resolver | None = None,
        network_backend: NetworkBackend | None = None,
        max_connections: int = 16,
        deadline_s: float = 10.0,
    ) -> None:
        self.policy: Final = policy
        self._user_agent: Final = user_agent
        context = ssl_context if ssl_context is not None else client_context()
        self.transport: Final = EgressTransport(
            policy,
            ssl_context=context,
            resolver=resolver,
            network_backend=network_backend,
            max_connections=max_connections,
        )
        self.timeouts: Final = FetchTimeouts(
            deadline_s, connect=min(policy.connect_timeout_s, deadline_s)
        )

    @asynccontextmanager
    async def stream(
        self,
        target: AdmittedURL,
        *,
        accept: str = DEFAULT_ACCEPT,
        timeouts: FetchTimeouts | None = None,
    ) -> AsyncIterator[HttpResponse]:
        """One GET of `target`, redirects not followed, the body not read yet."""
        request = fetch_request(
            target,
            user_agent=self._user_agent,
            accept=accept,
            timeouts=timeouts or self.timeouts,
        )
        try:
            answer = await self.transport.handle_core(request)
        except TRANSPORT_ERRORS as exc:
            raise _without_peer_text(exc) from None
        response = HttpResponse(answer)
        try:
            yield response
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        await self.transport.aclose()

    async def __aenter__(self) -> FetchClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def build_fetch_client(
    policy: EgressPolicy,
    *,
    user_agent: str,
    resolver: Resolver | None = None,
    network_backend: NetworkBackend | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_connections: int = 16,
    deadline_s: float = 10.0,
) -> FetchClient:
    """The fetch client of a process; raises ClientBuildError when the trust store cannot
    be read (the command line prints its text and exits 1)."""
    return FetchClient(
        policy=policy,
        user_agent=user_agent,
        ssl_context=ssl_context,
        resolver=resolver,
        network_backend=network_backend,
        max_connections=max_connections,
        deadline_s=deadline_s,
    )
