"""`GET /healthz` and `GET /readyz` on the MCP listener, for a proxy, an orchestrator or the
image's HEALTHCHECK.

Both are answered before the gate: no token (a probe holds none), no Host or Origin check
(a probe names the address it dials), never counted as a refusal. `/healthz` says only that
the event loop answers: `{"status":"ok"}`, nothing an outsider could use. `/readyz` says
whether a search can be served: 200 `{"status":"ready"}`, or 503 with the reasons
(`rypsok.core.readiness.NotReady`): the listener not accepting yet or stopping, no engine able
to serve, the coordination store away.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

from rypsok.core.readiness import NotReady
from rypsok.mcp.probes import HEALTHZ, is_probe

if TYPE_CHECKING:
    from collections.abc import Callable

    from rypsok.core.readiness import Readiness

__all__ = ["Health"]

_ALIVE: Final = b'{"status":"ok"}'
_READY: Final = b'{"status":"ready"}'
_ALLOW: Final = ((b"allow", b"GET, HEAD"),)
_NO_STORE: Final = ((b"cache-control", b"no-store"),)

Answer = tuple[int, bytes, tuple[tuple[bytes, bytes], ...]]


class Health:
    """The two answers. The listener sets `accepting` once it accepts and `stopping` when the
    graceful stop begins. `source` is the core's part (the service's `readiness`); None
    counts the core as ready (a test's service without engines' state)."""

    def __init__(self, source: Callable[[], Readiness] | None) -> None:
        self._source = source
        self.accepting = False
        self.stopping = False

    def answer(self, method: str, path: str) -> Answer:
        """The status, body and headers; a HEAD gets the GET's, so that its head carries the
        GET's Content-Length and Content-Type (RFC 9110 §8.6, §9.3.2): the server sends no
        body in answer to a HEAD."""
        if not is_probe(method, path):
            return 405, b"", _ALLOW
        if path == HEALTHZ:
            return 200, _ALIVE, _NO_STORE
        reasons = list(self._reasons())
        if not reasons:
            return 200, _READY, _NO_STORE
        shown = {"status": "not_ready", "reasons": [str(r) for r in reasons]}
        text = json.dumps(shown, separators=(",", ":")).encode("ascii")
        return 503, text, _NO_STORE

    def _reasons(self) -> tuple[NotReady, ...]:
        if self.stopping:
            return (NotReady.STOPPING,)
        listener = () if self.accepting else (NotReady.STARTING,)
        source = self._source
        if source is None:
            return listener
        return (*listener, *source().reasons)
