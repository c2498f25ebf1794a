"""The HTTP listener: hypercorn's HTTP/1.1 and HTTP/2 (h2c) protocol code on Trio, under the
connection-level bounds hypercorn does not keep by itself.

hypercorn parses HTTP and calls the ASGI app (`rypsok.mcp.http_app`). The rest is ours, by
phase:

- `accept`: the listening socket and the accept loop (bursts, backoff on EMFILE).
- `admission`: who holds a connection (LIM-H1): room made at the cap, each caller's share.
- `heads`: what a socket's buffer holds unread (a whole head, its token).
- `connection`: one connection's state; `lifecycle`: its life from the first bytes (LIM-H3,
  `head_timeout_s`) through hypercorn to its close, and the drain at the shutdown.
- `stream`: the stream hypercorn reads, every byte through `rypsok.mcp.http_framing` first
  (HTTP/1 heads checked strictly, HTTP/2 header blocks bounded by LIM-H7); LIM-H4 is h2's
  setting, a stream beyond it refused alone. LIM-H2 and LIM-H5 are the app's.
- `memory`: the heap handed back once a flood's connections have closed.
- `serve`: `serve_http` and `run_http`, the transport's entry points.
"""

from rypsok.mcp.http_app import HEADER_BLOCK_BYTES
from rypsok.mcp.listener.accept import listening_socket
from rypsok.mcp.listener.lifecycle import Listener
from rypsok.mcp.listener.serve import run_http, serve_http

__all__ = [
    "HEADER_BLOCK_BYTES",
    "Listener",
    "listening_socket",
    "run_http",
    "serve_http",
]
