"""Scoped tokens at the gateway: checking them, managing them (``token``), and TrustGraph's
``iam`` questions about them.

**Checking.** :class:`TokenRegistry` holds the config service's token table (ids, digests and
scopes; never a token) and checks a token against it locally — no bus call per request. The
table is loaded at the first scoped token and then kept warm: it is reloaded in the background
every ``refresh_after`` seconds (5) and when a lookup finds it that old, so a request never
waits for a reload while the config service answers; only a table older than ``max_age`` (10,
the bound if a push is ever lost and the config service stops answering) is not used. Lookups
wait for a load — one load for all of them — only:

* before the first load, and when the table is past ``max_age``;
* after this gateway revokes or creates a token (the ``token`` service below), and after a
  config push says tokens changed (the config service pushes after every change, and every
  gateway gets the push and starts the load at once: revocation through another gateway takes
  effect as soon as the push arrives, milliseconds on a healthy bus);
* when a token names an id the table lacks (at most once a second, so made-up tokens cannot
  make the gateway hammer the config service; the caller's address holds one of its
  throttle's attempts meanwhile, :mod:`toolmesh.gateway.throttle`).

A WebSocket authenticated with a scoped token is checked again at every request, so a revoked
token stops working on open sockets too.

**Managing** (``POST /api/v1/token`` or a frame with ``"service": "token"``; needs ``admin``):
``{"operation": "create", "workspaces": [...], "capabilities": [...], "name"?}`` →
``{"token": {...}, "plaintext": "tmk_..."}`` (shown once); ``{"operation": "list"}`` →
``{"tokens": [{id, name, workspaces, capabilities, created}]}``;
``{"operation": "revoke", "id": ID}`` → ``{"revoked": ID}``. A scoped token with ``admin``
manages only tokens within its own scope (its workspaces, its capabilities): it cannot raise
its own.

**iam** (TrustGraph's ``/api/v1/iam``, for ``tg-whoami``, ``tg-list-my-workspaces`` and
``tg-list-workspaces``): ``whoami`` → ``{"user": {id, username, name, workspace, roles,
enabled, ...}}`` where roles are the capabilities; ``list-my-workspaces`` and (admin)
``list-workspaces`` → ``{"workspaces": [{id, name, enabled, created}]}``. TrustGraph's users,
passwords and API keys are not modelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from toolmesh.bus.base import Bus, Message, Subscription
from toolmesh.config.admin import ACTOR_FIELD
from toolmesh.config.client import CONFIG_HINT, ConfigClient
from toolmesh.config.service import CONFIG_PUSH_QUEUE
from toolmesh.config.store.base import TOKEN_TYPE, StoredToken
from toolmesh.config.tokens import from_wire, matches, token_id
from toolmesh.errors import MalformedMessage, RequestError, ToolmeshError
from toolmesh.gateway.auth import ADMIN, LOCAL, UNTHROTTLED, Attempt, Identity

log = logging.getLogger("toolmesh.gateway.tokens")

#: errors that are the gateway's to show (503, 504), not an answer of the service
_TRANSPORT_ERRORS = frozenset({"service-unavailable", "timeout"})


def identity_of(token: StoredToken) -> Identity:
    return Identity(id=token.id, capabilities=frozenset(token.capabilities),
                    workspaces=tuple(token.workspaces), name=token.name, created=token.created)


class TokenRegistry:
    """The token table, kept current (see the module docstring). ``clock``: seconds, for
    ``max_age``, ``refresh_after`` and ``miss_interval`` (tests give their own; the background
    reload's timer runs on the event loop's clock). ``refresh_after``: half ``max_age`` unless
    given."""

    def __init__(self, bus: Bus, *, timeout: float = 10.0, max_age: float = 10.0,
                 refresh_after: float | None = None, miss_interval: float = 1.0,
                 push_queue: str = CONFIG_PUSH_QUEUE,
                 clock: Callable[[], float] = time.monotonic, **queues: str) -> None:
        self._bus = bus
        self._clock = clock
        #: the config service's client (the token and iam services ask it too)
        self.config = ConfigClient(bus, timeout=timeout, when_no_consumer="fail",
                                   hint=CONFIG_HINT, **queues)
        self.max_age = max_age
        self.refresh_after = max_age / 2 if refresh_after is None else refresh_after
        self.miss_interval = miss_interval
        self._push_queue = push_queue
        self._subscription: Subscription | None = None
        self._tokens: dict[str, StoredToken] = {}
        self._loaded_at: float | None = None
        self._last_miss_load = float("-inf")
        #: bumped by every invalidation: a load started before one is not trusted after it
        self._generation = 0
        #: the load in progress and the generation it loads: one for every lookup
        self._loading: tuple[int, asyncio.Task[dict[str, StoredToken]]] | None = None
        #: the next background reload, once the table is in use
        self._refresh: asyncio.TimerHandle | None = None
        self._stopped = False

    async def start(self) -> None:
        self._stopped = False
        await self.config.start()
        self._subscription = await self._bus.subscribe(
            self._push_queue, self._on_push, subscription="gateway-tokens", concurrency=1)

    async def stop(self) -> None:
        self._stopped = True
        if self._refresh is not None:
            self._refresh.cancel()
            self._refresh = None
        if self._subscription is not None:
            await self._subscription.close()
            self._subscription = None
        if self._loading is not None:
            loading = self._loading[1]
            self._loading = None
            loading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await loading
        await self.config.stop()

    # -- checking ---------------------------------------------------------------------

    async def identify(self, token: str, *, attempt: Attempt = UNTHROTTLED) -> Identity | None:
        """The identity ``token`` stands for; ``None`` if it is not a valid scoped token.
        :class:`RequestError` when the table cannot be loaded. ``attempt`` hears of every wait
        (the failed-auth throttle: :mod:`toolmesh.gateway.throttle`)."""
        id = token_id(token)
        if id is None:
            return None
        table = self._warm()
        if table is None:
            table = await self._load_for_lookup()
            attempt.waited()
        stored = table.get(id)
        now = self._clock()
        if stored is None and now - self._last_miss_load >= self.miss_interval:
            with attempt.waiting_for_id():
                self._last_miss_load = now
                # a load of its own (one begun before now may lack a token just made); other
                # lookups go on with the table they have
                self._generation += 1
                stored = (await self._load_for_lookup()).get(id)
        return identity_of(stored) if matches(token, stored) else None

    async def current(self, identity: Identity) -> Identity | None:
        """``identity`` as it stands now: ``None`` if its token was revoked since."""
        if not identity.scoped:
            return identity
        stored = (await self._table()).get(identity.id)
        return identity_of(stored) if stored is not None else None

    async def by_id(self, id: Any) -> Identity | None:
        """The identity the gateway stamped as ``actor`` on a request (see :data:`ACTOR_FIELD`)."""
        if id in (ADMIN.id, LOCAL.id):
            return ADMIN if id == ADMIN.id else LOCAL
        stored = (await self._table()).get(id) if isinstance(id, str) else None
        return identity_of(stored) if stored is not None else None

    async def tokens(self) -> list[StoredToken]:
        """The table as loaded now."""
        return list((await self._table()).values())

    def invalidate(self) -> None:
        """Load the table again before its next use."""
        self._generation += 1
        self._loaded_at = None

    def forget(self, id: str) -> None:
        """Stop accepting token ``id`` at once (it was revoked through this gateway)."""
        self._tokens = {k: v for k, v in self._tokens.items() if k != id}
        self.invalidate()

    async def _table(self) -> dict[str, StoredToken]:
        table = self._warm()
        return table if table is not None else await self._load_for_lookup()

    def _warm(self) -> dict[str, StoredToken] | None:
        """The table, if it may be used now (a reload started in the background when due);
        ``None`` when a lookup must wait for a load."""
        loaded = self._loaded_at
        if loaded is None:
            return None
        age = self._clock() - loaded
        if age >= self.max_age:
            return None
        if age >= self.refresh_after:
            self._start_load()  # in the background: this lookup does not wait
        return self._tokens

    async def _load_for_lookup(self) -> dict[str, StoredToken]:
        # shielded: a request that gives up does not cancel the load the others wait on
        return await asyncio.shield(self._start_load())

    def _start_load(self) -> asyncio.Task[dict[str, StoredToken]]:
        """The load of the current generation: the one in progress, or a new one."""
        if self._loading is not None and self._loading[0] == self._generation:
            return self._loading[1]
        generation = self._generation
        task = asyncio.ensure_future(self._load())
        self._loading = (generation, task)
        task.add_done_callback(lambda done: self._loaded(generation, done))
        return task

    def _loaded(self, generation: int, task: asyncio.Task[dict[str, StoredToken]]) -> None:
        if self._loading is not None and self._loading[1] is task:
            self._loading = None
        if task.cancelled():
            return
        error = task.exception()  # retrieved here: a background load has no one waiting
        if error is not None:
            log.debug("the token table could not be reloaded: %s", error)
        elif generation == self._generation:
            self._tokens, self._loaded_at = task.result(), self._clock()
        if not self._stopped:
            # reloaded while in use, so lookups find it fresh (a failed load is retried then)
            if self._refresh is not None:
                self._refresh.cancel()
            self._refresh = asyncio.get_running_loop().call_later(
                self.refresh_after, self._start_load)

    async def _load(self) -> dict[str, StoredToken]:
        response = await self.config.request({"operation": "token-table"})
        entries = response.get("tokens")
        table: dict[str, StoredToken] = {}
        for entry in entries if isinstance(entries, list) else []:
            token = from_wire(entry)
            if token is not None:
                table[token.id] = token
        return table

    async def _on_push(self, message: Message) -> None:
        try:
            push = message.json()
        except MalformedMessage:
            push = None
        changes = push.get("changes") if isinstance(push, dict) else None
        if not isinstance(changes, dict) or not changes or TOKEN_TYPE in changes:
            # tokens changed, or a config service (re)started: load the table again, now if
            # it is in use (lookups meanwhile wait for this load, not for the old table)
            self.invalidate()
            if self._refresh is not None:
                self._start_load()


def _error(type: str, message: str) -> dict[str, Any]:
    return {"error": {"type": type, "message": message}}


class _Forwarding:
    """Answers from the config service: its errors as error responses, the gateway's own
    (503, 504) raised."""

    def __init__(self, registry: TokenRegistry) -> None:
        self._registry = registry
        self._config = registry.config

    per_flow = False

    async def call(self, request: dict[str, Any], *, workspace: str,
                   flow: str) -> AsyncIterator[tuple[dict[str, Any], bool]]:
        yield await self._answer(request), True

    async def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def start(self) -> None:
        return None  # the registry and the config client are started by the gateway

    async def stop(self) -> None:
        return None

    async def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            response = await self._config.request(request)
        except RequestError as e:
            if e.type in _TRANSPORT_ERRORS:
                raise
            return _error(e.type, e.message)
        return {k: v for k, v in response.items()
                if v is not None and k not in ("values", "directory", "config")}

    async def _caller(self, request: dict[str, Any]) -> Identity:
        caller = await self._registry.by_id(request.get(ACTOR_FIELD))
        if caller is None:  # revoked between the gateway's check and now
            raise ToolmeshError("this token was revoked", type="auth-failed")
        return caller


def _within(caller: Identity, workspaces: Any, capabilities: Any) -> bool:
    """Whether a token of these workspaces and capabilities is within ``caller``'s scope."""
    if caller.workspaces is None:
        return True
    return (isinstance(workspaces, list) and isinstance(capabilities, list)
            and all(isinstance(w, str) and caller.reaches(w) for w in workspaces)
            and all(isinstance(c, str) and caller.may(c) for c in capabilities))


