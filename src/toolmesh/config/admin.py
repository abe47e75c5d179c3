"""The config service's own operations beyond TrustGraph's: the audit and the tokens.

* ``history`` — the newest audit entries of the request's workspace (``type``, ``key``:
  narrow them; ``limit``: how many, at most 1,000; ``all-workspaces``: every workspace and
  the token changes): ``{"history": [{"at", "actor", "workspace", "operation", "type",
  "key", "version"}, ...]}``, newest first.
* ``token-create`` (``workspaces``, ``capabilities``, ``name``?) →
  ``{"token": {id, name, workspaces, capabilities, created}, "plaintext": "tmk_..."}`` —
  the only time the token itself is ever sent; ``token-list`` → ``{"tokens": [...]}``
  (never a token or a digest); ``token-revoke`` (``id``) → ``{"revoked": id}``.
* ``token-table`` → ``{"tokens": [... with "digest"]}``: for gateways, which check tokens
  against it. The gateway never forwards it for a client.
* ``list-workspaces`` → ``{"workspaces": [...]}``: the workspaces holding items.

Who asked: ``actor`` in the request — the gateway always sets it to the caller's identity
(a token id, ``admin``, ``local``) whatever the client sent; a request from a process on the
bus without one is recorded as :data:`BUS_ACTOR`. After a token change the service pushes
``{"version": V, "changes": {"token": ["*"]}}`` so gateways reload their tables at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from toolmesh.config.errors import ConfigError
from toolmesh.config.store.base import ALL_WORKSPACES, TOKEN_TYPE, StoredToken
from toolmesh.config.tokens import describe, digest, mint, parse_scope

ACTOR_FIELD = "actor"
#: the actor of a change asked for on the bus, not through a gateway
BUS_ACTOR = "bus"
#: the most characters of an actor name recorded
MAX_ACTOR = 200
DEFAULT_HISTORY = 20

Handler = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
Push = Callable[[dict[str, Any]], Awaitable[None]]
Empty = Callable[[int | None], dict[str, Any]]


def actor_of(request: dict[str, Any]) -> str:
    """Who asked for ``request`` (see the module docstring)."""
    actor = request.get(ACTOR_FIELD)
    if isinstance(actor, str) and actor.strip() and "\x00" not in actor:
        return actor.strip()[:MAX_ACTOR]
    return BUS_ACTOR


def _text(request: dict[str, Any], field: str) -> str | None:
    value = request.get(field)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"'{field}' must be a string, not {type(value).__name__}")
    return value


class AdminOperations:
    """The handlers of the operations above, for :class:`~toolmesh.config.service.
    ConfigService` (``store``: its store; ``push``: sends on its push queue; ``empty``: its
    response with every TrustGraph field present)."""

    def __init__(self, store: Any, push: Push, empty: Empty) -> None:
        self.store = store
        self._push = push
        self._empty = empty

    def handlers(self) -> dict[str, Handler]:
        return {"history": self.history, "token-create": self.token_create,
                "token-list": self.token_list, "token-revoke": self.token_revoke,
                "token-table": self.token_table, "list-workspaces": self.list_workspaces}

    async def _answer(self, **fields: Any) -> dict[str, Any]:
        return {**self._empty(await self.store.version()), **fields}

    async def history(self, workspace: str, request: dict[str, Any]) -> dict[str, Any]:
        every = request.get("all-workspaces", False)
        if not isinstance(every, bool):
            raise ConfigError("'all-workspaces' must be true or false")
        limit = request.get("limit", DEFAULT_HISTORY)
        entries = await self.store.history(workspace=None if every else workspace,
                                           type=_text(request, "type"),
                                           key=_text(request, "key"), limit=limit)
        return await self._answer(history=[e.to_wire() for e in entries])

    async def token_create(self, workspace: str, request: dict[str, Any]) -> dict[str, Any]:
        workspaces, capabilities, name = parse_scope(request)
        id, token = mint()
        stored = await self.store.add_token(
            StoredToken(id=id, digest=digest(token), workspaces=workspaces,
                        capabilities=capabilities, name=name), actor=actor_of(request))
        await self._tokens_changed()
        return await self._answer(token=describe(stored), plaintext=token)

    async def token_list(self, workspace: str, request: dict[str, Any]) -> dict[str, Any]:
        return await self._answer(tokens=[describe(t) for t in await self.store.tokens()])

    async def token_revoke(self, workspace: str, request: dict[str, Any]) -> dict[str, Any]:
        id = _text(request, "id")
        if id is None:
            raise ConfigError("token-revoke needs 'id': the id of the token (toolmesh token "
                              "list shows them)")
        if not await self.store.remove_token(id, actor=actor_of(request)):
            raise ConfigError(f"no token {id!r} (toolmesh token list shows the ids)")
        await self._tokens_changed()
        return await self._answer(revoked=id)

    async def token_table(self, workspace: str, request: dict[str, Any]) -> dict[str, Any]:
        return await self._answer(tokens=[describe(t, with_digest=True)
                                          for t in await self.store.tokens()])

    async def list_workspaces(self, workspace: str, request: dict[str, Any]) -> dict[str, Any]:
        return await self._answer(workspaces=await self.store.workspaces())

    async def _tokens_changed(self) -> None:
        # the current version: services that watch config types see nothing new to load
        await self._push({"version": await self.store.version(),
                          "changes": {TOKEN_TYPE: [ALL_WORKSPACES]}})
