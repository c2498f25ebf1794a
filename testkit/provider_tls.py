"""The engines' production stack reaching the harness's plain-HTTP fixture engines.

Each provider host (`en.wikipedia.org`, `api.search.brave.com`, ...) resolves to a public
address of its own, so that the egress policy judges it as it would the real one; a
connection to that address is a Trio memory stream whose far end a system task serves with
TLS (a certificate for every routed host, signed by an authority made for the run) and
relays, in clear, to the fixture's loopback port. Nothing above the lookup and the socket is
replaced: the pool, TLS, HTTP/1.1, the decompression and the egress judgment are the ones
`rypsok serve` uses.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

import trio
import trio.testing

from rypsok.core.egress.testing import MapResolver
from rypsok.core.engines.client import EngineNetwork
from testkit.authority import Authority

if TYPE_CHECKING:
    from rypsok.core.egress.ranges import Address

__all__ = ["TlsFronts"]


class TlsFronts:
    def __init__(self, routes: dict[str, int]) -> None:
        hosts = tuple(routes)
        self._addresses = {
            host: ipaddress.ip_address(f"93.184.216.{10 + n}") for n, host in enumerate(hosts)
        }
        self._ports = {self._addresses[host]: port for host, port in routes.items()}
        self.resolver = MapResolver({h: [str(a)] for h, a in self._addresses.items()})
        authority = Authority("rypsok conformance provider authority")
        self._server_tls = authority.server_context(*hosts)
        self.ssl_context = authority.client_context()

    @property
    def engine_network(self) -> EngineNetwork:
        return EngineNetwork(
            resolver=self.resolver, network_backend=self, ssl_context=self.ssl_context
        )

    async def connect(self, address: Address, port: int) -> trio.abc.Stream:
        local = self._ports.get(address)
        if local is None:
            # Nothing else may be reached: a harness must never touch the network.
            raise OSError("no fixture stands in for this address")
        client, far = trio.testing.memory_stream_pair()
        trio.lowlevel.spawn_system_task(self._relay, far, local)
        return client

    async def _relay(self, far: trio.abc.Stream, port: int) -> None:
        tls = trio.SSLStream(far, self._server_tls, server_side=True, https_compatible=True)
        try:
            inner = await trio.open_tcp_stream("127.0.0.1", port)
        except OSError:
            await trio.aclose_forcefully(tls)
            return
        try:
            async with trio.open_nursery() as nursery:

                async def pump(source: trio.abc.Stream, sink: trio.abc.Stream) -> None:
                    try:
                        while data := await source.receive_some(65536):
                            await sink.send_all(data)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        pass
                    finally:
                        nursery.cancel_scope.cancel()

                nursery.start_soon(pump, tls, inner)
                nursery.start_soon(pump, inner, tls)
        finally:
            await trio.aclose_forcefully(inner)
            await trio.aclose_forcefully(tls)
