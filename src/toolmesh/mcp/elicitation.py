"""MCP servers' questions to the person behind a dialog (elicitation), on the mcp-tool service.

A server may ask, while one of its tools runs, for input (form mode: a flat JSON Schema of
fields) or to send the person to a page (URL mode: the link is shown, nothing is typed into a
form — a secret is never asked for through one). The service finds the call the question
belongs to, sends it to the caller as a non-final response of that call::

    {"error": null, "text": null, "object": null, "end_of_stream": false,
     "elicitation": REQUEST}

(REQUEST as :mod:`toolmesh.approvals.wire` describes: ``kind`` ``elicitation``, the dialog
and a call key of its own, ``mode``, ``message``, ``schema`` or ``url``, ``expires``), and
waits for the answer: the agent relays the question to the dialog's client, whose answer goes
through the ``approvals`` service and is announced on the approvals notify queue, which every
mcp-tool service hears (:class:`~toolmesh.approvals.gate.ApprovalGate`). Unanswered until it
expires, the question is cancelled. While it waits, the call's deadline is its longest
(``max-timeout``): a person is slower than a server.

Both forms of a question are taken: the request a server sends while its call runs (MCP
2025-11-25), and the 2026-07-28 retry form (``InputRequiredResult``: the call returns the
questions and is made again with the answers; :func:`call_answering`), from servers whose
``mcp`` item says ``"protocol": "auto"``.

Which call a question belongs to: the one the SDK's call is made in when the question comes
within it (the retry form); else the only call in flight on that server's connection. A question that cannot
be placed (no call, or several at once), or that comes for a call with no dialog to ask (a
direct ``mcp-tool`` request, or a caller that does not stream), is refused with an error the
server sees.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import mcp_types
from mcp import ClientSession
from mcp.client._input_required import run_input_required_driver  # what the SDK's Client runs
from mcp.client.session import ClientRequestContext, ElicitationFnT

from toolmesh.approvals import ApprovalGate, call_digest
from toolmesh.approvals.wire import ELICITATION, iso, now, seconds_left
from toolmesh.mcp.asking import Asking  # re-exported: signin.py, sessions.py import it here
from toolmesh.mcp.config import McpServer

log = logging.getLogger("toolmesh.mcp.elicitation")

_CURRENT: contextvars.ContextVar[Asking | None] = contextvars.ContextVar(
    "toolmesh-mcp-asking", default=None)


class Elicitor:
    """The questions of the servers of one mcp-tool service, and the calls they belong to."""

    def __init__(self, gate: ApprovalGate) -> None:
        self.gate = gate
        #: connection key -> the calls in flight on it
        self._in_flight: dict[str, list[Asking]] = {}

    @contextlib.contextmanager
    def calling(self, connection: str, asking: Asking) -> Iterator[None]:
        """While a call is made on ``connection``: its questions reach ``asking``."""
        calls = self._in_flight.setdefault(connection, [])
        calls.append(asking)
        token = _CURRENT.set(asking)
        try:
            yield
        finally:
            _CURRENT.reset(token)
            calls.remove(asking)
            if not calls:
                del self._in_flight[connection]

    def callback_for(self, server: McpServer) -> ElicitationFnT:
        """The SDK's ``elicitation_callback`` for ``server``'s sessions."""
        connection = server.connection_key

        async def elicit(context: ClientRequestContext, params: mcp_types.ElicitRequestParams
                         ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
            asking = _CURRENT.get() or self._only(connection)
            if asking is None:
                return _refused(f"toolmesh cannot tell which of the calls to {server.id!r} "
                                "this question belongs to")
            if asking.key is None or asking.send is None:
                return _refused("there is no person to ask: this call is not made for a "
                                "dialog that can answer")
            return await self._ask(server, asking, params)

        return elicit

    def _only(self, connection: str) -> Asking | None:
        calls = self._in_flight.get(connection) or []
        return calls[0] if len(calls) == 1 else None

    async def _ask(self, server: McpServer, asking: Asking,
                   params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        assert asking.key is not None and asking.send is not None
        question = _question(params)
        dialog = asking.key.rsplit("/", 2)[0]
        left = asking.left()
        request = {"kind": ELICITATION, "dialog": dialog,
                   "call": f"{asking.key}/ask-{next(asking._numbers)}",
                   "workspace": asking.workspace, "tool": server.remote_name,
                   **question, "digest": call_digest(server.remote_name, question),
                   "expires": iso(now() + timedelta(seconds=left))}
        future = self.gate.expect(request)
        try:
            with asking.hold():
                await asking.send({"error": None, "text": None, "object": None,
                                   "elicitation": request, "end_of_stream": False})
                try:
                    async with asyncio.timeout(seconds_left(request)):
                        answer = await future
                except TimeoutError:
                    log.info("question %s of %r was not answered in time: cancelled",
                             request["call"], server.id)
                    return mcp_types.ElicitResult(action="cancel")
        finally:
            self.gate.forget(dialog, str(request["call"]))
        action = answer.get("decision")
        if action == "accept":
            return mcp_types.ElicitResult(action="accept", content=answer.get("content") or {})
        return mcp_types.ElicitResult(action="decline" if action == "decline" else "cancel")


    async def sign_in(self, server: McpServer, asking: Asking, *, message: str, url: str,
                      done: asyncio.Future[None]) -> str:
        """Ask the person behind ``asking``'s dialog to sign in at ``url`` (a URL-mode
        question, which shows the host and asks before opening anything), and wait until
        ``done`` (the login finished: ``"completed"``), they say no (``"declined"``), or the
        call's time runs out (``"expired"``)."""
        assert asking.key is not None and asking.send is not None
        dialog = asking.key.rsplit("/", 2)[0]
        question = {"mode": "url", "message": message, "url": url,
                    "elicitation_id": f"sign-in-{next(asking._numbers)}"}
        request = {"kind": ELICITATION, "dialog": dialog,
                   "call": f"{asking.key}/ask-{next(asking._numbers)}",
                   "workspace": asking.workspace, "tool": server.remote_name, **question,
                   "digest": call_digest(server.remote_name, question),
                   "expires": iso(now() + timedelta(seconds=asking.left()))}
        answer = self.gate.expect(request)
        try:
            with asking.hold():
                await asking.send({"error": None, "text": None, "object": None,
                                   "elicitation": request, "end_of_stream": False})
                async with asyncio.timeout(seconds_left(request)):
                    await asyncio.wait({answer, done}, return_when=asyncio.FIRST_COMPLETED)
                    if not done.done() and answer.result().get("decision") != "accept":
                        return "declined"
                    # accepted: the person is signing in on the page; wait for the login
                    await asyncio.wait({done})
                    # an exception: they said no at the sign-in page itself
                    return "completed" if done.exception() is None else "declined"
        except TimeoutError:
            return "expired"
        finally:
            self.gate.forget(dialog, str(request["call"]))
            if not answer.done():
                answer.cancel()


