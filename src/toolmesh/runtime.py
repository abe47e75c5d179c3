"""Run services until SIGINT/SIGTERM, then stop them cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Sequence
from typing import Protocol

from toolmesh.bus.base import Bus

log = logging.getLogger("toolmesh.runtime")


def configure_logging(level: str = "INFO") -> None:
    """Log to stderr, one line per record (called from ``main``, never at import)."""
    logging.basicConfig(level=level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


async def wait_for_signal(signals: Sequence[signal.Signals] = (signal.SIGINT, signal.SIGTERM)) -> signal.Signals:
    """Wait until one of ``signals`` arrives and return it."""
    loop = asyncio.get_running_loop()
    received: asyncio.Future[signal.Signals] = loop.create_future()

    def on_signal(sig: signal.Signals) -> None:
        if not received.done():
            received.set_result(sig)

    for sig in signals:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        return await received
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


class Part(Protocol):
    """Anything ``serve`` can run: a service, the gateway, a watcher."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


async def serve(bus: Bus, services: Sequence[Part]) -> None:
    """Start ``services`` in order, run until SIGINT/SIGTERM, then stop them in reverse order
    and close ``bus``."""
    started: list[Part] = []
    try:
        for service in services:
            await service.start()
            started.append(service)
        log.info("ready: %d service(s) running; stop with Ctrl-C or SIGTERM", len(services))
        sig = await wait_for_signal()
        log.info("received %s, shutting down", sig.name)
    finally:
        for service in reversed(started):
            with contextlib.suppress(Exception):
                await service.stop()
        await bus.close()
