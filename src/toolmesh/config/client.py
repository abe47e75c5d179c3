"""Clients of the config service: operations (:class:`ConfigClient`) and change subscription
(:class:`ConfigWatcher`).

A watcher hands its owner the **full current content** of every type it watches, at start
and after every change that touches one of them — never only the changed type (the reference
implementation lost tools that way) — in increasing version order, with no restart.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType, TracebackType
from typing import Any, Literal

from toolmesh.bus.base import Bus, Message, Subscription
from toolmesh.config.service import (
    CONFIG_PUSH_QUEUE,
    CONFIG_REQUEST_QUEUE,
    CONFIG_RESPONSE_QUEUE,
    DEFAULT_WORKSPACE,
)
from toolmesh.errors import MalformedMessage, RequestError
from toolmesh.rpc.client import RequestClient, RpcClient

log = logging.getLogger("toolmesh.config.client")

CONFIG_HINT = "is `toolmesh run config` running? (`toolmesh serve` runs every part)"


class ConfigClient(RpcClient):
    """The config operations over the bus; each returns the service's response dict."""

    def __init__(self, bus: Bus, *, timeout: float = 30.0,
                 request_queue: str = CONFIG_REQUEST_QUEUE,
                 response_queue: str = CONFIG_RESPONSE_QUEUE,
                 when_no_consumer: Literal["wait", "fail"] = "wait",
                 hint: str = CONFIG_HINT) -> None:
        self.timeout = timeout
        self._rpc = RequestClient(bus, request_queue=request_queue, response_queue=response_queue,
                                  when_no_consumer=when_no_consumer, hint=hint)


    async def request(self, request: Mapping[str, Any], *,
                      request_id: str | None = None) -> dict[str, Any]:
        """Send a raw config request; :class:`RequestError` if the service answers an error.

        ``request_id``: send it as this id (default: a new one). The service applies a put or
        delete once per id, so a call that timed out can be retried with the same id without
        the risk of applying it twice; the retry answers the version the first one made.
        """
        return await self._rpc.request(request, timeout=self.timeout, request_id=request_id)

    async def put(self, values: Mapping[tuple[str, str], str], *,
                  workspace: str = DEFAULT_WORKSPACE, request_id: str | None = None) -> int:
        """Store ``{(type, key): value}`` atomically; the new version (see :meth:`request`
        for ``request_id``)."""
        response = await self.request({
            "operation": "put", "workspace": workspace,
            "values": [{"type": t, "key": k, "value": v} for (t, k), v in values.items()]},
            request_id=request_id)
        return int(response["version"])

    async def delete(self, keys: Sequence[tuple[str, str]], *,
                     workspace: str = DEFAULT_WORKSPACE, request_id: str | None = None) -> int:
        """Delete ``[(type, key)]``; the new version (see :meth:`request` for ``request_id``)."""
        response = await self.request({"operation": "delete", "workspace": workspace,
                                       "keys": [{"type": t, "key": k} for t, k in keys]},
                                      request_id=request_id)
        return int(response["version"])

    async def get(self, type: str, key: str, *, workspace: str = DEFAULT_WORKSPACE) -> str | None:
        """One value, or ``None`` if it is missing."""
        response = await self.request({"operation": "get", "workspace": workspace,
                                       "keys": [{"type": type, "key": key}]})
        return response["values"][0]["value"]

    async def list(self, type: str, *, workspace: str = DEFAULT_WORKSPACE) -> list[str]:
        """The keys of ``type``."""
        response = await self.request({"operation": "list", "workspace": workspace,
                                       "type": type})
        return [str(k) for k in response.get("directory") or []]

    async def config(self, *, workspace: str = DEFAULT_WORKSPACE) -> tuple[int, dict[str, dict[str, str]]]:
        """``(version, {type: {key: value}})`` for the whole workspace."""
        response = await self.request({"operation": "config", "workspace": workspace})
        return int(response["version"]), response["config"] or {}


@dataclass(frozen=True, slots=True)
class ConfigSnapshot:
    """Every item of the watched types at one version (types with no items map to ``{}``)."""

    version: int
    workspace: str
    items: Mapping[str, Mapping[str, str]]

    def of(self, type: str) -> Mapping[str, str]:
        """``key -> value`` of one watched type."""
        return self.items.get(type, MappingProxyType({}))


OnChange = Callable[[ConfigSnapshot], Awaitable[None]]


class ConfigWatcher:
    """Delivers :class:`ConfigSnapshot`\\ s of ``types`` to ``on_change``.

    At :meth:`start` it subscribes to the push queue first (so no change slips between load
    and subscription), then loads. If the config service is not up yet, the first push it
    sends when it starts triggers the load. An exception in ``on_change`` is logged and the
    next change is delivered as usual.
    """

    def __init__(self, bus: Bus, *, types: Sequence[str], on_change: OnChange,
                 workspace: str = DEFAULT_WORKSPACE, timeout: float = 30.0,
                 push_queue: str = CONFIG_PUSH_QUEUE, **queues: str) -> None:
        self.types = tuple(types)
        self.workspace = workspace
        self._bus = bus
        self._on_change = on_change
        self._push_queue = push_queue
        self._client = ConfigClient(bus, timeout=timeout, **queues)
        self._subscription: Subscription | None = None
        self._lock = asyncio.Lock()
        self.version = -1  # the version last delivered; -1 before the first
        self._loaded = asyncio.Event()

    async def start(self) -> None:
        await self._client.start()
        self._subscription = await self._bus.subscribe(
            self._push_queue, self._on_push, subscription="config-watcher", concurrency=1)
        try:
            await self.reload()
        except RequestError as e:
            log.warning("config not loaded yet (%s); waiting for the config service", e.message)

    async def stop(self) -> None:
        if self._subscription is not None:
            await self._subscription.close()
            self._subscription = None
        await self._client.stop()

    async def __aenter__(self) -> ConfigWatcher:
        await self.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    async def wait_loaded(self) -> None:
        """Wait until the first snapshot has been delivered."""
        await self._loaded.wait()

    async def reload(self) -> None:
        """Fetch the watched types and deliver them if they are newer than the last delivery."""
        async with self._lock:
            version, config = await self._client.config(workspace=self.workspace)
            if version <= self.version:
                return
            items = {t: MappingProxyType(dict(config.get(t, {}))) for t in self.types}
            snapshot = ConfigSnapshot(version, self.workspace, MappingProxyType(items))
            self.version = version
            try:
                await self._on_change(snapshot)
            except Exception:
                log.exception("applying config version %d failed", version)
            self._loaded.set()

    def _concerns_us(self, push: Any) -> bool:
        if not isinstance(push, dict) or not isinstance(push.get("version"), int):
            raise MalformedMessage(f"config push is not {{version, changes}}: {push!r}")
        if push["version"] <= self.version:
            return False
        if self.version < 0:
            return True  # never loaded: any push means the service is up
        changes = push.get("changes")
        if not isinstance(changes, dict):
            return True  # a push without a change list: reload to be safe
        return any(t in changes and self.workspace in (changes[t] or []) for t in self.types)

    async def _on_push(self, message: Message) -> None:
        try:
            push = message.json()
            if not self._concerns_us(push):
                return
            await self.reload()
        except (MalformedMessage, RequestError) as e:
            log.warning("config push not applied: %s", e.message)
