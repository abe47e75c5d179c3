"""A dialog's calls that wait for a person (docs/approvals.md).

Before a call whose tool needs approval runs (its arguments checked first: a person is not
asked about a call that could not run), the dialog records the request in its journal, tells
its client an ``approval-request`` (call key, tool, the exact arguments, their digest, when it
expires) and waits for the answer — from the WebSocket, REST, the CLI or the Workbench, all
through the ``approvals`` service (:mod:`toolmesh.approvals`). Approved: the call runs.
Denied, or expired: it does not, and the model is told why (the reason the person gave).

A dialog taken up again (its agent restarted) asks again for the calls still waiting, with
the expiry they had, and takes the answers given meanwhile from its journal.

Each wait is logged with the command that answers it, and each answer with who gave it
(:mod:`toolmesh.approvals.audit`); the client is told the answer (``approval-answer``, with
``by``), so one that still asks its person learns that someone else answered. While a call
waits for a person and nothing else of its dialog works, a stop of the agent does not wait for
it (:mod:`toolmesh.rpc.parking`): the journal keeps the dialog for the restart.

An MCP server's question during a call (elicitation) is recorded and told the same way, as an
``elicitation-request``; the server waits for the answer (:mod:`toolmesh.mcp.elicitation`).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from functools import partial
from typing import Any

from toolmesh.agent.calls import Emit
from toolmesh.agent.journaling import DialogLog, Resumption
from toolmesh.agent.tools import Tool
from toolmesh.approvals import ApprovalGate, Policy, audit, call_digest
from toolmesh.approvals.wire import (
    ANSWER_MESSAGE,
    APPROVAL,
    EXPIRED,
    iso,
    now,
    request_text,
    seconds_left,
)
from toolmesh.rpc import parking
from toolmesh.schema.agent import message, new_message_id

#: seconds a request waits for its answer before it is taken as denied
DEFAULT_APPROVAL_TIMEOUT = 300.0


class DialogApprovals:
    """The approvals of one dialog; ``gate``: where answers arrive (``None``: no call waits,
    whatever the policy — an agent built without one)."""

    def __init__(self, *, gate: ApprovalGate | None, journal: DialogLog, emit: Emit,
                 workspace: str, user: str, default: Policy = "never",
                 timeout: float = DEFAULT_APPROVAL_TIMEOUT,
                 resumed: Resumption | None = None) -> None:
        self.gate = gate
        self.journal = journal
        self.emit = emit
        self.workspace = workspace
        self.user = user
        self.default = default
        self.timeout = timeout
        self._asked = dict(resumed.asked) if resumed is not None else {}
        self._answers = dict(resumed.answers) if resumed is not None else {}
        #: calls of the dialog waiting for a person now
        self._waiting = 0

    async def recorded(self) -> None:
        """A call's result was recorded: while another call waits for a person it is written
        now, for a stop may let the dialog go while it waits (:mod:`toolmesh.rpc.parking`)."""
        if self._waiting:
            await self.journal.flush()

    async def permit(self, tool: Tool, arguments: Any, *, step: int, call: str) -> str | None:
        """``None`` when the call may run; else the observation that says why it does not."""
        if self.gate is None or not tool.needs_approval(self.default):
            return None
        key = self.journal.key(step, call)
        digest = call_digest(tool.name, arguments)
        answer = self._answers.pop(key, None)
        if answer is None or answer.get("digest") != digest:
            answer = await self._ask(tool.name, arguments, step=step, key=key, digest=digest)
        return _refusal(tool.name, answer, self.timeout)

    async def _ask(self, tool: str, arguments: Any, *, step: int, key: str,
                   digest: str) -> dict[str, Any]:
        assert self.gate is not None
        request = self._asked.get(key)
        fresh = request is None or request.get("digest") != digest
        if fresh:
            asked = now()
            request = {"kind": APPROVAL, "dialog": self.journal.id, "call": key, "step": step,
                       "workspace": self.workspace, "user": self.user, "tool": tool,
                       "arguments": arguments, "digest": digest, "asked": iso(asked),
                       "expires": iso(asked + timedelta(seconds=self.timeout))}
        assert request is not None
        # waited on before anyone can answer: an answer that comes at once finds its call
        future = self.gate.expect(request)
        try:
            if fresh:
                self.journal.asked(request)
                await self.journal.flush()
            else:
                # asked before this agent took the dialog up: an answer given since its
                # journal was read was announced before anyone here listened for it
                answered = await self.journal.answer_to(key)
                if answered is not None and answered.get("digest") == digest:
                    return await self._told(request, answered)
            await self.emit(message("approval-request", request_text(request),
                                    message_id=new_message_id(), approval=request))
            await self.gate.announce_asked(request)
            await self.journal.flush()  # what came before is kept, whatever becomes of this
            self._waiting += 1
            try:
                with audit.waiting(request), parking.for_a_person():
                    async with asyncio.timeout(seconds_left(request)):
                        answer = await future
            except TimeoutError:
                answer = {"dialog": request["dialog"], "call": key,
                          "workspace": self.workspace, "digest": digest,
                          "decision": EXPIRED, "at": iso(now())}
                self.journal.answered(answer)
                await self.gate.announce(answer)  # for those who watch what waits
            finally:
                self._waiting -= 1
            return await self._told(request, answer)
        finally:
            self.gate.forget(str(request["dialog"]), key)

    async def _told(self, request: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
        """``answer`` to ``request``, logged, counted and told the client (who may still be
        asking its person: someone else answered)."""
        audit.decided(request, answer)
        by = answer.get("by")
        text = f"{request.get('tool')}: {answer.get('decision')}" + (
            f" by {audit.who(by)}" if isinstance(by, dict) else "")
        await self.emit(message(ANSWER_MESSAGE, text, message_id=new_message_id(),
                                answer={k: v for k, v in answer.items() if k != "content"}))
        return answer


    async def relay(self, tool: str, request: dict[str, Any], *, step: int) -> None:
        """An MCP server's question during a call of ``tool``: recorded, then told to the
        client. The server waits for the answer, which goes to it through the approvals
        service (:mod:`toolmesh.mcp.elicitation`); the gate here holds the question too, so
        an agent that records nothing can still take its answer."""
        shown = {**request, "tool": tool, "step": step, "user": self.user,
                 "workspace": self.workspace, "asked": iso(now())}
        if self.gate is not None:
            future = self.gate.expect(shown)
            forget = partial(self.gate.forget, str(shown["dialog"]), str(shown["call"]))
            audit.began(shown)

            def settled(done: asyncio.Future[dict[str, Any]]) -> None:
                forget()
                audit.ended(shown)
                if not done.cancelled():  # answered, not expired or abandoned
                    audit.decided(shown, done.result())

            future.add_done_callback(settled)
            asyncio.get_running_loop().call_later(seconds_left(shown), forget)
        self.journal.asked(shown)
        await self.journal.flush()
        await self.emit(message("elicitation-request", request_text(shown),
                                message_id=new_message_id(), elicitation=shown))
        if self.gate is not None:
            await self.gate.announce_asked(shown)


def _refusal(tool: str, answer: dict[str, Any], timeout: float) -> str | None:
    decision = answer.get("decision")
    if decision == "approve":
        return None
    if decision == EXPIRED:
        return (f"Error: no one approved this call of {tool!r} in time (approval requests "
                f"expire after {timeout:g} s); it was not run.")
    reason = str(answer.get("reason") or "").strip()
    return (f"Error: the user denied this call of {tool!r}; it was not run. "
            + (f"Their reason: {reason}" if reason else "They gave no reason."))
