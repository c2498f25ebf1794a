"""The engines' outbound HTTP client (REQ-SEC-017, REQ-SEC-010, REQ-SEC-011, REQ-SEC-013).

One `EngineHttp` serves every engine of the process. A driver names its origin once, at
construction, as an `EngineOrigin`; every request is built from that origin, so a request
can only go to the engine's own host, and a credential header given with it can only reach
that origin (redirects are never followed). Environment proxy variables are ignored; the
operator's `[egress] proxy` is the only proxy. The body is read as a stream of raw bytes and
decompressed here, under the driver's bound, so that a small compressed answer cannot expand
past the bound in memory (a gzip bomb stops at the bound plus one step).
"""

from __future__ import annotations

import email.utils
import functools
import math
import ssl
import time
import zlib
from collections.abc import AsyncIterable
from typing import TYPE_CHECKING, Final

import attrs
import httpx
import trio

import rypsok
from rypsok.config.rules import is_loopback_host as _config_is_loopback
from rypsok.core.engines.base import EngineFailure
from rypsok.core.model import Reason

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

    import httpcore

    from rypsok.config.schema import Config

__all__ = [
    "PROJECT_URL",
    "EngineHttp",
    "EngineOrigin",
    "EngineResponse",
    "is_loopback_host",
    "parse_retry_after",
    "user_agent",
]

PROJECT_URL: Final = "https://github.com/nabbisen/rypsok"

# What the decompressor may produce in one step beyond what is still allowed; keeps the
# overshoot of a bomb to one small buffer rather than one decompressed network chunk.
_STEP_BYTES: Final = 65536
# Closing a connection and ending its stream is immediate; this only bounds a surprise,
# well inside LIM-O2's 500 ms for aborting a request.
_ABANDON_S: Final = 0.1


def user_agent(contact: str) -> str:
    """`rypsok/<version> (+<project URL>; <contact>)`, or without `; <contact>` when empty.

    REQ-CMP-004: one stable form for every request. With no contact configured the project
    URL is the only way to reach anyone, so it is sent alone rather than with an empty slot.
    """
    contact = contact.strip()
    if any(not (0x20 <= ord(c) <= 0x7E) for c in contact):
        raise ValueError("service.user_agent_contact must be printable ASCII on one line")
    if contact:
        return f"rypsok/{rypsok.__version__} (+{PROJECT_URL}; {contact})"
    return f"rypsok/{rypsok.__version__} (+{PROJECT_URL})"


def is_loopback_host(host: str) -> bool:
    """`localhost` or a loopback address literal: the configuration's own rule, reused so
    that what the loader admits for `base_url` and what this client admits are one rule."""
    return _config_is_loopback(host.rstrip("."))


@attrs.frozen(kw_only=True)
class EngineOrigin:
    """The one origin an engine talks to: https, or plain http on a loopback host only."""

    scheme: str
    host: str
    port: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.scheme == "http":
            if not is_loopback_host(self.host):
                raise ValueError("plain http is admitted for an engine on a loopback host only")
        elif self.scheme != "https":
            raise ValueError("an engine origin is https")
        if not self.host:
            raise ValueError("an engine origin needs a host")

    @classmethod
    def parse(cls, url: str) -> EngineOrigin:
        parsed = httpx.URL(url)
        return cls(scheme=parsed.scheme, host=parsed.host, port=parsed.port)

    def url(self, path: str) -> httpx.URL:
        if not path.startswith("/"):
            raise ValueError("an engine path is absolute")
        return _origin_url(self, path)


@functools.lru_cache(maxsize=1024)
def _origin_url(origin: EngineOrigin, path: str) -> httpx.URL:
    # Building an httpx.URL from parts costs tens of microseconds and every call asks for the
    # same few (origin, path) pairs; URLs are immutable, so one object serves them all. Paths
    # come from the drivers' code, never from a caller or a provider, so the set stays small.
    return httpx.URL(scheme=origin.scheme, host=origin.host, port=origin.port, path=path)


def _with_query(url: httpx.URL, params: Sequence[tuple[str, str]]) -> httpx.URL:
    """`url.copy_merge_params(params)` for a URL without a query, at half the cost.

    httpx encodes the parameters the same way (its QueryParams) and parses the result once
    instead of re-validating every part of the URL twice.
    """
    query = str(httpx.QueryParams(list(params)))
    return httpx.URL(f"{url}?{query}") if query else url


