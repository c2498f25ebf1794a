"""The peer `tools/bench-stdio` measures beside rypsok: a search server on the official SDK.

What a Python MCP search server usually is: the official SDK's server over stdio (`mcp`, a
test dependency here) with one `web_search` tool that asks one engine through an
`httpx.AsyncClient` kept for the process (so its connection is kept alive) and returns the
engine's hits as they came (title, URL, snippet), with no cleaning, deduplication, ranking,
limits or secret check. It answers the benchmark's own lines (the 2026-07-28 revision, no
handshake), so that both servers are driven and timed the same way, in the same run
(`python -m benchmarks.stdio_peer PORT`).
"""

from __future__ import annotations

import sys
from typing import Any

import httpx
from mcp.server.mcpserver import MCPServer


def main(port: int) -> None:
    server = MCPServer("stdio-peer", log_level="WARNING")
    engine = f"http://127.0.0.1:{port}"
    clients: list[httpx.AsyncClient] = []  # made on the first call, inside the server's loop

    @server.tool()
    async def web_search(query: str, category: str = "general") -> dict[str, Any]:
        """Search the engine and return its hits."""
        if not clients:
            clients.append(httpx.AsyncClient(base_url=engine, timeout=10))
        answer = await clients[0].get(
            "/w/api.php",
            params={
                "action": "query",
                "list": "search",
                "format": "json",
                "formatversion": "2",
                "srlimit": "10",
                "srsearch": query,
            },
        )
        answer.raise_for_status()
        hits = answer.json()["query"]["search"]
        results = [
            {
                "title": hit["title"],
                "url": f"{engine}/w/index.php?title={hit['title'].replace(' ', '_')}",
                "snippet": hit["snippet"],
            }
            for hit in hits
        ]
        return {"outcome": "ok", "notices": [], "results": results}

    server.run("stdio")


if __name__ == "__main__":
    main(int(sys.argv[1]))
