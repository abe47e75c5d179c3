"""The config service: TrustGraph's config operations over the bus, per workspace.

Queues are TrustGraph's: requests on ``request:tg:config``, responses on
``response:tg:config``, and after every put/delete that changes something a push on
``notify:tg:config``:
``{"version": N, "changes": {"<type>": ["<workspace>"]}}``.

Puts and deletes are idempotent by request id (the bus message's ``id``): a broker redelivers
a request whose service died before acknowledging it, possibly after it was committed. The
store applies a request id once and answers a repeat with the version it produced; whether a
repeat is pushed again is decided in :mod:`toolmesh.config.pushed`.

A delete none of whose keys exists changes nothing: the store makes no version for it, the
answer carries the current one, and nothing is pushed (TrustGraph's ``tg-delete-config-item``
still gets its usual answer).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from toolmesh.bus.base import Bus, Message, Producer
from toolmesh.config.admin import AdminOperations, actor_of
from toolmesh.config.errors import ConfigError
from toolmesh.config.pushed import PushedRequests
from toolmesh.config.stdio import DENY_ALL, StdioAllowList
from toolmesh.config.store.base import ConfigStore, Unchanged
from toolmesh.config.validation import validate
from toolmesh.rpc.service import Reply, Service
from toolmesh.secrets.crypto import SecretBox
from toolmesh.secrets.fields import keep_secrets, needs_stored
from toolmesh.secrets.store import SealedStore
from toolmesh.telemetry import metrics

log = logging.getLogger("toolmesh.config")

CONFIG_REQUEST_QUEUE = "request:tg:config"
CONFIG_RESPONSE_QUEUE = "response:tg:config"
CONFIG_PUSH_QUEUE = "notify:tg:config"
DEFAULT_WORKSPACE = "default"
#: the items of one type a workspace reads as if stored, given its stored ones
Defaults = Callable[[Mapping[str, str]], dict[str, str]]

OPERATIONS = ("get", "list", "getvalues", "config", "put", "delete", "getvalues-all-ws")

# The id of the request being handled. Service.handle does not receive the message, so
# _on_request sets it around the handler: a ContextVar is per task, and a task handles one
# delivery at a time.
_request_id: ContextVar[str | None] = ContextVar("toolmesh_config_request_id", default=None)


def empty_response(version: int | None = None) -> dict[str, Any]:
    """A response with every field present, as TrustGraph's clients expect."""
    return {"version": version, "values": None, "directory": None, "config": None, "error": None}