def _target(origin: EngineOrigin, path: str, params: Sequence[tuple[str, str]]) -> bytes:
    """The request target (path and query) httpx would send for `_with_query`'s URL.

    The query is httpx's own encoding (its QueryParams), which leaves only unreserved
    characters and percent escapes, so parsing it into a URL would not change a byte; the
    parse, the costliest step of building a request, is skipped.
    """
    base = origin.url(path).raw_path
    if not params:
        return base
    # Values grouped under their key's first place, as QueryParams orders them.
    grouped: dict[str, list[str]] = {}
    for key, value in params:
        grouped.setdefault(key, []).append(value)
    # A pair of unreserved characters only is its own encoding (httpx's fast path too);
    # any other pair is encoded by httpx, one pair at a time (the encoding is per pair).
    query = "&".join(
        f"{key}={value}"
        if not (key.rstrip(_UNRESERVED) or value.rstrip(_UNRESERVED))
        else str(httpx.QueryParams([(key, value)]))
        for key, values in grouped.items()
        for value in values
    )
    return base + b"?" + query.encode("ascii")


# RFC 3986's unreserved characters: never percent-encoded in a query.
_UNRESERVED: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"


@attrs.frozen(kw_only=True)
class EngineResponse:
    """A status, its headers, and for a 2xx the decompressed body (empty otherwise)."""

    status: int
    headers: httpx.Headers
    body: bytes


class _Bounded:
    """Decompresses one content coding step by step, never holding more than the bound."""

    def __init__(self, coding: str, bound: int) -> None:
        self._bound = bound
        self._count = 0
        self._parts: list[bytes] = []
        self._coding = coding
        self._raw_deflate_tried = False
        self._z: zlib._Decompress | None
        if coding in ("", "identity"):
            self._z = None
        elif coding in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(wbits=31)
        elif coding == "deflate":
            self._z = zlib.decompressobj(wbits=15)
        else:
            raise EngineFailure(failure_class=Reason.PARSE_FAILURE)

    def _take(self, data: bytes) -> None:
        self._count += len(data)
        if self._count > self._bound:
            # Over the driver's bound: the answer is not the shape the driver reads.
            raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
        if data:
            self._parts.append(data)

    def feed(self, chunk: bytes) -> None:
        if self._z is None:
            self._take(chunk)
            return
        data = chunk
        while data:
            room = self._bound - self._count + 1
            try:
                out = self._z.decompress(data, min(room, _STEP_BYTES))
            except zlib.error:
                if self._coding == "deflate" and not self._raw_deflate_tried and not self._count:
                    # Servers send "deflate" both zlib-wrapped and raw; try raw once.
                    self._raw_deflate_tried = True
                    self._z = zlib.decompressobj(wbits=-15)
                    continue
                raise EngineFailure(failure_class=Reason.PARSE_FAILURE) from None
            self._raw_deflate_tried = True
            self._take(out)
            if self._z.eof:
                return  # trailing bytes after the stream's end are ignored
            data = self._z.unconsumed_tail

    def finish(self) -> bytes:
        if self._z is not None:
            try:
                self._take(self._z.flush())
            except zlib.error:
                raise EngineFailure(failure_class=Reason.PARSE_FAILURE) from None
            if not self._z.eof:
                raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
        return b"".join(self._parts)


