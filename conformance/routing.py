"""An engine transport that sends the engines' HTTPS requests to local fixture servers.

The request keeps its URL (so result URLs are those of the real provider) and is carried
over plain HTTP to the loopback port that stands in for the provider's host.
"""

from __future__ import annotations

import httpx

__all__ = ["RoutingTransport"]


class RoutingTransport(httpx.AsyncBaseTransport):
    def __init__(self, routes: dict[str, int]) -> None:
        self._routes = dict(routes)  # host -> loopback port
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        port = self._routes.get(request.url.host)
        if port is None:
            # Nothing else may be reached: a harness must never touch the network.
            raise httpx.ConnectError("no fixture for this host", request=request)
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=port)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()
