"""The engines' outbound HTTP client (REQ-SEC-017, REQ-SEC-010, REQ-SEC-011, REQ-SEC-013).

One `EngineHttp` serves every engine of the process. A driver names its origin once, at
construction, as an `EngineOrigin`; every request is built from that origin, so a request
can only go to the engine's own host, and a credential header given with it can only reach
that origin (redirects are never followed). Environment proxy variables are ignored; the
operator's `[egress] proxy` is the only proxy. The body is read as a stream of raw bytes and
decompressed as it comes (`rypsok.core.decoding`), under the driver's bound, so that a small
compressed answer cannot expand past the bound in memory (a gzip bomb stops one byte past it).

Implements REQ-RES-007, REQ-RES-008 and LIM-S12.
"""

from __future__ import annotations

import functools
import math
import re
import time
from typing import TYPE_CHECKING, Final, TypeVar
from urllib.parse import quote_plus

import attrs
import trio

from rypsok.core.decoding import BoundedDecoder, OverBound, UnreadableCoding
from rypsok.core.egress.policy import engine_origin_refusal
from rypsok.core.egress.trust import system_trust_context
from rypsok.core.egress.vocabulary import Refusal
from rypsok.core.engines.base import EngineFailure
from rypsok.core.engines.wire import (
    ConnectTimedOut,
    Exchange,
    OriginKey,
    Wire,
    WireFailure,
    host_header,
)
from rypsok.core.model import Reason
from rypsok.core.turns import take
from rypsok.shared.version import __version__

# httpx is imported where it is used, not here: the engines talk through `Wire`, and serving
# starts without httpx unless a base_url or an injected transport needs it. EngineResponse's
# field type is a name only: attrs never evaluates it.
if TYPE_CHECKING:
    import http.cookiejar
    from collections.abc import AsyncIterator, Callable, Mapping, Sequence

    import httpx  # noqa: TC004

    from rypsok.config.schema import Config

__all__ = [
    "PROJECT_URL",
    "EngineHttp",
    "EngineOrigin",
    "EngineResponse",
    "is_loopback_host",
    "origin_text",
    "parse_retry_after",
    "url_text",
    "user_agent",
]

_T = TypeVar("_T")
# Answers up to this size are decoded on the event loop (see `EngineHttp.off_loop`).
_INLINE_BYTES: Final = 65536

PROJECT_URL: Final = "https://github.com/nabbisen/rypsok"

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
        return f"rypsok/{__version__} (+{PROJECT_URL}; {contact})"
    return f"rypsok/{__version__} (+{PROJECT_URL})"


def is_loopback_host(host: str) -> bool:
    """`localhost` or a loopback address literal, judged by the egress component's table
    (REQ-SEC-005): plain http to such a host is the engine profile's only exception."""
    return engine_origin_refusal("http", host) is None


@attrs.frozen(kw_only=True)
class EngineOrigin:
    """The one origin an engine talks to: https, or plain http on a loopback host only."""

    scheme: str
    host: str
    port: int | None = None

    def __attrs_post_init__(self) -> None:
        # The engine profile of the egress component (REQ-SEC-005, REQ-SEC-017).
        refusal = engine_origin_refusal(self.scheme, self.host)
        if refusal is Refusal.MALFORMED_HOST:
            raise ValueError("an engine origin needs a host")
        if refusal is not None and self.scheme == "http":
            raise ValueError("plain http is admitted for an engine on a loopback host only")
        if refusal is not None:
            raise ValueError("an engine origin is https")

    @classmethod
    def parse(cls, url: str) -> EngineOrigin:
        import httpx

        parsed = httpx.URL(url)
        return cls(scheme=parsed.scheme, host=parsed.host, port=parsed.port)

    def url(self, path: str) -> httpx.URL:
        if not path.startswith("/"):
            raise ValueError("an engine path is absolute")
        import httpx

        return httpx.URL(scheme=self.scheme, host=self.host, port=self.port, path=path)


