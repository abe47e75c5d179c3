"""Fixtures shared by the gateway tests: an in-process gateway (open, and guarded by a token
and a small body limit) with a config service, and an HTTP client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.gateway.test_gateway import start_gateway
from toolmesh.gateway import Gateway
from toolmesh.gateway.bounds import Bounds


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    async for gw in start_gateway(tmp_path):
        yield gw


@pytest.fixture
async def guarded(tmp_path: Path) -> AsyncIterator[Gateway]:
    async for gw in start_gateway(tmp_path, token="s3cret", bounds=Bounds(max_body=4096)):
        yield gw


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session