@functools.lru_cache(maxsize=64)
def _request_headers(agent: str, headers: tuple[tuple[str, str], ...]) -> httpx.Headers:
    """A driver's headers under rypsok's own, merged over the defaults httpx's client sent.

    A driver sends the same few headers on every request (its API key, its Accept), so the
    merge, about a tenth of a request's CPU time, is done once per set; the result is
    never modified by its users. Keyed by the headers themselves, so a key held here is
    one the configuration holds anyway.
    """
    own = httpx.Headers(list(headers))
    own["User-Agent"] = agent  # replaces any case of the name (REQ-CMP-004)
    own["Accept-Encoding"] = "gzip, deflate"  # only codings decoded under the bound
    # Merged as httpx's client merged them over its defaults: same names, same order.
    merged = httpx.Headers(
        [
            ("Accept", "*/*"),
            ("Accept-Encoding", "gzip, deflate"),
            ("Connection", "keep-alive"),
            ("User-Agent", agent),
        ]
    )
    merged.update(own)
    return merged


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The verifying TLS context every https engine shares, built on the first https request.

    Loading the certificate store takes about 100 ms; a process whose engines are all plain
    http on loopback (a private MediaWiki, the benchmarks) never pays it, and the others pay
    it once, not once per client. The same context httpx builds for `verify=True` without
    the environment.
    """
    return httpx.create_ssl_context(verify=True, trust_env=False)


def _plain_only_context() -> ssl.SSLContext:
    # Handed to the transport of plain-http requests, which never use it. No certificate
    # is loaded, so were it ever used it would refuse every handshake rather than accept one.
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class _LazyTransport(httpx.AsyncBaseTransport):
    """The production transport: httpx's own, built on first use, TLS only when needed.

    Without a proxy, plain-http requests (loopback engines only, see EngineOrigin) go
    through a pool that holds no certificate store, and https requests through a pool with
    the shared verifying context. With a proxy every request goes through the proxy's pool,
    as `httpx.AsyncClient(proxy=...)` would send it. Both pools keep connections alive.
    """

    def __init__(self, proxy: httpx.Proxy | None) -> None:
        self._proxy = proxy
        self._plain: httpx.AsyncHTTPTransport | None = None
        self._tls: httpx.AsyncHTTPTransport | None = None
        if proxy is not None and proxy.url.scheme not in ("http", "https"):
            self._pool(tls=True)  # a SOCKS proxy needs its optional package: fail now

    def _pool(self, *, tls: bool) -> httpx.AsyncHTTPTransport:
        if not tls:
            if self._plain is None:
                self._plain = httpx.AsyncHTTPTransport(
                    verify=_plain_only_context(), trust_env=False
                )
            return self._plain
        if self._tls is None:
            self._tls = httpx.AsyncHTTPTransport(
                verify=_tls_context(), trust_env=False, proxy=self._proxy
            )
        return self._tls

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        tls = self._proxy is not None or request.url.scheme != "http"
        return await self._pool(tls=tls).handle_async_request(request)

    async def aclose(self) -> None:
        for pool in (self._plain, self._tls):
            if pool is not None:
                await pool.aclose()


# What httpx's own transport hands httpcore for its default limits (httpx.Limits()).
_MAX_CONNECTIONS: Final = 100
_MAX_KEEPALIVE: Final = 20
_KEEPALIVE_EXPIRY_S: Final = 5.0


@functools.cache
def _timeout_errors() -> tuple[type[Exception], ...]:
    """httpx's and httpcore's timeouts.

    httpcore is imported by the first request, as httpx's own transport imports it: about
    20 ms of a start that a host's handshake does not need (decisions.md, issue 7).
    """
    import httpcore

    return (httpx.TimeoutException, httpcore.TimeoutException)


@functools.cache
def _failure_errors() -> tuple[type[Exception], ...]:
    """Every other failure httpx or httpcore raises for a request that was not heard."""
    import httpcore

    return (
        httpx.HTTPError,
        httpcore.NetworkError,
        httpcore.ProtocolError,
        httpcore.ProxyError,
        httpcore.UnsupportedProtocol,
    )


class _CorePools:
    """The production path without a proxy: httpcore's pools driven directly.

    The same pools, TLS contexts and limits `_LazyTransport` gives httpx's transport, without
    the httpx request and response objects around each exchange (about a quarter of a
    request's CPU time): plain-http requests (loopback engines only, see EngineOrigin) use a
    pool whose context holds no certificate, https requests the shared verifying context.
    """

    def __init__(self) -> None:
        self._plain: httpcore.AsyncConnectionPool | None = None
        self._tls: httpcore.AsyncConnectionPool | None = None

    def pool(self, *, tls: bool) -> httpcore.AsyncConnectionPool:
        if tls:
            if self._tls is None:
                self._tls = _core_pool(_tls_context())
            return self._tls
        if self._plain is None:
            self._plain = _core_pool(_plain_only_context())
        return self._plain

    async def aclose(self) -> None:
        for pool in (self._plain, self._tls):
            if pool is not None:
                await pool.aclose()


def _core_pool(context: ssl.SSLContext) -> httpcore.AsyncConnectionPool:
    import httpcore

    return httpcore.AsyncConnectionPool(
        ssl_context=context,
        max_connections=_MAX_CONNECTIONS,
        max_keepalive_connections=_MAX_KEEPALIVE,
        keepalive_expiry=_KEEPALIVE_EXPIRY_S,
        http1=True,
        http2=False,
        retries=0,
    )


class EngineHttp:
    """The outbound client of every engine driver.

    `transport` is for tests and the conformance harness only: when it is set, every request
    goes through it (and the configured proxy is not used); production never sets it.
    `total_timeout_ms` (LIM-S5) bounds one request even when the caller set no deadline; the
    caller's own cancel scope, when earlier, wins and its cancellation passes through.
    """

    def __init__(
        self,
        *,
        contact: str = "",
        connect_timeout_ms: int = 1000,
        total_timeout_ms: int = 2000,
        outbound_in_flight: int = 32,
        proxy: str = "",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.user_agent: Final = user_agent(contact)
        self._connect_s = connect_timeout_ms / 1000
        self._total_s = total_timeout_ms / 1000
        self._outbound_max = outbound_in_flight
        self._outbound = trio.Semaphore(outbound_in_flight)  # LIM-C1
        # Without a proxy or an injected transport, requests go to httpcore's pools directly.
        self._core: _CorePools | None = None
        if transport is None:
            if not proxy:
                self._core = _CorePools()
            try:
                transport = _LazyTransport(httpx.Proxy(proxy) if proxy else None)
            except (ValueError, TypeError, httpx.InvalidURL):
                # The proxy URL may carry credentials: never repeat it.
                raise ValueError("egress.proxy is not a usable proxy URL") from None
        # No httpx.AsyncClient: it would keep the cookies engines set and send them back,
        # and its request building, redirect and auth layers cost about a third of a
        # request's CPU time here. Requests go to the transport directly, with the headers
        # the client would have sent (less the cookies).
        self._transport = transport
        self._closed = False

    @classmethod
    def from_config(
        cls, config: Config, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> EngineHttp:
        return cls(
            contact=config.service.user_agent_contact,
            connect_timeout_ms=config.search.connect_timeout_ms,
            total_timeout_ms=config.search.engine_timeout_ms,
            outbound_in_flight=config.limits.outbound_in_flight,
            proxy=config.egress.proxy,
            transport=transport,
        )

    @property
    def in_flight(self) -> int:
        """Outbound requests holding a permit now (for tests and statistics)."""
        return self._outbound_max - self._outbound.value

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._transport.aclose()
            if self._core is not None:
                await self._core.aclose()

    async def __aenter__(self) -> EngineHttp:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def get(
        self,
        origin: EngineOrigin,
        path: str,
        *,
        params: Sequence[tuple[str, str]],
        headers: Mapping[str, str],
        max_bytes: int,
    ) -> EngineResponse:
        """One GET to `origin`; raises EngineFailure(timeout | request_failure | parse_failure).

        A 3xx is returned as it is (the driver classifies it) and is never followed.
        """
        # rypsok's own headers last: a driver cannot change the User-Agent (REQ-CMP-004)
        # nor ask for a coding this client does not decode under the bound.
        if self._closed:
            raise RuntimeError("the engines' HTTP client is closed")
        request_headers = _request_headers(self.user_agent, tuple(headers.items()))
        with trio.move_on_after(self._total_s):
            try:
                # A free permit (LIM-C1) is taken without a scheduling round.
                try:
                    self._outbound.acquire_nowait()
                except trio.WouldBlock:
                    await self._outbound.acquire()
                try:
                    if self._core is not None:
                        target = _target(origin, path, params)
                        return await self._exchange_core(origin, target, request_headers, max_bytes)
                    url = _with_query(origin.url(path), params)
                    return await self._exchange(url, request_headers, max_bytes)
                finally:
                    self._outbound.release()
            except _timeout_errors():
                raise EngineFailure(failure_class=Reason.TIMEOUT) from None
            except _failure_errors():
                # Connection refused, reset, TLS, protocol errors: the provider was not heard.
                raise EngineFailure(failure_class=Reason.REQUEST_FAILURE) from None
        # Only our own scope ends the block without a return: the total (LIM-S5) ran out.
        raise EngineFailure(failure_class=Reason.TIMEOUT)

    def _timeout(self) -> dict[str, float]:
        # httpx needs numbers; the read timeout is the time left of the total (REQ-SEC-011).
        left = trio.current_effective_deadline() - trio.current_time()
        if math.isinf(left):
            left = self._total_s
        left = max(left, 0.001)
        # The request extension httpx.Timeout.as_dict() gives, without the object.
        return {"connect": min(self._connect_s, left), "read": left, "write": left, "pool": left}

    async def _exchange(
        self, url: httpx.URL, headers: httpx.Headers, max_bytes: int
    ) -> EngineResponse:
        request = httpx.Request(
            "GET", url, headers=headers, extensions={"timeout": self._timeout()}
        )
        # Never a redirect followed: the transport answers this one request only.
        response = await self._transport.handle_async_request(request)
        try:
            if not 200 <= response.status_code < 300:
                return EngineResponse(
                    status=response.status_code, headers=response.headers, body=b""
                )
            if response.is_stream_consumed:
                # An injected transport (httpx.MockTransport, the conformance harness) may
                # hand back a response it already read and decoded: bound what it holds.
                content = response.content
                if len(content) > max_bytes:
                    raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
                return EngineResponse(
                    status=response.status_code, headers=response.headers, body=content
                )
            body = _bounded_body(response.headers, max_bytes)
            chunks = response.aiter_raw()
            try:
                async for chunk in chunks:
                    body.feed(chunk)
            except BaseException:
                await _abandon(response, chunks)
                raise
            return EngineResponse(
                status=response.status_code, headers=response.headers, body=body.finish()
            )
        finally:
            await response.aclose()

    async def _exchange_core(
        self, origin: EngineOrigin, target: bytes, headers: httpx.Headers, max_bytes: int
    ) -> EngineResponse:
        """`_exchange` through httpcore's pool: the same request bytes, read the same way."""
        import httpcore

        assert self._core is not None
        url = origin.url("/")  # cached; its scheme, host and port are the origin's
        # Host first, from the URL, as httpx.Request adds it.
        raw_headers = [(b"Host", url.netloc), *headers.raw]
        request = httpcore.Request(
            b"GET",
            httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=target),
            headers=raw_headers,
            extensions={"timeout": self._timeout()},
        )
        pool = self._core.pool(tls=origin.scheme != "http")
        response = await pool.handle_async_request(request)
        try:
            response_headers = httpx.Headers(response.headers)
            if not 200 <= response.status < 300:
                return EngineResponse(status=response.status, headers=response_headers, body=b"")
            body = _bounded_body(response_headers, max_bytes)
            stream = response.stream
            assert isinstance(stream, AsyncIterable)
            chunks = aiter(stream)
            try:
                async for chunk in chunks:
                    body.feed(chunk)
            except BaseException:
                await _abandon_core(response, chunks)
                raise
            return EngineResponse(
                status=response.status, headers=response_headers, body=body.finish()
            )
        finally:
            await response.aclose()