@functools.lru_cache(maxsize=256)
def url_text(origin: EngineOrigin, path: str) -> str:
    """`origin.url(path)` as text; kept, as drivers build their result URLs on it."""
    return str(origin.url(path))


def origin_text(origin: EngineOrigin) -> str:
    """The origin as the start of a URL, without a trailing slash."""
    return url_text(origin, "/").rstrip("/")


@attrs.frozen(kw_only=True)
class EngineResponse:
    """A status, its headers, and for a 2xx the decompressed body (empty otherwise)."""

    status: int
    headers: httpx.Headers
    body: bytes


def _bounded_body(
    declared: str | bytes | None, coding: str, max_bytes: int, parts: list[bytes]
) -> BoundedDecoder:
    """The decoder of one 2xx body, appending its pieces to `parts`; PARSE_FAILURE at once when
    an identity body declares more than the bound, or the coding is not one rypsok reads. A
    smaller declared length is not trusted: the count of bytes received decides (REQ-SEC-010).
    Past the bound, or where the stream does not decode, the decoder raises OverBound or
    UnreadableCoding, which `EngineHttp.get` turns into PARSE_FAILURE: over the driver's
    bound, the answer is not the shape the driver reads."""
    if not coding and declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
    try:
        return BoundedDecoder(coding, max_bytes, parts)
    except UnreadableCoding:
        raise EngineFailure(failure_class=Reason.PARSE_FAILURE) from None


# Headers only this client writes; a driver's own value for one of them is dropped.
_RESERVED: Final = frozenset(
    {"host", "user-agent", "accept-encoding", "connection", "content-length", "transfer-encoding"}
)
_TARGETS_KEPT: Final = 256


# What form encoding leaves as it is (urllib's always-safe set): most parameters are made of
# it, and skip the encoder.
_UNRESERVED: Final = re.compile(r"[A-Za-z0-9_.~-]*")


def _form(text: str) -> str:
    """`text` form-encoded as urllib.parse.urlencode writes a pair's name or value."""
    return text if _UNRESERVED.fullmatch(text) else quote_plus(text, safe="")


def _driver_headers(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """A driver's headers as sent: reserved names dropped, `Accept: */*` unless it names one
    (what httpx's client sent by default). UnicodeEncodeError for a value not ASCII."""
    sent = [
        (name.encode("ascii"), value.encode("ascii"))
        for name, value in headers.items()
        if name.lower() not in _RESERVED
    ]
    if not any(name.lower() == "accept" for name in headers):
        sent.insert(0, (b"Accept", b"*/*"))
    return sent


def _no_cookies() -> http.cookiejar.CookieJar:
    """A jar that keeps nothing: an engine request is identified by the User-Agent alone,
    and a cookie one answer sets must never ride along on the next (REQ-ENG-014)."""
    import http.cookiejar

    return http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))


