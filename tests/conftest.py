"""Fixtures shared by the whole suite: the bus backends and unique names."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from tests.rabbit import RABBITMQ_URL, close_connection_from_broker, delete_test_entities
from toolmesh import Bus, connect
from toolmesh.bus.memory import new_memory_url

#: every queue and exchange a test run creates on a shared broker carries this marker
RUN_MARKER = f"tmtest{uuid.uuid4().hex[:8]}"


@dataclass
class Backend:
    """One bus backend under test: connect to it (as separate processes would) and break it."""

    name: str
    url: str
    buses: list[Bus] = field(default_factory=list)
    break_connection: Callable[[Bus], Awaitable[None]] | None = None

    async def connect(self) -> Bus:
        bus = await connect(self.url)
        self.buses.append(bus)
        return bus

    def topic(self, base: str = "t") -> str:
        """A topic name no other test uses."""
        return f"{RUN_MARKER}-{base}-{uuid.uuid4().hex[:8]}"


async def _break_rabbitmq(bus: Bus) -> None:
    await close_connection_from_broker(bus.connection_name)  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def _rabbitmq_cleanup() -> Iterator[None]:
    yield
    asyncio.run(delete_test_entities(RUN_MARKER))


def _make_backend(name: str, request: pytest.FixtureRequest) -> Backend:
    if name == "memory":
        return Backend("memory", new_memory_url())
    request.getfixturevalue("_rabbitmq_cleanup")
    return Backend("rabbitmq", RABBITMQ_URL, break_connection=_break_rabbitmq)


@pytest.fixture(params=["memory", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """Each test using this fixture runs once per bus backend."""
    b = _make_backend(request.param, request)
    yield b
    for bus in b.buses:
        await bus.close()


@pytest.fixture
async def rabbitmq(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """The RabbitMQ backend only (for tests of its topology)."""
    b = _make_backend("rabbitmq", request)
    yield b
    for bus in b.buses:
        await bus.close()


@pytest.fixture
async def bus(backend: Backend) -> Bus:
    """One connection to the backend under test."""
    return await backend.connect()