class ConfigService(Service):
    """Serves the config operations from a :class:`ConfigStore`.

    Secrets: a put that sends a secret back masked (``***``) keeps the stored one (see
    :mod:`toolmesh.secrets.fields`); with ``secret_box`` the secrets are stored encrypted.
    Values go out over the bus in clear — services need them; the gateway masks them for
    everyone outside. ``stdio_allow``: the commands ``stdio`` MCP items may run (default none).
    """

    error_type = "config-error"

    def __init__(self, bus: Bus, store: ConfigStore, *,
                 request_queue: str = CONFIG_REQUEST_QUEUE,
                 response_queue: str = CONFIG_RESPONSE_QUEUE,
                 push_queue: str = CONFIG_PUSH_QUEUE,
                 id: str = "config-svc",
                 stdio_allow: StdioAllowList = DENY_ALL,
                 secret_box: SecretBox | None = None,
                 defaults: Mapping[str, Defaults] | None = None) -> None:
        """``defaults``: per type, the items a workspace reads as if stored, given what it
        has stored (the shipped prompts: TrustGraph's ``tg-show-prompts`` needs
        ``prompt/system`` on a fresh deployment). Reads (get, list, getvalues) show them under
        the stored items; the ``config`` dump and the store do not hold them."""
        super().__init__(bus, request_queue=request_queue, response_queue=response_queue,
                         subscription=id)
        self.defaults = dict(defaults or {})
        self.store = SealedStore(store, secret_box)
        self.stdio_allow = stdio_allow
        self.push_queue = push_queue
        self._push: Producer | None = None
        self._pushed = PushedRequests()
        self._handlers: dict[str, Callable[[str, dict[str, Any]], Any]] = {
            "get": self._get, "list": self._list, "getvalues": self._getvalues,
            "config": self._config, "put": self._put, "delete": self._delete,
            "getvalues-all-ws": self._getvalues_all_workspaces,
        }
        # the audit and the tokens (toolmesh.config.admin): never config items
        self._handlers.update(
            AdminOperations(self.store, self._send_push, empty_response).handlers())

    async def start(self) -> None:
        await self.store.survey()
        self._push = await self.bus.producer(self.push_queue)
        await super().start()
        # Tell watchers that started before this service that config can now be loaded.
        version = await self.store.version()
        metrics.saw_config_version(version)
        await self._push.send({"version": version, "changes": {}})

    def error_response(self, error: dict[str, str]) -> dict[str, Any]:
        return {**empty_response(), "error": error}

    async def _on_request(self, message: Message) -> None:
        token = _request_id.set(message.id or None)  # an empty id identifies nothing
        try:
            await super()._on_request(message)
        finally:
            _request_id.reset(token)

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        operation = request.get("operation")
        handler = self._handlers.get(operation) if isinstance(operation, str) else None
        if handler is None:
            raise ConfigError(f"unknown config operation {operation!r}; operations: "
                              + ", ".join(OPERATIONS))
        workspace = request.get("workspace")
        if workspace is None or workspace == "":  # absent: TrustGraph's single workspace
            workspace = DEFAULT_WORKSPACE
        if not isinstance(workspace, str):
            raise ConfigError(f"'workspace' must be a string, not {workspace!r}")
        await reply(await handler(workspace, request))

    async def _values(self, workspace: str, type: str) -> dict[str, str]:
        """``type``'s items of ``workspace``, its defaults under the stored ones."""
        stored = await self.store.values(workspace, type)
        fill = self.defaults.get(type)
        return {**fill(stored), **stored} if fill is not None else stored

    async def _get(self, workspace: str, request: dict[str, Any]) -> dict[str, Any]:
        keys = _keys(request)
        version = await self.store.version()
        values = list(await self.store.get(workspace, keys))
        for i, ((type, key), value) in enumerate(zip(keys, values)):
            if value is None and type in self.defaults:
                values[i] = (await self._values(workspace, type)).get(key)
        return {**empty_response(version),
                "values": [{"type": t, "key": k, "value": v} for (t, k), v in zip(keys, values)]}

    async def _list(self, workspace: str, request: dict[str, Any]) -> dict[str, Any]:
        type = _type(request)
        version = await self.store.version()
        if type in self.defaults:
            return {**empty_response(version),
                    "directory": sorted(await self._values(workspace, type))}
        return {**empty_response(version), "directory": await self.store.keys(workspace, type)}

    async def _getvalues(self, workspace: str, request: dict[str, Any]) -> dict[str, Any]:
        type = _type(request)
        version = await self.store.version()
        values = await self._values(workspace, type)
        return {**empty_response(version),
                "values": [{"type": type, "key": k, "value": v} for k, v in sorted(values.items())]}

    async def _getvalues_all_workspaces(self, workspace: str,
                                        request: dict[str, Any]) -> dict[str, Any]:
        """Every item of ``type`` in every workspace, each naming its ``workspace``
        (TrustGraph's ``getvalues-all-ws``, for processes that serve all workspaces; the
        request's own workspace plays no part). It reads every tenant's items: through the
        gateway only the admin may ask (docs/security.md)."""
        type = _type(request)
        version = await self.store.version()
        values = [{"workspace": ws, "type": type, "key": k, "value": v}
                  for ws in await self.store.workspaces()
                  for k, v in sorted((await self.store.values(ws, type)).items())]
        return {**empty_response(version), "values": values}

    async def _config(self, workspace: str, request: dict[str, Any]) -> dict[str, Any]:
        version = await self.store.version()
        return {**empty_response(version), "config": await self.store.dump(workspace)}

    async def _put(self, workspace: str, request: dict[str, Any]) -> dict[str, Any]:
        request_id = _request_id.get()
        async with self._pushed.turn(request_id):
            return await self._put_once(workspace, request, request_id)

    async def _put_once(self, workspace: str, request: dict[str, Any],
                        request_id: str | None) -> dict[str, Any]:
        raw = request.get("values")
        if not isinstance(raw, list) or not raw:
            raise ConfigError("put needs 'values': a non-empty list of {type, key, value}")
        items: list[tuple[str, str, str]] = []
        for i, v in enumerate(raw):
            if not isinstance(v, dict):
                raise ConfigError(f"values[{i}] must be an object with type, key and value")
            type, key, value = v.get("type"), v.get("key"), v.get("value")
            if not isinstance(type, str) or not type or not isinstance(key, str) or not key:
                raise ConfigError(f"values[{i}] needs a non-empty 'type' and 'key'")
            if not isinstance(value, str):
                raise ConfigError(f"the value of {type}/{key} must be a string (JSON text), "
                                  f"not {type_of(value)}")
            items.append((type, key, value))
        items = await self._keep_secrets(workspace, items)
        for type, key, value in items:
            validate(type, key, value, stdio_allow=self.stdio_allow)
        version = await self.store.put(workspace, items, request_id=request_id,
                                       actor=actor_of(request))
        await self._notify(version, workspace, {t for t, _, _ in items}, request_id)
        return empty_response(version)

    async def _keep_secrets(self, workspace: str,
                            items: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
        """``items`` with each masked secret replaced by the stored value it stands for."""
        masked = [(t, k) for t, k, v in items if needs_stored(v)]
        if not masked:
            return items
        stored = dict(zip(masked, await self.store.get(workspace, masked)))
        return [(t, k, keep_secrets(t, k, v, stored[(t, k)]) if (t, k) in stored else v)
                for t, k, v in items]

    async def _delete(self, workspace: str, request: dict[str, Any]) -> dict[str, Any]:
        keys = _keys(request)
        if not keys:
            raise ConfigError("delete needs 'keys': a non-empty list of {type, key}")
        request_id = _request_id.get()
        async with self._pushed.turn(request_id):
            version = await self.store.delete(workspace, keys, request_id=request_id,
                                              actor=actor_of(request))
            if isinstance(version, Unchanged):
                # none of the keys existed: no new version, so nothing for watchers to load.
                # A copy of this request gets the same version from the store as a plain
                # int; marking it pushed here keeps this process from pushing for that copy.
                self._pushed.add(request_id, version)
                log.info("delete of %d item(s) in workspace %r: none exists, config version "
                         "%d unchanged", len(keys), workspace, version)
            else:
                await self._notify(version, workspace, {t for t, _ in keys}, request_id)
        return empty_response(int(version))

    async def _send_push(self, message: dict[str, Any]) -> None:
        assert self._push is not None
        await self._push.send(message)

    async def _notify(self, version: int, workspace: str, types: set[str],
                      request_id: str | None) -> None:
        """Push ``version`` unless this process already pushed it for ``request_id``."""
        assert self._push is not None
        changed = ", ".join(sorted(types))
        if self._pushed.pushed(request_id, version):
            log.info("request %s again: it made config version %d (%s changed in workspace "
                     "%r), already pushed", request_id, version, changed, workspace)
            return
        metrics.saw_config_version(version)
        await self._push.send({"version": version,
                               "changes": {t: [workspace] for t in sorted(types)}})
        self._pushed.add(request_id, version)
        log.info("config version %d: %s changed in workspace %r", version, changed, workspace)


def type_of(value: Any) -> str:
    return type(value).__name__ if value is not None else "null"


def _type(request: dict[str, Any]) -> str:
    type = request.get("type")
    if not isinstance(type, str) or not type:
        raise ConfigError(f"operation {request.get('operation')!r} needs 'type' (a config type)")
    return type


def _keys(request: dict[str, Any]) -> list[tuple[str, str]]:
    raw = request.get("keys")
    if not isinstance(raw, list):
        raise ConfigError(f"operation {request.get('operation')!r} needs 'keys': "
                          "a list of {type, key}")
    keys = []
    for i, k in enumerate(raw):
        if not (isinstance(k, dict) and isinstance(k.get("type"), str) and k["type"]
                and isinstance(k.get("key"), str) and k["key"]):
            raise ConfigError(f"keys[{i}] must be an object with a non-empty 'type' and 'key'")
        keys.append((k["type"], k["key"]))
    return keys