class EngineHttp:
    """The outbound client of every engine driver.

    `transport` is for tests and the conformance harness only: when it is set, every request
    goes through it (and the configured proxy is not used); production never sets it.
    The total of one request (LIM-S5) is the aggregator's scope around the engine, the one
    place it is applied; this client reads what is left of it for httpx's read, write and
    pool timeouts (REQ-SEC-011), and the scope's cancellation passes through.
    """

    def __init__(
        self,
        *,
        contact: str = "",
        connect_timeout_ms: int = 1000,
        outbound_in_flight: int = 32,
        proxy: str = "",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.user_agent: Final = user_agent(contact)
        # rypsok's own headers, last: a driver cannot change the User-Agent (REQ-CMP-004)
        # nor ask for a coding this client does not decode under the bound.
        self._own_headers: Final = (
            (b"Accept-Encoding", b"gzip, deflate"),
            (b"Connection", b"keep-alive"),
            (b"User-Agent", self.user_agent.encode("ascii")),
        )
        self._connect_s = connect_timeout_ms / 1000
        self._outbound_max = outbound_in_flight
        self._outbound = trio.Semaphore(outbound_in_flight)  # LIM-C1
        # The process's limiter of CPU-bound work (LIM-C5), shared with page parsing; set by
        # the service. Without one (a driver tested alone) decoding runs inline.
        self.parse_limiter: trio.CapacityLimiter | None = None
        # Per origin and path: the origin's key, the path's bytes and the Host header.
        self._targets: dict[tuple[EngineOrigin, str], tuple[OriginKey, bytes, bytes]] = {}
        self._client: httpx.AsyncClient | None = None
        self._wire: Wire | None = None
        if transport is not None:
            import httpx

            self._client = httpx.AsyncClient(
                transport=transport,
                trust_env=False,
                follow_redirects=False,
                cookies=_no_cookies(),
            )
        else:
            # The system's store, as for fetches (deployment page): no bundled roots, and a
            # store that cannot be read stops the start (ClientBuildError).
            trust = system_trust_context()
            try:
                self._wire = Wire(connect_s=self._connect_s, tls=lambda: trust, proxy=proxy)
            except ValueError:
                # The proxy URL may carry credentials: never repeat it.
                raise ValueError("egress.proxy is not a usable proxy URL") from None

    @classmethod
    def from_config(
        cls, config: Config, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> EngineHttp:
        return cls(
            contact=config.service.user_agent_contact,
            connect_timeout_ms=config.search.connect_timeout_ms,
            outbound_in_flight=config.limits.outbound_in_flight,
            proxy=config.egress.proxy,
            transport=transport,
        )

    async def off_loop(self, decode: Callable[[bytes], _T], body: bytes) -> _T:
        """`decode(body)` in a worker thread under the parse limiter, off the event loop
        (REQ-PAGE-008's rule, applied to the engines' answers too). A small answer is
        decoded inline: under _INLINE_BYTES that takes well under a millisecond, less
        than the trip to a worker thread and back."""
        if self.parse_limiter is None or len(body) <= _INLINE_BYTES:
            return decode(body)
        return await trio.to_thread.run_sync(
            decode, body, limiter=self.parse_limiter, abandon_on_cancel=True
        )

    @property
    def in_flight(self) -> int:
        """Outbound requests holding a permit now (for tests and statistics)."""
        return self._outbound_max - self._outbound.value

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        if self._wire is not None:
            await self._wire.aclose()

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
        if self._wire is not None:
            try:
                await take(self._outbound)  # LIM-C1, without a round when a permit is free
                try:
                    return await self._wire_get(
                        self._wire, origin, path, params, headers, max_bytes
                    )
                finally:
                    self._outbound.release()
            except ConnectTimedOut:
                raise EngineFailure(failure_class=Reason.TIMEOUT) from None
            except WireFailure:
                # Refused, reset, TLS, an answer that is not HTTP/1.1: the provider was not heard.
                raise EngineFailure(failure_class=Reason.REQUEST_FAILURE) from None
            except (OverBound, UnreadableCoding):
                raise EngineFailure(failure_class=Reason.PARSE_FAILURE) from None
        assert self._client is not None
        import httpx

        url = origin.url(path).copy_merge_params(list(params))
        # rypsok's own headers last: a driver cannot change the User-Agent (REQ-CMP-004)
        # nor ask for a coding this client does not decode under the bound.
        request_headers = httpx.Headers(headers)
        request_headers["User-Agent"] = self.user_agent  # replaces any case of the name
        request_headers["Accept-Encoding"] = "gzip, deflate"
        try:
            async with self._outbound:
                return await self._exchange(url, request_headers, max_bytes)
        except httpx.TimeoutException:
            raise EngineFailure(failure_class=Reason.TIMEOUT) from None
        except httpx.HTTPError:
            # Connection refused, reset, TLS, protocol errors: the provider was not heard.
            raise EngineFailure(failure_class=Reason.REQUEST_FAILURE) from None
        except (OverBound, UnreadableCoding):
            raise EngineFailure(failure_class=Reason.PARSE_FAILURE) from None

    def _target(self, origin: EngineOrigin, path: str) -> tuple[OriginKey, bytes, bytes]:
        key = (origin, path)
        known = self._targets.get(key)
        if known is None:
            url = origin.url(path)  # httpx's normalisation of the path, once per path
            port = url.port or (443 if url.scheme == "https" else 80)
            # The host's ASCII (IDNA) form, as httpx wrote it: the Host header, the proxy's
            # CONNECT and the TLS server name all carry it (`url.host` is the Unicode form).
            where = OriginKey(url.scheme, url.raw_host.decode("ascii"), port)
            known = (where, url.raw_path, host_header(where))
            if len(self._targets) >= _TARGETS_KEPT:
                self._targets.clear()  # drivers use a handful; a bound all the same
            self._targets[key] = known
        return known

    async def _wire_get(
        self,
        wire: Wire,
        origin: EngineOrigin,
        path: str,
        params: Sequence[tuple[str, str]],
        headers: Mapping[str, str],
        max_bytes: int,
    ) -> EngineResponse:
        where, raw_path, host = self._target(origin, path)
        try:
            # The bytes httpx wrote for the same pairs (form encoding, tested against it).
            if params:
                query = "&".join(f"{_form(name)}={_form(value)}" for name, value in params)
                target = raw_path + b"?" + query.encode("ascii")
            else:
                target = raw_path
            sent = [(b"Host", host), *_driver_headers(headers), *self._own_headers]
        except UnicodeEncodeError:
            raise EngineFailure(failure_class=Reason.REQUEST_FAILURE) from None
        parts: list[bytes] = []
        bodies: list[BoundedDecoder] = []

        def consume(exchange: Exchange) -> Callable[[bytes], None] | None:
            if not 200 <= exchange.status < 300:
                return None  # the driver classifies the status; the body is not read
            declared = None
            coding = ""
            for name, value in exchange.headers:
                lowered = name.lower()
                if lowered == b"content-length":
                    declared = value
                elif lowered == b"content-encoding":
                    coding = value.decode("latin-1").strip().lower()
            body = _bounded_body(declared, coding, max_bytes, parts)
            bodies.append(body)
            return body.feed

        exchange = await wire.get(where, target, sent, consume)
        if bodies:
            bodies[0].finish()
        import httpx

        return EngineResponse(
            status=exchange.status,
            headers=httpx.Headers(exchange.headers),
            body=b"".join(parts),
        )

    def _timeout(self) -> httpx.Timeout:
        import httpx

        # The read timeout is the time left of the caller's total (REQ-SEC-011). Outside
        # any deadline (a test, a tool) only the connect timeout applies.
        left: float | None = trio.current_effective_deadline() - trio.current_time()
        if left is None or math.isinf(left):
            return httpx.Timeout(connect=self._connect_s, read=None, write=None, pool=None)
        left = max(left, 0.001)
        return httpx.Timeout(connect=min(self._connect_s, left), read=left, write=left, pool=left)

    async def _exchange(
        self, url: httpx.URL, headers: httpx.Headers, max_bytes: int
    ) -> EngineResponse:
        assert self._client is not None
        request = self._client.build_request("GET", url, headers=headers, timeout=self._timeout())
        response = await self._client.send(request, stream=True, follow_redirects=False)
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
            declared = response.headers.get("content-length")
            coding = response.headers.get("content-encoding", "").strip().lower()
            parts: list[bytes] = []
            body = _bounded_body(declared, coding, max_bytes, parts)
            chunks = response.aiter_raw()
            try:
                async for chunk in chunks:
                    body.feed(chunk)
            except BaseException:
                await _abandon(response, chunks)
                raise
            body.finish()
            return EngineResponse(
                status=response.status_code, headers=response.headers, body=b"".join(parts)
            )
        finally:
            await response.aclose()


async def _abandon(response: httpx.Response, chunks: AsyncIterator[bytes]) -> None:
    """Stop a body read half-way: close the connection, then let the stream end.

    httpx reads a body through a chain of async generators; leaving it suspended would
    leave each one to the garbage collector. Once the connection is closed the next step
    of the chain fails at once, which finishes every generator of it. Shielded and short,
    so that a cancelled read still cleans up and never waits on the network.
    """
    import httpx

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
    import email.utils

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
