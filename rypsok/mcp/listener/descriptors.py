"""The file descriptors the listener may spend on connections (LIM-H8), from the process's
descriptor limit (`RLIMIT_NOFILE`: systemd's `LimitNOFILE`, a container's `--ulimit nofile`).

Every connection holds a descriptor, and so does everything else the process does: its
own (standard streams, the event loop, the listening socket, the coordination store), the
outbound pools (the engines' `outbound_in_flight`, web_fetch's two per fetch in flight), the
PDF workers (`fetch.pdf_workers`, LIM-C10: seven each while it starts), and
`[service.metrics]`'s socket and scrapes when it is on.
Those are kept back first (`reserve`); the connections get the rest, with a few for the
sockets in passing (`ACCEPT_HEADROOM`: newcomers being judged at their accept, evicted
connections whose task has not closed them yet). So the cap on connections is
`min(max_connections, limit - reserve - ACCEPT_HEADROOM)`, and at that cap room is made as at
`max_connections`; the accept loop takes no socket while `cap + ACCEPT_HEADROOM` accepted
sockets are open, so a flood meets the cap, never `EMFILE`.
"""

from __future__ import annotations

import resource
from typing import TYPE_CHECKING, Final

import attrs
import trio

from rypsok.mcp.metrics_server import METRICS_CONNECTIONS

if TYPE_CHECKING:
    from rypsok.config.schema import Config

__all__ = [
    "ACCEPT_HEADROOM",
    "METRICS_DESCRIPTORS",
    "OWN_DESCRIPTORS",
    "PDF_WORKER_DESCRIPTORS",
    "DescriptorPlan",
    "Descriptors",
    "descriptor_limit",
    "plan_descriptors",
]

# The process's own descriptors: standard streams, the event loop (epoll, its wake-up pair,
# the signal pipe), the listening socket, log and coordination connections, with room.
OWN_DESCRIPTORS: Final = 16
# One PDF worker's, at their most: while it starts, its two pipes (standard input and
# output), the null device for its standard error and the pipe that reports a failed exec;
# while it reads, two pipe ends and its pidfd.
PDF_WORKER_DESCRIPTORS: Final = 7
# `[service.metrics]`'s: its listening socket and its scrapes' connections.
METRICS_DESCRIPTORS: Final = 1 + METRICS_CONNECTIONS
# Accepted sockets beyond the connection cap: newcomers judged at their accept, evicted
# connections not yet closed by their task (a burst's work).
ACCEPT_HEADROOM: Final = 8


def descriptor_limit() -> int | None:
    """The process's soft descriptor limit, None when it has none."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


@attrs.frozen
class DescriptorPlan:
    """How the descriptor limit is shared: `connections` is the cap on connections (at
    most `max_connections`), `sockets` the accepted sockets open at once, `reserve` what the
    rest of the process keeps; `limit` is None when the process has none."""

    limit: int | None
    reserve: int
    max_connections: int
    connections: int
    sockets: int

    @property
    def short(self) -> bool:
        """Whether the limit lowers the cap below `max_connections`."""
        return self.connections < self.max_connections

    @property
    def needed(self) -> int:
        """The descriptor limit that leaves `max_connections` whole."""
        return self.max_connections + self.reserve + ACCEPT_HEADROOM


def plan_descriptors(config: Config, limit: int | None) -> DescriptorPlan:
    """The share of `limit` (the soft `RLIMIT_NOFILE`) the connections get under `config`."""
    limits = config.limits
    reserve = (
        OWN_DESCRIPTORS
        + limits.outbound_in_flight
        + 2 * limits.fetches_in_flight
        + PDF_WORKER_DESCRIPTORS * config.fetch.pdf_workers
    )
    if config.service.metrics is not None:
        reserve += METRICS_DESCRIPTORS
    wanted = config.service.http.max_connections
    if limit is None:
        connections = wanted
    else:
        # One connection at least: with fewer descriptors than that nothing can be served,
        # and the warning at start says what to raise.
        connections = max(1, min(wanted, limit - reserve - ACCEPT_HEADROOM))
    return DescriptorPlan(
        limit=limit,
        reserve=reserve,
        max_connections=wanted,
        connections=connections,
        sockets=connections + ACCEPT_HEADROOM,
    )


class Descriptors:
    """The accepted sockets open now (from their accept to their close), against the plan:
    the accept loop waits for one to close before it takes a socket beyond `sockets`."""

    def __init__(self, sockets: int) -> None:
        self._sockets = sockets
        self.open = 0
        self._closed = trio.Event()

    def room(self) -> bool:
        return self.open < self._sockets

    def taken(self) -> None:
        self.open += 1

    def released(self) -> None:
        self.open -= 1
        self._closed.set()

    async def wait_for_room(self) -> None:
        """Return once an accepted socket more may be open."""
        while not self.room():
            self._closed = trio.Event()
            await self._closed.wait()
