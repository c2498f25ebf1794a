"""The outbound clients of the egress component: the trust store and the fetch client.

`system_trust_context` is the one TLS configuration of every outbound HTTPS connection,
engines and fetched pages alike (deployment page, "Which certificates the fetches trust"):
the operating system's certificate store and no bundled roots, `SSL_CERT_FILE` and
`SSL_CERT_DIR` replacing the system locations when set. A store that cannot be read is
found at start: `ClientBuildError`, whose text is the sentence the command line prints.

`FetchClient` is the agent-directed client (REQ-SEC-006 to REQ-SEC-009): its transport is
an httpcore pool over `EgressBackend`, so every connection goes to an address the policy
judged; it never follows a redirect (the fetch pipeline does, hop by hop, judging each
target), reads no environment variable (no proxy, ever), keeps no cookie, and sends GET
with rypsok's own headers only. The transport refuses any other method or header and
judges the request's URL again, so that a request built by mistake elsewhere still cannot
leave the profile.

Implements REQ-PERF-001.
"""

from __future__ import annotations

import http.cookiejar
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

import httpcore
import httpx

from rypsok.core.egress.backend import EgressBackend, EgressRefused
from rypsok.core.egress.policy import Denial
from rypsok.core.egress.trust import ClientBuildError, system_trust_context
from rypsok.core.egress.vocabulary import Refusal

if TYPE_CHECKING:
    import ssl
    from collections.abc import AsyncIterator
    from types import TracebackType

    from rypsok.core.egress.backend import NetworkBackend, Resolver
    from rypsok.core.egress.policy import AdmittedURL, EgressPolicy

__all__ = [
    "DEFAULT_ACCEPT",
    "REQUEST_HEADERS",
    "ClientBuildError",
    "EgressTransport",
    "FetchClient",
    "build_fetch_client",
    "system_trust_context",
]

# What web_fetch can extract, preferred in this order (REQ-FETCH-008).
DEFAULT_ACCEPT: Final = (
    "text/html, application/xhtml+xml, text/markdown;q=0.9, text/plain;q=0.8, */*;q=0.1"
)
# The only request headers an agent-directed request may carry (REQ-SEC-009); all of them
# are rypsok's own. Host comes from the URL; Connection is httpx's own keep-alive.
REQUEST_HEADERS: Final = frozenset(
    {"host", "user-agent", "accept", "accept-encoding", "accept-language", "connection"}
)


def _map_httpcore_exception(exc: Exception) -> Exception:
    """httpcore's exception as httpx's (the most specific class first); others unchanged.
    httpx's own transport does this in `map_httpcore_exceptions`."""
    table: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
        (httpcore.ConnectTimeout, httpx.ConnectTimeout),
        (httpcore.ReadTimeout, httpx.ReadTimeout),
        (httpcore.WriteTimeout, httpx.WriteTimeout),
        (httpcore.PoolTimeout, httpx.PoolTimeout),
        (httpcore.TimeoutException, httpx.TimeoutException),
        (httpcore.ConnectError, httpx.ConnectError),
        (httpcore.ReadError, httpx.ReadError),
        (httpcore.WriteError, httpx.WriteError),
        (httpcore.NetworkError, httpx.NetworkError),
        (httpcore.ProxyError, httpx.ProxyError),
        (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
        (httpcore.LocalProtocolError, httpx.LocalProtocolError),
        (httpcore.ProtocolError, httpx.ProtocolError),
        (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    )
    for source, target in table:
        if isinstance(exc, source):
            # A fixed sentence: h11's messages quote the bytes the server sent (an illegal
            # status line, a bad header), which are external text and may not reach a log
            # or an error (REQ-PRIV-004); the original stays the cause.
            return target(f"the fetch failed: {target.__name__}")
    return exc


class _ResponseStream(httpx.AsyncByteStream):
    """An httpcore response's body as httpx reads it, httpcore's errors mapped on the way
    (httpx's own transport names the same adapter `AsyncResponseStream`)."""

    def __init__(self, stream: httpcore.Response) -> None:
        self._response = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self._response.aiter_stream()
        while True:
            try:
                chunk = await chunks.__anext__()
            except StopAsyncIteration:
                return
            except Exception as exc:
                mapped = _map_httpcore_exception(exc)
                if mapped is exc:
                    raise
                raise mapped from exc
            yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()


class EgressTransport(httpx.AsyncBaseTransport):
    """An httpx transport over an httpcore pool whose network backend is `EgressBackend`.

    httpx's own transport cannot take a network backend, hence this one (public httpcore
    API only). HTTP/1.1 only, and said so to the server: the pool sets the TLS context's ALPN
    protocols to `http/1.1` before every handshake. Connections are pooled per origin and
    each was opened to an address the policy admitted. It is the one outbound stack of the
    process: the fetch client and the engines' client each hold one (issue 19).

    `allowed_headers` is the set of request header names admitted (the fetch client's
    REQUEST_HEADERS), or None for any name (an engine's driver chooses its own). `proxy`, an
    operator's `[egress] proxy` as (URL without credentials, credentials or None), sends
    every request through that proxy (CONNECT for https); the backend then dials the proxy
    only, which the policy must admit.
    """

    def __init__(
        self,
        policy: EgressPolicy,
        *,
        ssl_context: ssl.SSLContext,
        resolver: Resolver | None = None,
        network_backend: NetworkBackend | None = None,
        max_connections: int = 16,
        allowed_headers: frozenset[str] | None = REQUEST_HEADERS,
        proxy: tuple[str, tuple[bytes, bytes] | None] | None = None,
    ) -> None:
        self._policy = policy
        self._allowed_headers = allowed_headers
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

    def _check(self, request: httpx.Request) -> None:
        if request.method != "GET":
            raise EgressRefused(Refusal.METHOD)
        allowed = self._allowed_headers
        if allowed is not None and any(name.lower() not in allowed for name in request.headers):
            raise EgressRefused(Refusal.HEADER)
        # Host is allowed only as httpx writes it from the URL: a Host set by hand would
        # send the judged connection a request for another site (or a second Host).
        if request.headers.get_list("host") != [request.url.netloc.decode("ascii")]:
            raise EgressRefused(Refusal.HEADER)
        judged = self._policy.judge_url(str(request.url), upgrade_http=False)
        if isinstance(judged, Denial):
            raise EgressRefused(judged.refusal)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self._check(request)
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = await self._pool.handle_async_request(core_request)
        except Exception as exc:
            mapped = _map_httpcore_exception(exc)
            if mapped is exc:
                raise
            raise mapped from exc
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response),
            extensions=response.extensions,
        )

    async def handle_core(self, request: httpcore.Request) -> httpcore.Response:
        """`request` as httpcore builds it, for a caller whose target is fixed by
        construction (an engine's origin): the same pool, backend and policy as every other
        request, without httpx's request and response objects around them."""
        if request.method != b"GET":
            raise EgressRefused(Refusal.METHOD)
        return await self._pool.handle_async_request(request)

    async def aclose(self) -> None:
        await self._pool.aclose()


