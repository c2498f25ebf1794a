"""Taking connections: the listening socket, and the accept loop in bursts.

Accepts are taken in bursts: a flood's connections queued in the backlog are not each a
scheduling round ahead of a caller's; once a burst closed a newcomer unanswered, the next
connections wait a moment in the backlog (the served ones run meanwhile). The kernel holds a
connection until its first bytes come, a second at most (`defer_accept`): a caller that
writes its request after its connect is known at its accept, never closed as a newcomer
without its request, nor made room with before its head is read. An accept error
(descriptors exhausted) backs off 100 ms and is logged at most once per 10 s.
"""

from __future__ import annotations

import errno
import math
import socket as stdlib_socket
from typing import TYPE_CHECKING, Any, Final

import trio

from rypsok.config.rules import parse_bind
from rypsok.core import telemetry

if TYPE_CHECKING:
    from collections.abc import Callable

    from rypsok.mcp.listener.descriptors import Descriptors

__all__ = ["ACCEPT_BACKOFF_S", "ACCEPT_LOG_INTERVAL_S", "AcceptLoop", "listening_socket"]

ACCEPT_BACKOFF_S: Final = 0.1
ACCEPT_LOG_INTERVAL_S: Final = 10.0
_BACKLOG: Final = 1024
# Accepts after the first of one wake-up, at most (nginx's multi_accept, bounded).
_ACCEPT_BURST: Final = 64
# How long new connections wait in the backlog once a newcomer was closed unanswered (no
# room, or past its caller's share): long enough for the served connections to run, and for
# a client's head to follow its connect (a round trip) where the kernel does not wait for it.
_CROWDED_PAUSE_S: Final = 0.02
# How long the kernel holds a new connection that has sent nothing (`defer_accept`): the
# SYN-ACK is sent again after a second and the connection is accepted at the peer's answer.
# A client writes its request right after its connect; one that stays silent is accepted a
# second late and then bounded by LIM-H3 as before.
DEFER_ACCEPT_S: Final = 1
_NO_DESCRIPTOR: Final = frozenset({errno.EMFILE, errno.ENFILE})
# Accept errors that say "not now" (descriptors or buffers exhausted), not "never".
_TRANSIENT_ACCEPT: Final = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.ECONNABORTED, errno.EPROTO}
)


class AcceptLoop:
    """Accepts connections on one listening socket and hands each to `admit` (False: the
    newcomer was closed unanswered), never more sockets at once than `descriptors` allows;
    `exhausted` makes room when the system has no descriptor left all the same."""

    def __init__(
        self,
        admit: Callable[[Any, str], bool],
        descriptors: Descriptors,
        exhausted: Callable[[], object],
    ) -> None:
        self._admit = admit
        self._descriptors = descriptors
        self._exhausted = exhausted
        self._last_accept_log = -math.inf

    async def run(self, sock: Any) -> None:
        family = "ipv6" if sock.family == stdlib_socket.AF_INET6 else "ipv4"
        # The same listening descriptor, for the accepts after the first of a wake-up.
        backlog = stdlib_socket.socket(fileno=sock.fileno())
        try:
            while True:
                # At the descriptor plan's bound the next socket waits in the backlog until
                # one closes (an eviction's, a refused newcomer's): the cap is met, not EMFILE.
                await self._descriptors.wait_for_room()
                try:
                    client, _ = await sock.accept()
                except OSError as exc:
                    await self._accept_failed(exc)
                    continue
                self._descriptors.taken()
                refused = not self._admit(client, family)
                # trio's accept ends with a checkpoint that no cancel interrupts: the shutdown
                # may have cancelled this loop and closed the socket meanwhile, and an accept
                # on its descriptor would fail (EBADF) instead of the loop ending.
                await trio.lowlevel.checkpoint_if_cancelled()
                # What else the listen backlog holds, taken now: trio's accept is one per
                # scheduling round, so under a flood renewing itself a caller's connection
                # would wait in the backlog one round per connection queued before it,
                # each round running every connection's work.
                for _ in range(_ACCEPT_BURST):
                    # `backlog` borrows the listening socket's descriptor: once the owner
                    # has closed it (the shutdown), the number is no longer ours to use.
                    if not self._descriptors.room() or sock.fileno() < 0:
                        break
                    try:
                        raw, _ = backlog.accept()
                    except BlockingIOError:
                        break
                    except OSError as exc:
                        await self._accept_failed(exc)
                        break
                    self._descriptors.taken()
                    raw_client = trio.socket.from_stdlib_socket(raw)
                    refused = not self._admit(raw_client, family) or refused
                if refused:
                    # A newcomer of this wake-up was closed unanswered (no room, or past its
                    # caller's share): a flood renewing itself. The next ones wait in the
                    # backlog a moment: the connections already served get scheduling
                    # rounds without a burst of refusals in each (a flood closed at once
                    # reconnects at once, and a caller's request takes tens of rounds), and
                    # where the kernel does not hold connections until their bytes come,
                    # their heads are there at their accept.
                    await trio.sleep(_CROWDED_PAUSE_S)
        finally:
            backlog.detach()  # the descriptor stays the listening socket's

    async def _accept_failed(self, exc: OSError) -> None:
        """An accept error that says "not now" (descriptors exhausted): back off, logged at
        most once per interval; any other is raised."""
        if exc.errno not in _TRANSIENT_ACCEPT:
            raise exc
        if exc.errno in _NO_DESCRIPTOR:
            # Taken by the rest of the process after all: a connection waiting without a
            # request makes room, as at the cap.
            self._exhausted()
        now = trio.current_time()
        if now - self._last_accept_log >= ACCEPT_LOG_INTERVAL_S:
            self._last_accept_log = now
            telemetry.warn("accept_failed", error=errno.errorcode.get(exc.errno or 0, ""))
        await trio.sleep(ACCEPT_BACKOFF_S)


def defer_accept(sock: stdlib_socket.socket) -> bool:
    """Have the kernel hold a new connection until its first bytes come (`TCP_DEFER_ACCEPT`,
    Linux), `DEFER_ACCEPT_S` at most: a connection is then the listener's with its request
    head in its buffer, known at its accept. False where the system has no
    such option; the listener then also takes connections before their first bytes."""
    option = getattr(stdlib_socket, "TCP_DEFER_ACCEPT", None)
    if option is None:
        return False
    try:
        sock.setsockopt(stdlib_socket.IPPROTO_TCP, option, DEFER_ACCEPT_S)
    except OSError:
        return False
    return True


def listening_socket(bind: str, port: int | None = None) -> stdlib_socket.socket:
    """The bound, listening socket of `[service.http] bind` (`port` replaces its port).

    Bound before the event loop starts, so that an address in use is a plain error.
    """
    parsed = parse_bind(bind)
    family = stdlib_socket.AF_INET6 if parsed.host.version == 6 else stdlib_socket.AF_INET
    sock = stdlib_socket.socket(family, stdlib_socket.SOCK_STREAM)
    try:
        sock.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_REUSEADDR, 1)
        if family == stdlib_socket.AF_INET6:
            sock.setsockopt(stdlib_socket.IPPROTO_IPV6, stdlib_socket.IPV6_V6ONLY, 1)
        sock.bind((str(parsed.host), parsed.port if port is None else port))
        defer_accept(sock)
        sock.listen(_BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock
