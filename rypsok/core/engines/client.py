"""The engines' outbound HTTP client (REQ-SEC-017, REQ-SEC-010, REQ-SEC-011, REQ-SEC-013).

One `EngineClient` serves every engine of the process. A driver names its origin once, at
construction, as an `EngineOrigin`; every request is built from that origin, so a request
can only go to the engine's own host, and a credential header given with it can only reach
that origin (redirects are never followed). The requests go through the process's one
outbound stack, the egress component's `EgressTransport` (an httpcore pool over
`EgressBackend`), the same as web_fetch's: every connection goes to an address judged for
that origin when it is dialled. An engine's default endpoint must resolve to a public
address; a host the operator wrote in a `base_url` (or a loopback address) is admitted as
written (REQ-NET). Environment proxy variables are ignored; the operator's `[egress] proxy`
is the only proxy, and never for a loopback origin. The body is read as a stream of raw bytes
and decompressed as it comes (`rypsok.core.content_coding`), under the driver's bound, so that a
small compressed answer cannot expand past the bound in memory (a gzip bomb stops one byte
past it).

Implements REQ-RES-007, REQ-RES-008 and LIM-S12.
"""

from __future__ import annotations

import functools
import math
import re
import time
from typing import TYPE_CHECKING, Final, TypeVar, cast
from urllib.parse import unquote, urlencode, urlsplit

import attrs
import trio

from rypsok.config.memory import ANSWER_TIMES_BYTES, PARSE_FIXED_BYTES
from rypsok.core.content_coding import BoundedDecoder, OverBound, UnreadableCoding
from rypsok.core.egress.policy import (
    DEFAULT_PORTS,
    encode_path,
    engine_origin_refusal,
    read_url,
)
from rypsok.core.egress.vocabulary import Refusal
from rypsok.core.engines.base import EngineFailure
from rypsok.core.model import Reason
from rypsok.core.parsing import ParseBudget, ParsePermit
from rypsok.shared.hosts import is_loopback_host
from rypsok.shared.identity import PROJECT_URL, user_agent

# httpx (and with it the egress stack) is imported where it is used, not here: serving starts
# and answers discovery without it, and it loads with the first engine request.
# EngineResponse's field type is a name only: attrs never evaluates it.
if TYPE_CHECKING:
    import ssl  # noqa: TC004 (EngineNetwork's field types are names only for attrs)
    from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence

    import httpcore
    import httpx  # noqa: TC004 (imported where used: see above)

    from rypsok.config.schema import Config
    from rypsok.core.egress.backend import NetworkBackend, Resolver  # noqa: TC004
    from rypsok.core.egress.clients import EgressTransport

__all__ = [
    "PROJECT_URL",
    "EngineClient",
    "EngineNetwork",
    "EngineOrigin",
    "EngineResponse",
    "origin_text",
    "parse_base_url",
    "parse_retry_after",
    "url_text",
    "user_agent",
]

_T = TypeVar("_T")
# Answers up to this size are decoded on the event loop (see `EngineClient.off_loop`).
_INLINE_BYTES: Final = 65536
_TARGETS_KEPT: Final = 256

# Closing a connection and ending its stream is immediate; this only bounds a surprise,
# well inside LIM-O2's 500 ms for aborting a request.
_ABANDON_S: Final = 0.1


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
        """The origin of `url`, read as the egress policy reads every URL; ValueError when it
        cannot be read or is not an engine origin."""
        return _read_origin(url)[0]

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"

    def url(self, path: str) -> str:
        """The URL of `path` at this origin, the path encoded as a request sends it."""
        if not path.startswith("/"):
            raise ValueError("an engine path is absolute")
        return f"{self.scheme}://{self.authority}{encode_path(path)}"


def _read_origin(text: str) -> tuple[EngineOrigin, str]:
    read = read_url(text)
    if isinstance(read, Refusal):
        raise ValueError("engines base_url is not an absolute http or https URL")
    host = read.host.name if read.host.name is not None else str(read.host.address)
    port = None if read.port == DEFAULT_PORTS[read.scheme] else read.port
    return EngineOrigin(scheme=read.scheme, host=host, port=port), read.path