class TokenService(_Forwarding):
    """The gateway's ``token`` service (see the module docstring)."""

    name = "token"

    async def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        caller = await self._caller(request)
        actor = {ACTOR_FIELD: caller.id}
        operation = request.get("operation")
        if operation == "create":
            workspaces, capabilities = request.get("workspaces"), request.get("capabilities")
            if isinstance(workspaces, str):
                workspaces = [workspaces]
            if isinstance(capabilities, str):
                capabilities = [capabilities]
            if not _within(caller, workspaces, capabilities):
                raise ToolmeshError(
                    f"token {caller.id!r} may only make tokens within its own scope: "
                    f"workspaces {', '.join(caller.workspaces or ())}; capabilities "
                    f"{', '.join(sorted(caller.capabilities))}", type="forbidden")
            response = await self._ask({"operation": "token-create", **actor,
                                        "workspaces": workspaces,
                                        "capabilities": capabilities,
                                        "name": request.get("name")})
            self._registry.invalidate()  # usable at once on this gateway
            return response
        if operation == "list":
            response = await self._ask({"operation": "token-list", **actor})
            tokens = response.get("tokens")
            if isinstance(tokens, list):
                response["tokens"] = [t for t in tokens if isinstance(t, dict) and _within(
                    caller, t.get("workspaces"), t.get("capabilities"))]
            return response
        if operation == "revoke":
            id = request.get("id")
            if not isinstance(id, str) or not id:
                return _error("bad-request", "revoke needs 'id': the id of the token "
                                             "(toolmesh token list shows them)")
            if caller.workspaces is not None:
                target = {t.id: t for t in await self._registry.tokens()}.get(id)
                if target is None or not _within(caller, list(target.workspaces),
                                                 list(target.capabilities)):
                    raise ToolmeshError(f"no token {id!r} within the scope of token "
                                        f"{caller.id!r} (toolmesh token list shows them)",
                                        type="forbidden")
            response = await self._ask({"operation": "token-revoke", **actor, "id": id})
            if "error" not in response:
                self._registry.forget(id)  # refused from now on by this gateway
            return response
        return _error("bad-request", f"unknown token operation {operation!r}; operations: "
                                     "create, list, revoke")


class IamService(_Forwarding):
    """TrustGraph's ``iam`` service, as far as toolmesh's tokens answer it."""

    name = "iam"

    async def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        caller = await self._caller(request)
        operation = request.get("operation")
        if operation == "whoami":
            return {"user": {"id": caller.id, "username": caller.id, "name": caller.name,
                             "email": "", "workspace": caller.default_workspace,
                             "roles": sorted(caller.capabilities), "enabled": True,
                             "must_change_password": False, "created": caller.created}}
        if operation in ("list-workspaces", "list-my-workspaces"):
            if caller.workspaces is not None:
                names = list(caller.workspaces)
            else:
                response = await self._ask({"operation": "list-workspaces",
                                            ACTOR_FIELD: caller.id})
                if "error" in response:
                    return response
                names = [w for w in response.get("workspaces") or [] if isinstance(w, str)]
            return {"workspaces": [{"id": w, "name": w, "enabled": True, "created": ""}
                                   for w in names]}
        return _error("bad-request", (
            f"iam operation {operation!r} is not served: toolmesh answers whoami, "
            "list-my-workspaces and list-workspaces; its access is scoped tokens "
            "(toolmesh token create|list|revoke), not users, passwords or API keys"))
