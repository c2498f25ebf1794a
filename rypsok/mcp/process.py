"""What both transports open around serving, in a process of their own: the stop and the core.

`rypsok serve` over stdio and over HTTP open the same things in the same order: the signal
receiver, then the early flag (`rypsok._early`: a SIGTERM that came while the modules were
importing), then a task that turns each signal received into the stop event, then the core.
In the console script's own process only (`rypsok.shared.own_process`), the interpreter is
tuned for serving before the core is built, and what start-up made is frozen out of later
collections once it is (`startup_done`). The transport serves inside; on the way out the core
closes first, then the task ends. What differs stays with each transport: the signals
listened to, its streams or its socket, and what it does once the core is built.
"""

from __future__ import annotations

import contextlib
import gc
from typing import TYPE_CHECKING

import trio

from rypsok import _early
from rypsok.core import telemetry
from rypsok.shared import own_process

if TYPE_CHECKING:
    import signal
    from collections.abc import AsyncIterator, Callable, Mapping, Sequence

    from rypsok.config.schema import Config
    from rypsok.core.services import Rypsok

__all__ = ["Activity", "default_service", "serving", "startup_done"]


def default_service(config: Config, env: Mapping[str, str]) -> Callable[[], Rypsok]:
    """What `rypsok serve` serves: the production core of `config`, engine keys read from
    `env`. A transport takes a function that builds its core, called once the signal
    receiver is in place; a test, the conformance harness or a bench hands in one that builds
    the core with its own engines or network, and the transport never knows."""

    def build() -> Rypsok:
        from rypsok.core.services import Rypsok

        return Rypsok(config, env=env)

    return build


class Activity:
    """Work in flight (calls, batches, requests) and an event set whenever there is none:
    both transports wait on it to drain at shutdown."""

    def __init__(self) -> None:
        self.count = 0
        self.idle = trio.Event()
        self.idle.set()

    def started(self) -> None:
        if self.count == 0:
            self.idle = trio.Event()
        self.count += 1

    def ended(self) -> None:
        self.count -= 1
        if self.count == 0:
            self.idle.set()


@contextlib.asynccontextmanager
async def serving(
    service: Callable[[], Rypsok], signals: Sequence[signal.Signals]
) -> AsyncIterator[tuple[Rypsok, trio.Event]]:
    """The core `service` builds, and the event that any of `signals` (logged as
    `sigterm_received`), or one that came before, sets: the transport serves until it is set."""
    stop = trio.Event()
    with trio.open_signal_receiver(*signals) as received:
        # Read after the receiver is in place, so no signal falls between the two.
        if _early.received():
            stop.set()
        async with trio.open_nursery() as nursery:

            async def watch_signals() -> None:
                async for _ in received:
                    telemetry.info("sigterm_received")
                    stop.set()

            nursery.start_soon(watch_signals)
            own_process.tune_for_serving()
            async with service() as rypsok:
                startup_done()
                yield rypsok, stop
            nursery.cancel_scope.cancel()


def startup_done() -> None:
    """Freeze what start-up made, once the core is built, in the console script's process.

    What start-up made (modules, configuration, the core) lives until exit: frozen, it is
    left out of every later collection, so that a full pass walks only what requests made
    and its pause stays short (p99), and the exit's own pass is short too. The collector
    itself runs as Python runs it, start-up included. No collection first: it would cost a
    pause before the first answer and change nothing a request sees; the price is the start's
    own garbage kept until exit (decisions/process-startup). Nothing happens in a program
    that imports rypsok (an embedding host, a test runner): its heap is its own.
    """
    if own_process.is_own():
        gc.freeze()
