"""`toolmesh config history` against a real `toolmesh serve` on each config store: SQLite and
the real PostgreSQL (``TOOLMESH_TEST_POSTGRES``, a schema of its own, dropped after)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import asyncpg
import pytest

from tests.config.test_store_contract import POSTGRES_URL
from tests.processes import run_toolmesh
from tests.servers import toolmesh_serve
from toolmesh.cli.http import GatewayClient


@pytest.fixture(params=["sqlite", "postgres"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path / 'config.db'}"
        return
    schema = f"tm_history_{uuid.uuid4().hex[:10]}"
    sep = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{sep}schema={quote(schema)}"
    finally:
        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_history_shows_who_changed_what_newest_first(store_url: str,
                                                           tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path, "--config-store", store_url, store=False) as served:
        u = ["-u", served.url]
        for n in range(3):
            code, _, err = await run_toolmesh("config", "put", f"flow/f{n}", *u, "-w", "ws2",
                                              stdin_text='{"description": "d"}')
            assert code == 0, err
        code, _, err = await run_toolmesh("config", "delete", "flow/f0", *u, "-w", "ws2")
        assert code == 0, err
        code, _, err = await run_toolmesh("config", "put", "flow/other", *u,
                                          stdin_text='{"description": "d"}')
        assert code == 0, err
        # deleting what is not there: refused by the CLI; asked of the service directly (as
        # TrustGraph's client does), answered with the current version, making none
        code, _, err = await run_toolmesh("config", "delete", "flow/f0", *u, "-w", "ws2")
        assert code == 1 and "no config item flow/f0 in workspace 'ws2'" in err, err
        answer = await asyncio.to_thread(GatewayClient(served.url, token="").post,
                                         "api/v1/config", {"operation": "delete", "workspace":
                                                           "ws2", "keys": [{"type": "flow",
                                                                            "key": "f0"}]})
        assert answer["version"] == 5
        code, out, err = await run_toolmesh("config", "history", *u, "-w", "ws2")
        limited = await run_toolmesh("config", "history", *u, "-w", "ws2", "--limit", "2")
        one = await run_toolmesh("config", "history", "flow/f0", *u, "-w", "ws2")
        typed = await run_toolmesh("config", "history", "flow", *u)
        bad = await run_toolmesh("config", "history", *u, "--limit", "0")
    assert code == 0, err
    header, *lines = out.splitlines()
    assert header.split() == ["AT", "VERSION", "OPERATION", "WORKSPACE", "ITEM", "ACTOR"]
    assert [line.split()[1:] for line in lines] == [
        ["4", "delete", "ws2", "flow/f0", "local"],
        ["3", "put", "ws2", "flow/f2", "local"],
        ["2", "put", "ws2", "flow/f1", "local"],
        ["1", "put", "ws2", "flow/f0", "local"]]
    assert limited[1].splitlines() == [header, *lines[:2]]
    assert [line.split()[2] for line in one[1].splitlines()[1:]] == ["delete", "put"]
    assert [line.split()[1:4] for line in typed[1].splitlines()[1:]] == [["5", "put", "default"]]
    assert bad[0] == 1 and "limit must be a whole number from 1 to 1000" in bad[2]
