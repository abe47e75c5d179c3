"""``tools/call`` answered by the gateway itself, as one JSON body, in a session the MCP SDK
opened.

Why: the SDK's server answers each POST as an SSE stream, through its session's task group and
memory streams — about 1.2 ms of CPU a call beyond the call itself (``bench/mcp_endpoint.py``),
three times what the same call costs through the REST route. A call that asks for no progress
needs none of it: streamable HTTP lets a server answer a request with one JSON object instead
of a stream ("the server MUST either return ``Content-Type: text/event-stream`` ... or
``Content-Type: application/json``"; clients must take both), and once a session is open a
call depends on nothing the session holds.

So a POST is answered here when it is one ``tools/call`` request without a ``progressToken``,
in a session the SDK opened for the same token and workspace, at a protocol revision whose
call result has this shape (the ``MCP-Protocol-Version`` header names it: 2025-06-18 or
2025-11-25). Its ``notifications/cancelled`` is taken here too. A call that needs a person's
approval goes to the SDK's path, which can ask (:mod:`.approval`), before it runs. Everything
else — the handshake, lists, calls that want progress, older or newer revisions, the GET
stream, DELETE — goes to the SDK as before; this only learns from it which sessions it opened
and ended.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from toolmesh import json_codec
from toolmesh.errors import ServiceError
from toolmesh.mcp.meta import IDEMPOTENCY_KEY
from toolmesh.mcp_endpoint.approval import Deferred
from toolmesh.schema.tool_service import client_key

#: the revisions whose ``tools/call`` result this answers with (the header names one)
REVISIONS = frozenset({"2025-06-18", "2025-11-25"})
#: sessions remembered at most (the oldest forgotten first: their calls go to the SDK)
MAX_SESSIONS = 10_000

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"

#: makes the call: ``(caller, name, arguments, key)`` → ``(text, is_error)``; ``key``: the
#: client's idempotency key (its ``_meta`` ``io.toolmesh/idempotency-key``), if it gave one
Call = Callable[[Any, str, dict[str, Any], str | None], Awaitable[tuple[str, bool]]]


class FastCalls:
    """The sessions the SDK opened (whose they are), and the calls answered here."""

    def __init__(self, call: Call, *, max_sessions: int = MAX_SESSIONS) -> None:
        self._call = call
        self._max = max_sessions
        #: session id -> who opened it (``token@workspace``)
        self._owners: OrderedDict[str, str] = OrderedDict()
        #: (session id, request id) -> the call under way
        self._running: dict[tuple[str, str | int], asyncio.Task[tuple[str, bool]]] = {}

    def opened(self, session: str, owner: str) -> None:
        """The SDK opened ``session`` for ``owner`` (an ``initialize`` it answered)."""
        self._owners[session] = owner
        self._owners.move_to_end(session)
        while len(self._owners) > self._max:
            self._owners.popitem(last=False)

    def ended(self, session: str) -> None:
        """The SDK ended ``session``, or says it has no such session."""
        self._owners.pop(session, None)

    async def answer(self, request: web.Request, body: Any, owner: str,
                     caller: Any) -> web.StreamResponse | None:
        """The answer to ``request`` (its JSON ``body``), or ``None``: the SDK answers it."""
        session = request.headers.get(SESSION_HEADER)
        if (session is None or self._owners.get(session) != owner
                or request.headers.get(VERSION_HEADER) not in REVISIONS
                or not _accepts_json(request) or not isinstance(body, dict)
                or body.get("jsonrpc") != "2.0"):
            return None
        method = body.get("method")
        if method == "tools/call":
            return await self._tools_call(session, body, caller)
        if method == "notifications/cancelled" and "id" not in body:
            return self._cancelled(session, body)
        return None

    async def _tools_call(self, session: str, body: dict[str, Any],
                          caller: Any) -> web.StreamResponse | None:
        id = body.get("id")
        params = body.get("params")
        if not _request_id(id) or not isinstance(params, dict) or set(params) - {
                "name", "arguments", "_meta"}:
            return None
        name, arguments, meta = params.get("name"), params.get("arguments"), params.get("_meta")
        if arguments is None:
            arguments = {}
        if (not isinstance(name, str) or not isinstance(arguments, dict)
                or (meta is not None and not isinstance(meta, dict))
                or (meta and "progressToken" in meta)):
            return None  # malformed, or progress wanted: the SDK answers
        given = meta.get(IDEMPOTENCY_KEY) if meta else None
        if given is not None and not _key(given):
            return None  # the SDK's path says what is wrong with it
        key = (session, id)
        if key in self._running:
            return None  # a request id still in use: the SDK says what is wrong
        task = asyncio.ensure_future(self._call(caller, name, arguments, given))
        self._running[key] = task
        try:
            text, is_error = await task
        except Deferred:  # it needs a person's approval: the SDK's path can ask
            return None
        except asyncio.CancelledError:
            if not task.cancelled():  # our client hung up: the call goes with it
                task.cancel()
                raise
            # the client cancelled the request: it expects no answer to it
            return web.Response(status=202)
        finally:
            self._running.pop(key, None)
        result = {"content": [{"type": "text", "text": text}], "isError": is_error}
        return web.Response(body=json_codec.dumps({"jsonrpc": "2.0", "id": id,
                                                   "result": result}),
                            content_type="application/json",
                            headers={SESSION_HEADER: session})

    def _cancelled(self, session: str, body: dict[str, Any]) -> web.StreamResponse | None:
        params = body.get("params")
        id = params.get("requestId") if isinstance(params, dict) else None
        task = self._running.get((session, id)) if _request_id(id) else None
        if task is None:
            return None  # not one of ours: the SDK's to hear
        task.cancel()
        return web.Response(status=202)


def _request_id(id: Any) -> bool:
    return isinstance(id, str | int) and not isinstance(id, bool)


def _accepts_json(request: web.Request) -> bool:
    # the SDK asks a POST to accept both (a client may get either); one JSON body is answered
    accept = request.headers.get("Accept", "")
    return "application/json" in accept and "text/event-stream" in accept


def _key(value: Any) -> bool:
    """Whether ``value`` is a key a client may give (:func:`client_key` says why not)."""
    try:
        return client_key(value) is not None
    except ServiceError:
        return False
