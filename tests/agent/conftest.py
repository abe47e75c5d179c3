"""Fixtures shared by the agent tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.conftest import Backend
from toolmesh.bus.memory import new_memory_url


@pytest.fixture
async def memory() -> AsyncIterator[Backend]:
    """The memory bus only: the bus is covered elsewhere; these tests are about the agent."""
    backend = Backend("memory", new_memory_url())
    yield backend
    for bus in backend.buses:
        await bus.close()
