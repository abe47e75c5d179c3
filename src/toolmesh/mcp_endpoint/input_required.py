"""``/mcp`` for MCP 2026-07-28 clients: a call that needs a person answers with the question,
and the client calls again with the answer (multi-round-trip requests, MRTR).

A 2026-07-28 exchange is one request and its answer: the server cannot ask the client
anything during a call. So a ``tools/call`` that needs a person ends its round with an
``InputRequiredResult`` carrying the question (``inputRequests``) and a ``requestState``; the
client puts the question to its person and makes the same call again, carrying the answers
(``inputResponses``) and the ``requestState`` as it got it:

* **approval** (a tool whose approval policy asks: :mod:`.approval`): the question is the
  form the ``initialize`` revisions get as ``elicitation/create``, under the key
  ``approval``. Nothing runs in the first round. The state holds the digest of the call the
  person was shown, and the idempotency key; the retry's yes runs the call with that digest
  (the agent checks it is this very call), under the same key. Each answer is used once.
* **sign-in** (a server of the tool wants the caller to sign in: :mod:`.sign_in`): the call
  waits for the sign-in, so it is held between the rounds (:mod:`.held_calls`); the question
  is a URL-mode elicitation under the key ``sign-in``. The retry's ``accept`` lets the held
  call go on (it ends once the sign-in is kept); ``decline`` or ``cancel`` is answered
  through the approvals service, and the call ends saying so. A retry that finds no held call
  (it expired) makes the call again: it finds the grant, or asks again.

The client cannot alter the ``requestState``: the MCP SDK's :class:`RequestStateBoundary`
seals it (AES-GCM under a key made when the gateway starts) and binds it to the method, the
tool, its arguments, the caller's token and workspace, and :data:`STATE_TTL`; a state that
fails any of that is refused in our words (:class:`StateGuard`). A client that cannot be
asked — a token that may not ``approve``, no form (or, for a sign-in, URL) elicitation
declared — is told why and what to do, as the ``initialize`` revisions are.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import is_version_at_least

from toolmesh.approvals.wire import seconds_left
from toolmesh.errors import RequestError
from toolmesh.mcp_endpoint.approval import (
    APPROVAL_TIMEOUT,
    SCHEMA,
    cannot_ask,
    decide,
    question,
    refused,
)
from toolmesh.mcp_endpoint.held_calls import Held, HeldCalls, Progress, Question, answer_of
from toolmesh.mcp_endpoint.sign_in import Answer

log = logging.getLogger("toolmesh.mcp_endpoint")

#: the first revision without a back channel: its calls are asked in rounds
MRTR_VERSION = "2026-07-28"
#: the keys of the questions in ``inputRequests`` / ``inputResponses``
APPROVAL = "approval"
SIGN_IN = "sign-in"
#: seconds a round's ``requestState`` is good for (as long as a person has to answer)
STATE_TTL = APPROVAL_TIMEOUT
#: what a client whose ``requestState`` is refused is told
STALE = ("this call's requestState was not given by this gateway, was changed, belongs to "
         "another call, token or workspace, or is older than {ttl:g} s (a gateway that "
         "restarted forgets its states): make the call again without it")

#: the agent's call: ``(body, progress, sign_in)`` → its final answer (endpoint.py's _stream)
Stream = Callable[[dict[str, Any], Callable[[dict[str, Any]], Awaitable[None]] | None,
                   Callable[[dict[str, Any]], Awaitable[None]] | None],
                  Awaitable[dict[str, Any]]]
Result = mcp_types.CallToolResult | mcp_types.InputRequiredResult


def asks_in_rounds(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether ``ctx``'s client speaks a revision whose questions go in rounds."""
    version = getattr(ctx, "protocol_version", None)
    return isinstance(version, str) and is_version_at_least(version, MRTR_VERSION)