def _bounded_body(headers: httpx.Headers, max_bytes: int) -> _Bounded:
    declared = headers.get("content-length")
    coding = headers.get("content-encoding", "").strip().lower()
    # A declared length above the bound ends the read early; below it, it is not trusted:
    # the count of bytes received decides (REQ-SEC-010).
    if not coding and declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
    return _Bounded(coding, max_bytes)


async def _abandon_core(response: httpcore.Response, chunks: AsyncIterator[bytes]) -> None:
    """`_abandon` for httpcore's stream: close the connection, then let the chain end."""
    with trio.CancelScope(shield=True):
        with trio.move_on_after(_ABANDON_S):
            await response.aclose()
            try:
                async for _ in chunks:
                    pass
            except _timeout_errors() + _failure_errors():
                pass


async def _abandon(response: httpx.Response, chunks: AsyncIterator[bytes]) -> None:
    """Stop a body read half-way: close the connection, then let the stream end.

    httpx reads a body through a chain of async generators; leaving it suspended would
    leave each one to the garbage collector. Once the connection is closed the next step
    of the chain fails at once, which finishes every generator of it. Shielded and short,
    so that a cancelled read still cleans up and never waits on the network.
    """
    with trio.CancelScope(shield=True):
        with trio.move_on_after(_ABANDON_S):
            await response.aclose()
            try:
                async for _ in chunks:
                    pass
            except httpx.HTTPError:
                pass


# A provider's wait is honoured up to LIM-B3's maximum by the circuit; a day is far above
# any maximum and keeps an absurd value from becoming an absurd float.
_MAX_WAIT_S: Final = 86400.0


def parse_retry_after(headers: httpx.Headers, *, now_unix: float | None = None) -> float | None:
    """Seconds from a Retry-After header: delta-seconds or an HTTP-date; None if absent or bad.

    An HTTP-date is measured against the response's own Date header when it has one (both
    clocks are the provider's), otherwise against this host's clock.
    """
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(int(value)), _MAX_WAIT_S)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    reference = now_unix if now_unix is not None else time.time()
    date = headers.get("date")
    if date is not None:
        try:
            served = email.utils.parsedate_to_datetime(date)
            if served.tzinfo is not None:
                reference = served.timestamp()
        except (TypeError, ValueError, IndexError):
            pass
    return min(max(when.timestamp() - reference, 0.0), _MAX_WAIT_S)
