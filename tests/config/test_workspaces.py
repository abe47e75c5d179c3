"""The per-workspace watcher against a real config service: loaded at first use, followed by
pushes per workspace, bounded, and no trace left by names that never load."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import Backend
from tests.config.test_config_service import queues_of
from toolmesh import RequestError
from toolmesh.config.client import ConfigClient, ConfigSnapshot
from toolmesh.config.service import ConfigService
from toolmesh.config.store import open_store
from toolmesh.config.workspaces import WorkspaceWatcher

#: the tests run on the memory bus only (the config service is covered on every backend)
pytestmark = pytest.mark.parametrize("backend", ["memory"], indirect=True)


@pytest.fixture
async def service(backend: Backend, tmp_path: Path) -> AsyncIterator[ConfigService]:
    topic = backend.topic("ws")
    store = await open_store(str(tmp_path / "config.db"))
    service = ConfigService(await backend.connect(), store, push_queue=f"notify:tg:{topic}",
                            request_queue=f"request:tg:{topic}",
                            response_queue=f"response:tg:{topic}")
    async with service:
        yield service
    await store.close()


class Seen:
    """What a watcher delivered and forgot, with a way to wait for a delivery."""

    def __init__(self) -> None:
        self.snapshots: list[ConfigSnapshot] = []
        self.forgotten: list[str] = []
        self.delivered = asyncio.Condition()

    async def on_change(self, snapshot: ConfigSnapshot) -> None:
        async with self.delivered:
            self.snapshots.append(snapshot)
            self.delivered.notify_all()

    async def on_forget(self, workspace: str) -> None:
        self.forgotten.append(workspace)

    async def wait_for(self, workspace: str, version: int) -> ConfigSnapshot:
        def found() -> ConfigSnapshot | None:
            return next((s for s in reversed(self.snapshots)
                         if s.workspace == workspace and s.version >= version), None)

        async with asyncio.timeout(10), self.delivered:
            await self.delivered.wait_for(lambda: found() is not None)
        snapshot = found()
        assert snapshot is not None
        return snapshot


async def test_workspaces_load_at_first_use_and_follow_their_own_changes(
        backend: Backend, service: ConfigService) -> None:
    seen = Seen()
    bus = await backend.connect()
    async with ConfigClient(bus, timeout=10, request_queue=str(service.request_queue),
                            response_queue=str(service.response_queue)) as client, \
            WorkspaceWatcher(bus, types=["widget"], on_change=seen.on_change,
                             on_forget=seen.on_forget, max_workspaces=2,
                             **queues_of(service)) as watcher:
        assert [s.workspace for s in seen.snapshots] == ["default"]  # preloaded
        version = await client.put({("widget", "a"): json.dumps({"x": 1})}, workspace="ws1")
        assert watcher.version("ws1") == -1  # nobody asked for it: not loaded
        await watcher.ensure("ws1")
        assert dict(seen.snapshots[-1].of("widget")) == {"a": json.dumps({"x": 1})}
        # a change to ws2 reaches nobody; one to ws1 reaches ws1 only
        await client.put({("widget", "b"): "{}"}, workspace="ws2")
        changed = await client.put({("widget", "a"): json.dumps({"x": 2})}, workspace="ws1")
        ws1 = await seen.wait_for("ws1", changed)
        assert json.loads(ws1.of("widget")["a"]) == {"x": 2} and "b" not in ws1.of("widget")
        assert {s.workspace for s in seen.snapshots} == {"default", "ws1"}
        assert version < changed
        # a third workspace pushes out the least recently used (default)
        await watcher.ensure("ws2")
        assert seen.forgotten == ["default"]
        assert watcher.version("default") == -1 and watcher.version("ws2") > 0


async def test_names_that_never_load_leave_nothing_behind(
        backend: Backend, service: ConfigService) -> None:
    seen = Seen()
    async with WorkspaceWatcher(await backend.connect(), types=["widget"],
                                on_change=seen.on_change, **queues_of(service)) as watcher:
        for i in range(200):
            with pytest.raises(RequestError):
                await watcher.ensure(f"bad\x00{i}")  # the store refuses the name
        assert len(watcher._locks) <= 1  # the default workspace's, at most
        assert [s.workspace for s in seen.snapshots] == ["default"]