def parse_base_url(base_url: str) -> tuple[EngineOrigin, str]:
    """An engine's configured `base_url` as its origin and its path without a trailing "/".

    Read as the egress policy reads every URL (`read_url`). ValueError (naming the key, never
    the value) for a URL that is not absolute, that carries credentials, a query or a
    fragment, or whose origin the engine profile refuses.
    """
    if "?" in base_url or "#" in base_url:
        raise ValueError("engines base_url is an absolute URL without credentials or query")
    origin, path = _read_origin(base_url)
    return origin, path.rstrip("/")


@functools.lru_cache(maxsize=256)
def url_text(origin: EngineOrigin, path: str) -> str:
    """`origin.url(path)`, kept, as drivers build their result URLs on it."""
    return origin.url(path)


def origin_text(origin: EngineOrigin) -> str:
    """The origin as the start of a URL, without a trailing slash."""
    return url_text(origin, "/").rstrip("/")


@attrs.frozen(kw_only=True)
class EngineNetwork:
    """What lies below the engines' egress stack, replaced by a test or the conformance
    harness: the name lookup, the TCP connect and the TLS trust. The stack above them, the
    policy's judgment included, stays the production one."""

    resolver: Resolver | None = None
    network_backend: NetworkBackend | None = None
    ssl_context: ssl.SSLContext | None = None


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
    UnreadableCoding, which `EngineClient.get` turns into PARSE_FAILURE: over the driver's
    bound, the answer is not the shape the driver reads."""
    if not coding and declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise EngineFailure(failure_class=Reason.PARSE_FAILURE)
    try:
        return BoundedDecoder(coding, max_bytes, parts)
    except UnreadableCoding:
        raise EngineFailure(failure_class=Reason.PARSE_FAILURE) from None


# A request header as RFC 9110 allows it: a token for the name, visible characters, spaces
# and tabs for the value. A driver's value outside it (a key with a line break) is refused
# before any connection is made, so that it can never add a header or a request.
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FIELD_VALUE: Final = re.compile(r"[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?|")
# Headers only this client writes; a driver's own value for one of them is dropped.
_RESERVED: Final = frozenset(
    {"host", "user-agent", "accept-encoding", "connection", "content-length", "transfer-encoding"}
)


def _driver_headers(headers: Mapping[str, str]) -> list[tuple[str, str]]:
    """A driver's headers as sent: reserved names dropped, `Accept: */*` unless it names one.
    EngineFailure(request_failure) for a name or value that is not a valid field."""
    sent: list[tuple[str, str]] = []
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name) or not _FIELD_VALUE.fullmatch(value):
            raise EngineFailure(failure_class=Reason.REQUEST_FAILURE)
        if name.lower() not in _RESERVED:
            sent.append((name, value))
    if not any(name.lower() == "accept" for name, _ in sent):
        sent.insert(0, ("Accept", "*/*"))
    return sent


def _proxy_parts(proxy: str) -> tuple[str, tuple[bytes, bytes] | None]:
    """The proxy URL without its credentials, and the credentials; ValueError (never naming
    the URL, which may hold a password) for a URL that is not an http(s) proxy."""
    parts = urlsplit(proxy)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("egress.proxy is not a usable proxy URL")
    try:
        port = parts.port
    except ValueError:
        raise ValueError("egress.proxy is not a usable proxy URL") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    url = f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")
    auth = None
    if parts.username is not None:
        auth = (unquote(parts.username).encode(), unquote(parts.password or "").encode())
    return url, auth


class EngineClient:
    """The outbound client of every engine driver.

    Every request goes through one `EgressTransport` per origin (its pool and its judgment
    of the dialled address), made on the origin's first request; there is no other client.
    `operator_hosts` are the hosts the operator wrote in a `base_url`: an address they
    resolve to is admitted whatever its range (a SearXNG instance on the operator's own
    network), as a loopback address always is; `resolver` and `network_backend` replace the
    system's lookup and TCP connect (tests). The total of one request (LIM-S5) is the
    aggregator's scope around the engine, the one place it is applied; this client reads
    what is left of it for the read, write and pool timeouts (REQ-SEC-011), and the scope's
    cancellation passes through.
    """

    def __init__(
        self,
        *,
        contact: str = "",
        connect_timeout_ms: int = 1000,
        outbound_in_flight: int = 32,
        proxy: str = "",
        operator_hosts: Iterable[str] = (),
        resolver: Resolver | None = None,
        network_backend: NetworkBackend | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.user_agent: Final = user_agent(contact)
        self._connect_s = connect_timeout_ms / 1000
        self._outbound_max = outbound_in_flight
        self._outbound = trio.Semaphore(outbound_in_flight)  # LIM-C1
        # The process's limiter of CPU-bound work (LIM-C5), shared with page parsing; set by
        # the service. Without one (a driver tested alone) decoding runs inline.
        self.parse_limiter: trio.CapacityLimiter | None = None
        # The parse budget shared with the pages (core/parsing.py), set by the service with
        # the limiter: a large answer's decode takes its share, so that it and the pages
        # parsing at once stay within one page's parse at the bounds.
        self.parse_budget: ParseBudget | None = None
        self._operator_hosts = frozenset(host.lower() for host in operator_hosts)
        self._resolver = resolver
        self._network_backend = network_backend
        self._proxy = _proxy_parts(proxy) if proxy else None
        self._transports: dict[EngineOrigin, EgressTransport] = {}
        self._targets: dict[tuple[EngineOrigin, str], tuple[bytes, bytes, int, bytes]] = {}
        self._header_lists: dict[tuple[tuple[str, str], ...], list[tuple[bytes, bytes]]] = {}
        # rypsok's own headers, written last on every request.
        self._own_headers: Final = (
            (b"Accept-Encoding", b"gzip, deflate"),
            (b"User-Agent", self.user_agent.encode("ascii")),
        )
        # A context of its own (the system's store, no bundled roots): a store that cannot be
        # read stops the start (ClientBuildError).
        from rypsok.core.egress.trust import client_context

        self._ssl_context = ssl_context if ssl_context is not None else client_context()

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        network: EngineNetwork | None = None,
    ) -> EngineClient:
        from urllib.parse import urlsplit

        written = (urlsplit(e.base_url).hostname for e in config.engines if e.base_url)
        return cls(
            contact=config.service.user_agent_contact,
            connect_timeout_ms=config.search.connect_timeout_ms,
            outbound_in_flight=config.limits.outbound_in_flight,
            proxy=config.egress.proxy,
            operator_hosts=[host for host in written if host],
            resolver=network.resolver if network is not None else None,
            network_backend=network.network_backend if network is not None else None,
            ssl_context=network.ssl_context if network is not None else None,
        )

    async def off_loop(self, decode: Callable[[bytes], _T], body: bytes) -> _T:
        """`decode(body)` in a worker thread under the parse limiter, off the event loop
        (REQ-PAGE-008's rule, applied to the engines' answers too). A small answer is
        decoded inline: under _INLINE_BYTES that takes well under a millisecond, less
        than the trip to a worker thread and back."""
        if self.parse_limiter is None or len(body) <= _INLINE_BYTES:
            return decode(body)
        # An answer whose decode costs no more than the part of a parse that does not grow
        # (about 150 KiB of JSON) rides on its permit, which the estimate counts: the
        # common answer never queues behind a large page. A larger one takes its share of
        # the budget too, by what its decode can cost (config/memory.py's measured worst).
        cost = ANSWER_TIMES_BYTES * len(body)
        budget = self.parse_budget if cost > PARSE_FIXED_BYTES else None
        share = budget.share_of_cost(cost) if budget is not None else 0
        permit = ParsePermit(self.parse_limiter, budget, share)
        try:
            await permit.take()
            # Any object with the limiter's two methods is accepted (trio's documentation).
            limiter = cast("trio.CapacityLimiter", permit)
            return await trio.to_thread.run_sync(
                decode, body, limiter=limiter, abandon_on_cancel=True
            )
        finally:
            permit.release_unless_handed()

    @property
    def in_flight(self) -> int:
        """Outbound requests holding a permit now (for tests and statistics)."""
        return self._outbound_max - self._outbound.value

    async def aclose(self) -> None:
        transports, self._transports = self._transports, {}
        for transport in transports.values():
            await transport.aclose()

    async def __aenter__(self) -> EngineClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _transport(self, origin: EngineOrigin) -> EgressTransport:
        """The origin's transport: the egress stack, judged for it."""
        transport = self._transports.get(origin)
        if transport is None:
            transport = self._transports[origin] = self._egress_transport(origin)
        return transport

    def _egress_transport(self, origin: EngineOrigin) -> EgressTransport:
        from rypsok.config.rules import parse_egress_rule
        from rypsok.core.egress.clients import EgressTransport
        from rypsok.core.egress.policy import EgressPolicy

        port = origin.port or (443 if origin.scheme == "https" else 80)
        loopback = is_loopback_host(origin.host)
        allow = []
        if loopback or origin.host.lower() in self._operator_hosts:
            # Written by the operator (or a loopback address, which only an operator or a
            # test can give): admitted at whatever address it resolves to.
            allow.append(parse_egress_rule(origin.host))
        proxy = None if loopback else self._proxy
        ports = {80, 443, port}
        if proxy is not None:
            # Through the proxy the backend dials the proxy alone: the operator wrote it.
            proxy_origin = EngineOrigin.parse(proxy[0])
            allow.append(parse_egress_rule(proxy_origin.host))
            ports.add(proxy_origin.port or DEFAULT_PORTS[proxy_origin.scheme])
        policy = EgressPolicy(
            allow_http=origin.scheme == "http",
            ports=frozenset(ports),
            connect_timeout_s=self._connect_s,
            allow=tuple(allow),
        )
        return EgressTransport(
            policy,
            ssl_context=self._ssl_context,
            resolver=self._resolver,
            network_backend=self._network_backend,
            max_connections=self._outbound_max,
            proxy=proxy,
        )

    def _target(self, origin: EngineOrigin, path: str) -> tuple[bytes, bytes, int, bytes]:
        """The scheme, the host's ASCII form, the port and the path's bytes as they are sent,
        once per origin and path (drivers use a handful)."""
        key = (origin, path)
        known = self._targets.get(key)
        if known is None:
            if not path.startswith("/"):
                raise ValueError("an engine path is absolute")
            port = origin.port or DEFAULT_PORTS[origin.scheme]
            known = (
                origin.scheme.encode("ascii"),
                origin.host.encode("ascii"),
                port,
                encode_path(path).encode("ascii"),
            )
            if len(self._targets) >= _TARGETS_KEPT:
                self._targets.clear()
            self._targets[key] = known
        return known

    def _header_list(self, headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
        """A driver's headers as sent, followed by rypsok's own: checked and encoded once
        per distinct set (a driver sends the same few on every request)."""
        key = tuple(headers.items())
        known = self._header_lists.get(key)
        if known is None:
            known = [(n.encode("ascii"), v.encode("ascii")) for n, v in _driver_headers(headers)]
            # rypsok's own headers last: a driver cannot change the User-Agent (REQ-CMP-004)
            # nor ask for a coding this client does not decode under the bound.
            known += self._own_headers
            if len(self._header_lists) >= _TARGETS_KEPT:
                self._header_lists.clear()
            self._header_lists[key] = known
        return known

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
        import httpcore

        from rypsok.core.egress.backend import EgressRefused

        scheme, host, port, raw_path = self._target(origin, path)
        target = raw_path + b"?" + urlencode(params).encode("ascii") if params else raw_path
        default_port = port == (443 if scheme == b"https" else 80)
        sent = [(b"Host", host if default_port else host + b":%d" % port)]
        sent += self._header_list(headers)
        request = httpcore.Request(
            b"GET",
            httpcore.URL(scheme=scheme, host=host, port=port, target=target),
            headers=sent,
            content=_NO_BODY,
            extensions={"timeout": self._timeout()},
        )
        try:
            async with self._outbound:  # LIM-C1
                return await self._exchange(self._transport(origin), request, max_bytes)
        except httpcore.TimeoutException:
            raise EngineFailure(failure_class=Reason.TIMEOUT) from None
        except (
            httpcore.NetworkError,
            httpcore.ProtocolError,
            httpcore.ProxyError,
            httpcore.UnsupportedProtocol,
            EgressRefused,
        ):
            # Refused by the egress judgment, connection refused or reset, TLS, protocol
            # errors: the provider was not heard.
            raise EngineFailure(failure_class=Reason.REQUEST_FAILURE, heard=False) from None
        except (OverBound, UnreadableCoding):
            raise EngineFailure(failure_class=Reason.PARSE_FAILURE) from None

    def _timeout(self) -> dict[str, float | None]:
        # The read timeout is the time left of the caller's total (REQ-SEC-011). Outside
        # any deadline (a test, a tool) only the connect timeout applies.
        left: float | None = trio.current_effective_deadline() - trio.current_time()
        if left is None or math.isinf(left):
            return {"connect": self._connect_s, "read": None, "write": None, "pool": None}
        left = max(left, 0.001)
        return {"connect": min(self._connect_s, left), "read": left, "write": left, "pool": left}

    async def _exchange(
        self, transport: EgressTransport, request: httpcore.Request, max_bytes: int
    ) -> EngineResponse:
        import httpx

        # The pool itself, not httpx's client: the client reads a 3xx's Location to build
        # the next request even when it does not follow it, and would raise on a provider's
        # malformed one; no cookie jar exists to keep anything.
        response = await transport.handle_core(request)
        try:
            answer_headers = httpx.Headers(response.headers)
            if not 200 <= response.status < 300:
                return EngineResponse(status=response.status, headers=answer_headers, body=b"")
            declared = answer_headers.get("content-length")
            coding = answer_headers.get("content-encoding", "").strip().lower()
            parts: list[bytes] = []
            body = _bounded_body(declared, coding, max_bytes, parts)
            chunks = response.aiter_stream()
            try:
                async for chunk in chunks:
                    body.feed(chunk)
            except BaseException:
                await _abandon(response, chunks)
                raise
            body.finish()
            return EngineResponse(
                status=response.status, headers=answer_headers, body=b"".join(parts)
            )
        finally:
            await response.aclose()


class _NoBody:
    """A GET's body: an async iterable that ends at once. Without content httpcore sends
    `ByteStream(b"")`, an async generator (with Trio's first-iteration hook and finalizer)
    that yields one empty chunk, written as an empty h11 `Data` event: about 2 % of a
    web_search's instructions. The bytes on the wire are the same."""

    def __aiter__(self) -> _NoBody:
        return self

    async def __anext__(self) -> bytes:
        raise StopAsyncIteration


_NO_BODY: Final = _NoBody()


async def _abandon(response: httpcore.Response, chunks: AsyncIterator[bytes]) -> None:
    """Stop a body read half-way: close the connection, then let the stream end.

    httpcore reads a body through a chain of async generators; leaving it suspended would
    leave each one to the garbage collector. Once the connection is closed the next step of
    the chain fails at once, which finishes every generator of it. Shielded and short, so
    that a cancelled read still cleans up and never waits on the network.
    """
    import httpcore

    with trio.CancelScope(shield=True), trio.move_on_after(_ABANDON_S):
        await response.aclose()
        try:
            async for _ in chunks:
                pass
        except (httpcore.NetworkError, httpcore.ProtocolError, RuntimeError):
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

    # A malformed date is a ValueError; a year, day or offset too large for the platform's
    # integers (a provider can write any digits) an OverflowError.
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (ValueError, OverflowError):
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
        except (ValueError, OverflowError):
            pass
    return min(max(when.timestamp() - reference, 0.0), _MAX_WAIT_S)