class _NoCookiePolicy(http.cookiejar.CookiePolicy):
    """A cookie policy that accepts and returns nothing (REQ-FETCH-007)."""

    netscape = True
    rfc2965 = False
    hide_cookie2 = True

    def set_ok(self, cookie: http.cookiejar.Cookie, request: object) -> bool:
        return False

    def return_ok(self, cookie: http.cookiejar.Cookie, request: object) -> bool:
        return False

    def domain_return_ok(self, domain: str, request: object) -> bool:
        return False

    def path_return_ok(self, path: str, request: object) -> bool:
        return False


class _NoCookieJar(http.cookiejar.CookieJar):
    """A jar that stores nothing, even when asked directly; httpx copies a client's cookies
    into a fresh jar per request, so the policy alone would not keep them out."""

    def __init__(self) -> None:
        super().__init__(policy=_NoCookiePolicy())

    def set_cookie(self, cookie: http.cookiejar.Cookie) -> None:
        return None


class FetchClient:
    """The client of agent-directed requests (web_fetch and its robots.txt reads).

    `stream(target)` sends one GET for a `AdmittedURL` the policy produced and yields the
    response unread; the caller reads the body under its own bound. `http` is the
    underlying httpx client for code that needs it (its transport enforces the same
    profile). Timeouts: `connect` is LIM-F6 (the backend also caps it), the others default
    to the fetch deadline; the pipeline's own Trio deadline ends a call earlier.
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
        context = ssl_context if ssl_context is not None else system_trust_context()
        self.transport: Final = EgressTransport(
            policy,
            ssl_context=context,
            resolver=resolver,
            network_backend=network_backend,
            max_connections=max_connections,
        )
        self.timeout: Final = httpx.Timeout(
            deadline_s, connect=min(policy.connect_timeout_s, deadline_s)
        )
        self.http: Final = httpx.AsyncClient(
            transport=self.transport,
            trust_env=False,
            follow_redirects=False,
            cookies=_NoCookieJar(),
            timeout=self.timeout,
            headers={
                "User-Agent": user_agent,
                "Accept": DEFAULT_ACCEPT,
                "Accept-Encoding": "gzip, deflate",
            },
        )

    @asynccontextmanager
    async def stream(
        self,
        target: AdmittedURL,
        *,
        accept: str | None = None,
        accept_encoding: str | None = None,
        timeouts: httpx.Timeout | None = None,
    ) -> AsyncIterator[httpx.Response]:
        """One GET of `target.url`, redirects not followed, the body not read yet."""
        headers: dict[str, str] = {}
        if accept is not None:
            headers["Accept"] = accept
        if accept_encoding is not None:
            headers["Accept-Encoding"] = accept_encoding
        try:
            request = self.http.build_request(
                "GET", target.url, headers=headers, timeout=timeouts or self.timeout
            )
        except httpx.InvalidURL:
            # The policy's reading admitted a URL that httpx's cannot build: it is not sent,
            # and is answered as the refusal it is, never as an internal error.
            raise EgressRefused(Refusal.MALFORMED_URL) from None
        # The transport itself, not `http.send`: send() builds the next request of any
        # redirect even when it does not follow it, and raises on a Location it cannot read
        # (javascript:, a tab in the host, ...) before the caller sees the response. The
        # pipeline reads every Location with the policy's own reading instead (REQ-SEC-008).
        response = await self.transport.handle_async_request(request)
        response.request = request
        try:
            yield response
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

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
