"""Run services until SIGINT/SIGTERM, then stop them cleanly."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Sequence
from typing import Protocol

from toolmesh.bus.base import Bus
from toolmesh.logs import configure_logging

__all__ = ["Part", "SignalCatcher", "configure_logging", "serve", "wait_for_signal"]

log = logging.getLogger("toolmesh.runtime")


class SignalCatcher:
    """Catches SIGINT/SIGTERM from the moment it is entered, so a signal that arrives while
    services are still starting is not lost (nor fatal: the default action kills)."""

    def __init__(self, signals: Sequence[signal.Signals] = (signal.SIGINT, signal.SIGTERM)) -> None:
        self.signals = tuple(signals)
        self._received: asyncio.Future[signal.Signals] | None = None

    def __enter__(self) -> SignalCatcher:
        loop = asyncio.get_running_loop()
        self._received = loop.create_future()
        for sig in self.signals:
            loop.add_signal_handler(sig, self._on_signal, sig)
        return self

    def __exit__(self, *exc_info: object) -> None:
        loop = asyncio.get_running_loop()
        for sig in self.signals:
            loop.remove_signal_handler(sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        if self._received is not None and not self._received.done():
            self._received.set_result(sig)

    async def wait(self) -> signal.Signals:
        """The first signal caught (at once if one already came)."""
        assert self._received is not None, "enter the catcher first"
        return await self._received


async def wait_for_signal(signals: Sequence[signal.Signals] = (signal.SIGINT, signal.SIGTERM)) -> signal.Signals:
    """Wait until one of ``signals`` arrives and return it."""
    with SignalCatcher(signals) as catcher:
        return await catcher.wait()


class Part(Protocol):
    """Anything ``serve`` can run: a service, the gateway, a watcher."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


#: how the start-up line names the parts that are not bus services
PART_NAMES = {"Gateway": "the gateway", "MetricsServer": "the metrics endpoint"}


def running(parts: Sequence[Part]) -> str:
    """What runs, for the start-up line: the bus services serving (each logged its "serving"
    line: a part may hold several, as the agent does), and the other parts by name."""
    from toolmesh.rpc.service import Service  # here: a process that runs no service has none

    count = Service.serving()
    said = [f"{count} service{'' if count == 1 else 's'} serving"]
    said += [PART_NAMES.get(type(p).__name__, type(p).__name__) for p in parts
             if not isinstance(p, Service)]
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]


async def serve(bus: Bus, services: Sequence[Part]) -> None:
    """Start ``services`` in order, run until SIGINT/SIGTERM, then stop them together and
    close ``bus``."""
    started: list[Part] = []
    try:
        with SignalCatcher() as signals:
            for service in services:
                await service.start()
                started.append(service)
            log.info("ready: %s; stop with Ctrl-C or SIGTERM", running(started))
            sig = await signals.wait()
        log.info("received %s, shutting down", sig.name)
    finally:
        # All at once, as separate processes would on one SIGTERM: each service drains its
        # requests in hand within its own drain time, so the whole stop takes the longest
        # drain, not their sum.
        results = await asyncio.gather(*(service.stop() for service in reversed(started)),
                                       return_exceptions=True)
        for service, result in zip(reversed(started), results):
            if isinstance(result, Exception):
                log.warning("stopping %s failed: %s", type(service).__name__, result)
        await bus.close()
