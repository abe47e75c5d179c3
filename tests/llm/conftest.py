"""Fixtures of the LLM layer's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest


@pytest.fixture
async def stop_later() -> AsyncIterator[list[Any]]:
    """Services and clients to stop when the test ends, last first."""
    parts: list[Any] = []
    yield parts
    for part in reversed(parts):
        await part.stop()
