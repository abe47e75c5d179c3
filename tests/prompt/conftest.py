"""The ``stack`` fixture: the prompt service with its config service, LLM and clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import Backend
from tests.prompt.harness import Stack, prompt_stack


@pytest.fixture
async def stack(backend: Backend, tmp_path: Path) -> AsyncIterator[Stack]:
    async with prompt_stack(backend, tmp_path) as s:
        yield s