class StateGuard:
    """The SDK's :class:`RequestStateBoundary` (server middleware) for ``/mcp``, with its
    refusal said in our words. ``principal``: whom a request comes from (token and
    workspace), to bind each state to."""

    def __init__(self, principal: Callable[[ServerRequestContext[Any, Any]], str | None], *,
                 ttl: float = STATE_TTL) -> None:
        self.ttl = ttl
        # a key of this process: a state outlives neither a restart nor this gateway
        security = RequestStateSecurity(keys=[secrets.token_bytes(32)], ttl=ttl,
                                        bind_principal=principal)
        self._boundary = RequestStateBoundary(security, default_audience="toolmesh")

    async def __call__(self, ctx: ServerRequestContext[Any, Any],
                       call_next: CallNext) -> HandlerResult:
        try:
            return await self._boundary(ctx, call_next)
        except MCPError as e:
            data = e.data
            if isinstance(data, dict) and data.get("reason") == "invalid_request_state":
                raise MCPError(INVALID_PARAMS, STALE.format(ttl=self.ttl), data=data) from None
            raise


class InputRequired:
    """The rounds of 2026-07-28 calls (module docstring): ``stream`` makes a call through the
    agent; ``answer`` answers a server's question through the approvals service."""

    def __init__(self, *, stream: Stream, answer: Answer, held: HeldCalls | None = None,
                 ttl: float = STATE_TTL) -> None:
        self._stream = stream
        self._answer = answer
        self.held = held or HeldCalls()
        self._ttl = ttl
        #: the approvals' answers used (their nonce → when the state expires): used once
        self._spent: OrderedDict[str, float] = OrderedDict()

    async def close(self) -> None:
        """Give up on the calls held for clients that did not come back."""
        await self.held.close()

    async def call(self, ctx: ServerRequestContext[Any, Any],
                   params: mcp_types.CallToolRequestParams, caller: Any, body: dict[str, Any],
                   progress: Progress | None) -> Result:
        """One round of ``params``'s call by ``caller``; ``body``: the agent's request for it
        (``ask``, ``questions`` and a fresh ``key`` set as for a first round)."""
        state = _state(params.request_state)
        answers = params.input_responses or {}
        tool = params.name
        try:
            if state is None:
                return await self._round(ctx, caller, body, self._start(body), progress)
            kind = state.get("kind")
            body = {**body, "key": state["key"]}
            if kind == APPROVAL:
                return await self._approved(ctx, caller, params, body, state,
                                            answer_of(answers.get(APPROVAL)), progress)
            if kind == SIGN_IN:
                return await self._signed_in(ctx, caller, tool, body, state,
                                             answer_of(answers.get(SIGN_IN)), progress)
        except RequestError as e:
            return _result(f"{e.type}: {e.message}", True)
        raise MCPError(INVALID_PARAMS, STALE.format(ttl=self._ttl))

    async def _approved(self, ctx: ServerRequestContext[Any, Any], caller: Any,
                        params: mcp_types.CallToolRequestParams, body: dict[str, Any],
                        state: dict[str, Any], answer: mcp_types.ElicitResult | None,
                        progress: Progress | None) -> Result:
        tool, digest = str(state["tool"]), str(state["digest"])
        asked = {"tool": tool, "arguments": params.arguments or {}, "digest": digest}
        if answer is None:  # came back without the answer: asked again
            return self._ask_approval(asked, body["key"], nonce=state.get("nonce"))
        if not self._spend(str(state.get("nonce"))):
            return _result(f"this answer about the call of {tool!r} was used already: make "
                           "the call again to be asked again", True)
        who = caller.identity.id if caller.identity is not None else "local"
        refusal = decide(tool, answer, who=who, digest=digest)
        if refusal is not None:
            return _result(refusal, True)
        body = {**body, "ask": False, "approved": digest}
        return await self._round(ctx, caller, body, self._start(body), progress)

    async def _signed_in(self, ctx: ServerRequestContext[Any, Any], caller: Any, tool: str,
                         body: dict[str, Any], state: dict[str, Any],
                         answer: mcp_types.ElicitResult | None,
                         progress: Progress | None) -> Result:
        taken = self.held.take(state.get("held"))
        if taken is None:  # it expired: its question was cancelled, and its call ended
            if answer is not None and answer.action == "accept":
                return await self._round(ctx, caller, body, self._start(body), progress)
            return _result(f"the person did not sign in, so {tool!r} was not called", True)
        held, asked = taken
        if answer is None:  # came back without the answer: asked again
            return self._ask_sign_in(held, asked, body)
        await asked.answer(answer)
        return await self._round(ctx, caller, body, held, progress)

    def _start(self, body: dict[str, Any]) -> Held[dict[str, Any]]:
        """The agent's call for ``body``, held between the rounds if it asks."""

        async def run(held: Held[dict[str, Any]]) -> dict[str, Any]:
            async def sign_in(asked: dict[str, Any]) -> None:
                found = await self._sign_in_question(asked)
                if found is not None:
                    await held.ask(found)

            return await self._stream(body, held.report if body.get("progress") else None,
                                      sign_in if body.get("questions") else None)

        return Held(run)

    async def _round(self, ctx: ServerRequestContext[Any, Any], caller: Any,
                     body: dict[str, Any], held: Held[dict[str, Any]],
                     progress: Progress | None) -> Result:
        """Wait for ``held``'s next question or its end: this round's answer."""
        held.progress = progress
        try:
            outcome = await held.next()
        finally:
            held.progress = None
        if isinstance(outcome, Question):
            return self._ask_sign_in(held, outcome, body)
        asked = outcome.get("approval")
        if isinstance(asked, dict):  # the agent runs it only with a person's yes
            reason = cannot_ask(ctx, caller)
            if reason is not None:
                return _result(refused(str(asked.get("tool")), reason), True)
            return self._ask_approval(asked, body["key"])
        return _result(str(outcome.get("text") or ""), bool(outcome.get("is_error")))

    def _ask_approval(self, asked: dict[str, Any], key: str, *,
                      nonce: Any = None) -> mcp_types.InputRequiredResult:
        state = {"kind": APPROVAL, "tool": asked.get("tool"), "digest": asked.get("digest"),
                 "key": key,
                 "nonce": nonce if isinstance(nonce, str) else secrets.token_urlsafe(16)}
        form = mcp_types.ElicitRequestFormParams(message=question(asked),
                                                 requested_schema=SCHEMA)
        return mcp_types.InputRequiredResult(
            input_requests={APPROVAL: mcp_types.ElicitRequest(params=form)},
            request_state=json.dumps(state))

    def _ask_sign_in(self, held: Held[dict[str, Any]], asked: Question,
                     body: dict[str, Any]) -> mcp_types.InputRequiredResult:
        state = {"kind": SIGN_IN, "held": self.held.hold(held, asked), "key": body["key"]}
        return mcp_types.InputRequiredResult(
            input_requests={SIGN_IN: mcp_types.ElicitRequest(params=asked.params)},
            request_state=json.dumps(state))

    async def _sign_in_question(self, asked: dict[str, Any]) -> Question | None:
        """A server's question as the client is asked it (``None``: answered already)."""
        if asked.get("mode") != "url" or not isinstance(asked.get("url"), str):
            # a server's form question: this endpoint takes only links to MCP clients
            await self._answer(asked, "decline")
            return None

        async def answer(result: mcp_types.ElicitResult) -> None:
            # accepted: the person signs in; the call goes on when the sign-in is kept
            if result.action != "accept":
                await self._answer(asked, result.action)

        link = mcp_types.ElicitRequestURLParams(
            message=str(asked.get("message") or "Sign in to go on"), url=str(asked["url"]))
        return Question(params=link, answer=answer, within=seconds_left(asked))

    def _spend(self, nonce: str) -> bool:
        """Use the answer ``nonce`` names: ``False`` if it was used already."""
        now = time.monotonic()
        while self._spent and next(iter(self._spent.values())) < now:
            self._spent.popitem(last=False)  # expired: its state is refused anyway
        if nonce in self._spent:
            return False
        self._spent[nonce] = now + self._ttl
        return True


def _state(text: str | None) -> dict[str, Any] | None:
    """The state a retry carries (unsealed by the boundary: what this module wrote)."""
    if text is None:
        return None
    try:
        state = json.loads(text)
    except ValueError:
        state = None
    if not isinstance(state, dict) or not isinstance(state.get("key"), str):
        raise MCPError(INVALID_PARAMS, STALE.format(ttl=STATE_TTL))
    return state


def _result(text: str, is_error: bool) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)],
                                    is_error=is_error)