def _question(params: mcp_types.ElicitRequestParams) -> dict[str, Any]:
    """What is asked, as the wire shows it."""
    if isinstance(params, mcp_types.ElicitRequestURLParams):
        return {"mode": "url", "message": params.message, "url": params.url,
                "elicitation_id": params.elicitation_id}
    schema = params.requested_schema
    dumped = schema if isinstance(schema, dict) else schema.model_dump(
        by_alias=True, exclude_none=True, mode="json")
    return {"mode": "form", "message": params.message, "schema": dumped}


def _refused(message: str) -> mcp_types.ErrorData:
    return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=message)


async def call_answering(session: ClientSession, name: str, arguments: dict[str, Any],
                         **options: Any) -> mcp_types.CallToolResult:
    """``tools/call``, answering the questions of a server that asks in the 2026-07-28 retry
    form (``InputRequiredResult``: the call comes back with questions, and is made again with
    the answers) — through the session's callbacks, as a question asked during the call is,
    and in this call's task, so they know the call they belong to."""
    result = await session.call_tool(name, arguments, allow_input_required=True, **options)
    if not isinstance(result, mcp_types.InputRequiredResult):
        return result
    log.info("MCP tool %r asks %d question(s) in the retry form", name,
             len(result.input_requests or {}))

    async def dispatch(key: str, request: mcp_types.InputRequest
                       ) -> mcp_types.InputResponse | mcp_types.ErrorData:
        params = getattr(request, "params", None)
        context = ClientRequestContext(session=session, request_id=key,
                                       meta=getattr(params, "meta", None))
        return await session.dispatch_input_request(context, request)

    async def retry(responses: mcp_types.InputResponses | None, state: str | None
                    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        return await session.call_tool(name, arguments, allow_input_required=True,
                                       input_responses=responses, request_state=state,
                                       **options)

    return await run_input_required_driver(result, dispatch=dispatch, retry=retry)
