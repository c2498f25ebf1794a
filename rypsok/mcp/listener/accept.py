"""Taking connections: the listening socket, and the accept loop in bursts.

Accepts are taken in bursts: a flood's connections queued in the backlog are not each a
scheduling round ahead of a caller's. The backlog is first in, first out, and a flood that
reconnects as soon as it is closed keeps it filled (300 connections at a cap of 64 keep about
236 there): a health probe or a caller's connection is reached once everything queued ahead
of it is taken. So a burst runs until the backlog is empty, 64 connections are admitted, or
5 ms have passed; a newcomer closed unanswered (no room, or past its caller's share) costs an
accept, a peek and a close and does not count against the 64. After a burst that closed one,
the next connections wait in the backlog three times the CPU time the burst took, 2 ms at
least: the refusals take at most a quarter of the loop's time however large the flood, and
the connections already served run meanwhile. The pause counts the loop thread's CPU time,
not the clock: on a busy host a burst is preempted, and a pause grown with that time would leave
a probe in the backlog longer without giving the served connections more CPU. A fixed pause
after each 64 refusals would instead hold a probe one pause per 64 connections queued ahead
of it.

The kernel holds a connection until its first bytes come, a second at most (`defer_accept`):
a caller that writes its request after its connect is known at its accept, never closed as a
newcomer without its request, nor made room with before its head is read. An accept error
(descriptors exhausted) backs off 100 ms and is logged at most once per 10 s.
"""

from __future__ import annotations

import errno
import math
import socket as stdlib_socket
import time
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
# Connections admitted in one wake-up, at most (nginx's multi_accept, bounded): each starts
# a task whose first rounds come before the next wake-up's.
_ACCEPT_BURST: Final = 64
# How long one wake-up's accepts run without a checkpoint, at most: the served connections
# wait no longer than this for a scheduling round.
_BURST_S: Final = 0.005
# Once a burst closed a newcomer unanswered, the next wait in the backlog this many times
# the CPU time the burst took (the refusals' share of the loop: 1 in 1 + this) ...
_PAUSE_PER_BURST: Final = 3
# ... and at least this long: a round trip for a client's head to follow its connect, where
# the kernel does not hold the connection until it comes.
_CROWDED_PAUSE_S: Final = 0.002
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
    newcomer was closed unanswered), as trio's socket (a wake-up's first) or the standard
    library's (the rest of its burst), never more sockets at once than `descriptors` allows;
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
                began = trio.current_time()
                cpu = time.thread_time()
                refused = not self._admit(client, family)
                admitted = 0 if refused else 1
                # trio's accept ends with a checkpoint that no cancel interrupts: the shutdown
                # may have cancelled this loop and closed the socket meanwhile, and an accept
                # on its descriptor would fail (EBADF) instead of the loop ending.
                await trio.lowlevel.checkpoint_if_cancelled()
                # What else the listen backlog holds, taken now: trio's accept is one per
                # scheduling round, so under a flood renewing itself a caller's connection
                # would wait in the backlog one round per connection queued before it,
                # each round running every connection's work.
                while admitted < _ACCEPT_BURST and trio.current_time() - began < _BURST_S:
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
                    # Handed over as the standard library's socket: trio's is made only
                    # for a connection admitted, not for each refused one.
                    if self._admit(raw, family):
                        admitted += 1
                    else:
                        refused = True
                if refused:
                    # A newcomer of this wake-up was closed unanswered (no room, or past its
                    # caller's share): a flood renewing itself (a flood closed at once
                    # reconnects at once, and a caller's request takes tens of rounds). The
                    # next ones wait in the backlog while the connections already served
                    # run, in proportion to the CPU the burst took (the module's docstring).
                    spent = time.thread_time() - cpu
                    await trio.sleep(max(_CROWDED_PAUSE_S, _PAUSE_PER_BURST * spent))
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
