"""The engines' production stack pointed at local servers standing in for providers.

`ProviderNetwork({"api.search.brave.com": server, ...})` gives an `EngineNetwork` (for
`Rypsok(engine_network=...)`) and the same seams as `EngineClient` keywords (`http_options`):
each provider host resolves to a public address of its own (the policy judges it as it
would the real one: a default endpoint must be public), the network backend carries that address
to the host's local server on 127.0.0.1, and TLS is verified against a throw-away authority
that signed the servers' certificates (`tls_for(host)` gives a server its context). Nothing
of the stack above the lookup and the socket is replaced: the pool, TLS, HTTP/1.1, the
decompression and the egress judgment are the production ones.
"""

from __future__ import annotations

import functools
import inspect
import ipaddress
from typing import TYPE_CHECKING, Any

import trio
import trio.testing
from fetch_helpers import Authority

from rypsok.core.egress.testing import MapResolver
from rypsok.core.engines.client import EngineNetwork
from testkit.servers import RecordedRequest, read_request, write_reply

if TYPE_CHECKING:
    import ssl
    from collections.abc import Mapping

    from rypsok.core.egress.ranges import Address
    from testkit.servers import LocalHttpServer

__all__ = ["MemoryProviders", "ProviderNetwork", "tls_for"]


@functools.cache
def _authority() -> Authority:
    return Authority()


def tls_for(*hosts: str) -> ssl.SSLContext:
    """A server context for `hosts`, signed by the authority the network trusts."""
    return _authority().server_context(*hosts)


class _Forward:
    """A network backend that carries each mapped address to its local server's port."""

    def __init__(self, ports: Mapping[Address, int]) -> None:
        self._ports = dict(ports)
        self.attempts: list[tuple[Address, int]] = []

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        self.attempts.append((address, port))
        local = self._ports.get(address)
        if local is None:
            raise OSError("no local server stands in for this address")
        return await trio.open_tcp_stream("127.0.0.1", local)


class ProviderNetwork:
    def __init__(self, servers: Mapping[str, LocalHttpServer]) -> None:
        self.addresses = {
            host: ipaddress.ip_address(f"93.184.215.{10 + n}") for n, host in enumerate(servers)
        }
        self.resolver = MapResolver({h: [str(a)] for h, a in self.addresses.items()})
        self.network_backend = _Forward({self.addresses[h]: s.port for h, s in servers.items()})
        self.ssl_context = _authority().client_context()

    @property
    def engine_network(self) -> EngineNetwork:
        return EngineNetwork(
            resolver=self.resolver,
            network_backend=self.network_backend,
            ssl_context=self.ssl_context,
        )

    def http_options(self) -> dict[str, Any]:
        return {
            "resolver": self.resolver,
            "network_backend": self.network_backend,
            "ssl_context": self.ssl_context,
        }

    @property
    def hosts_dialled(self) -> list[str]:
        """The provider hosts a connection was opened to, in order."""
        by_address = {a: h for h, a in self.addresses.items()}
        return [
            by_address.get(address, str(address)) for address, _ in self.network_backend.attempts
        ]


class MemoryProviders:
    """The production engine stack over in-memory streams, for tests on a MockClock.

    `MemoryProviders({"en.wikipedia.org": handler, ...})`: each host resolves to a public
    address of its own; a connection to it is a Trio memory stream pair whose far end a Trio
    system task serves (no nursery to enter), over TLS from the same throw-away authority,
    with `servers`' request reader and answer writer. `handler` is a `Reply`, or a function
    of the `RecordedRequest` returning one (sync or async). `requests(host)` and `log` (host,
    request) record what arrived; nothing touches a socket, so a MockClock's jumps cannot cut
    an exchange.
    """

    def __init__(self, handlers: Mapping[str, Any]) -> None:
        self.addresses = {
            host: ipaddress.ip_address(f"93.184.216.{10 + n}") for n, host in enumerate(handlers)
        }
        self.resolver = MapResolver({h: [str(a)] for h, a in self.addresses.items()})
        self.ssl_context = _authority().client_context()
        self._hosts = {a: h for h, a in self.addresses.items()}
        self._handlers = dict(handlers)
        self.log: list[tuple[str, RecordedRequest]] = []
        self._tls = {host: tls_for(host) for host in handlers}
        self.attempts: list[tuple[Address, int]] = []
        # A handler's own failure, kept for the test to see (a system task must not raise).
        self.errors: list[BaseException] = []

    def requests(self, host: str) -> list[RecordedRequest]:
        return [request for seen, request in self.log if seen == host]

    @property
    def hosts_dialled(self) -> list[str]:
        return [self._hosts.get(address, str(address)) for address, _ in self.attempts]

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        self.attempts.append((address, port))
        host = self._hosts.get(address)
        if host is None:
            raise OSError("no in-memory provider stands in for this address")
        client, server = trio.testing.memory_stream_pair()
        trio.lowlevel.spawn_system_task(self._serve, host, server)
        return client

    async def _serve(self, host: str, stream: trio.abc.Stream) -> None:
        secured = trio.SSLStream(stream, self._tls[host], server_side=True, https_compatible=True)
        try:
            request = await read_request(secured)
            if request is None:
                return
            self.log.append((host, request))
            handler = self._handlers[host]
            reply = handler(request) if callable(handler) else handler
            if inspect.isawaitable(reply):
                reply = await reply
            await write_reply(secured, reply)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.Cancelled):
            pass  # the client went away first, or the run ends
        except Exception as exc:
            self.errors.append(exc)
        finally:
            await trio.aclose_forcefully(secured)

    @property
    def engine_network(self) -> EngineNetwork:
        return EngineNetwork(
            resolver=self.resolver, network_backend=self, ssl_context=self.ssl_context
        )

    def http_options(self) -> dict[str, Any]:
        return {"resolver": self.resolver, "network_backend": self, "ssl_context": self.ssl_context}
