"""The ``approvals`` service: what waits for a person in a workspace, and their answers.

Requests on ``request:tg:approvals:{flow}`` (the agent serves them, beside its dialogs):

* ``{"operation": "list", "workspace"?}`` → ``{"workspace", "approvals": [REQUEST, ...]}``:
  the calls (and MCP servers' questions) waiting, oldest first;
* ``{"operation": "approve", "dialog"?, "call", "digest"}`` and ``{"operation": "deny",
  "dialog"?, "call", "digest"?, "reason"?}`` → ``{"answer": ANSWER}`` (``dialog`` may be left
  out: the call's key names it, and the call is looked up among those waiting);
* ``{"operation": "answer", "dialog"?, "call", "action": "accept" | "decline" | "cancel",
  "content"?}`` → ``{"answer": ANSWER}`` for an elicitation (``content``: the form's values,
  checked against the requested schema);
* ``{"operation": "watch", "workspace"?}`` → a stream: ``{"workspace", "approvals": [...]}``
  (what waits now), then ``{"asked": REQUEST}`` for each call that begins to wait and
  ``{"answer": ANSWER}`` for each answer, each with ``"end_of_stream": false``; it ends with
  ``{"workspace", "renew": true}`` shortly before the caller's deadline (ask again to go on
  watching: the list that starts the next stream has whatever came in between).

Each answer records who gave it, through which face (``by``: :mod:`toolmesh.approvals.audit`),
as the gateway stamped the request.

An approval names the digest of the exact call it approves (:mod:`toolmesh.approvals.digest`):
when the call waiting is another (``stale``), or none waits (``not-found``), or it was
answered already (``answered``) or expired (``expired``), the answer is refused and nothing
runs. The answer is recorded in the dialog's journal, then announced to every agent replica
(:mod:`toolmesh.approvals.gate`): the one that runs the dialog goes on. The gateway serves it
as ``POST /api/v1/flow/{flow}/service/approvals``, for tokens with ``approve``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from toolmesh.approvals.audit import approver
from toolmesh.approvals.gate import ASKED, ApprovalGate
from toolmesh.approvals.wire import (
    ANSWER_ENTRY,
    APPROVAL,
    APPROVAL_DECISIONS,
    ELICITATION,
    ELICITATION_DECISIONS,
    MAX_REASON,
    iso,
    now,
    open_requests,
    seconds_left,
)
from toolmesh.bus.base import Bus
from toolmesh.config.workspaces import request_workspace
from toolmesh.dialogs import DialogJournal, JournalError
from toolmesh.errors import ServiceError
from toolmesh.rpc import deadline, parking
from toolmesh.rpc.service import Reply, Service

APPROVALS_REQUEST_QUEUE = "request:tg:approvals:default"
APPROVALS_RESPONSE_QUEUE = "response:tg:approvals:default"
OPERATIONS = ("list", "approve", "deny", "answer", "watch")
#: seconds before the caller's deadline a watch ends (with ``renew``), so its caller hears
#: the end rather than a timeout
WATCH_MARGIN = 2.0


class ApprovalsService(Service):
    """Answers ``approvals`` requests from the journal (every replica's dialogs) and the
    gate (this process's; all there is with ``--dialogs off``)."""

    error_type = "approvals-error"

    def __init__(self, bus: Bus, gate: ApprovalGate, journal: DialogJournal | None, *,
                 id: str = "agent", workspace: str = "default",
                 request_queue: str = APPROVALS_REQUEST_QUEUE,
                 response_queue: str = APPROVALS_RESPONSE_QUEUE) -> None:
        # a watch holds its request for as long as its caller waits: room for many
        super().__init__(bus, request_queue=request_queue, response_queue=response_queue,
                         subscription=f"{id}-approvals-request", concurrency=256)
        self.gate = gate
        self.journal = journal
        self.workspace = workspace
        #: each watch in progress: its events, and its workspace
        self._watches: dict[asyncio.Queue[dict[str, Any]], str] = {}
        self._unlisten = gate.listen(self._notice)

    async def stop(self) -> None:
        await super().stop()
        self._unlisten()

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        workspace = request_workspace(request, default=self.workspace)
        operation = request.get("operation") or "list"
        if operation == "list":
            await reply({"workspace": workspace, "approvals": await self.waiting(workspace)})
            return
        if operation == "watch":
            await self._watch(workspace, reply)
            return
        if operation not in OPERATIONS:
            raise _bad(f"unknown operation {operation!r}; operations: {', '.join(OPERATIONS)}")
        dialog, call = request.get("dialog"), request.get("call")
        if dialog is None and isinstance(call, str) and call:
            dialog = await self._dialog_of(workspace, call)
        if not isinstance(dialog, str) or not dialog or not isinstance(call, str) or not call:
            raise _bad("'call' (and 'dialog', or not) must name the call waiting (as the "
                       "approval-request or the list shows them)")
        asked = await self._asked(workspace, dialog, call)
        answer = _answer(operation, request, asked)
        answer["by"] = approver(request)
        if self.journal is not None and asked.get("journaled") is not False:
            try:
                await self.journal.append(dialog, [(ANSWER_ENTRY, answer)])
            except JournalError as e:
                raise ServiceError(f"the answer could not be recorded: {e.message}",
                                   type="journal-error") from e
        await self.gate.announce(answer)
        await reply({"answer": answer})

    async def _dialog_of(self, workspace: str, call: str) -> str:
        """The dialog of ``call``, one of those waiting in ``workspace``."""
        for request in await self.waiting(workspace):
            if request.get("call") == call:
                return str(request.get("dialog"))
        raise ServiceError(f"no call {call!r} waits for an answer in workspace {workspace!r}",
                           type="not-found")

    async def _watch(self, workspace: str, reply: Reply) -> None:
        """What waits in ``workspace``, then each change, until shortly before the caller's
        deadline (see the module docstring)."""
        events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._watches[events] = workspace  # before the list: nothing falls in between
        try:
            await reply({"workspace": workspace, "approvals": await self.waiting(workspace),
                         "end_of_stream": False})
            left = deadline.remaining()
            # it waits for people only: a stop need not wait for it (rpc/parking.py)
            with parking.for_a_person():
                async with asyncio.timeout(None if left is None
                                           else max(left - WATCH_MARGIN, 0.0)):
                    while True:
                        await reply({**await events.get(), "end_of_stream": False})
        except TimeoutError:
            pass
        finally:
            del self._watches[events]
        await reply({"workspace": workspace, "renew": True})

    def _notice(self, notice: dict[str, Any]) -> None:
        """A notice of the gate (an answer, or a request that begins to wait), for the
        watches of its workspace."""
        if not self._watches:
            return
        asked = notice.get(ASKED)
        if isinstance(asked, dict):
            workspace, event = asked.get("workspace"), {"asked": asked}
        else:
            shown = {k: v for k, v in notice.items() if k != "content"}  # a form's values
            workspace, event = notice.get("workspace"), {"answer": shown}
        for events, watched in self._watches.items():
            if watched == workspace:
                events.put_nowait(event)

    async def waiting(self, workspace: str) -> list[dict[str, Any]]:
        """The requests of ``workspace`` that wait for an answer, oldest first."""
        found: dict[tuple[str, str], dict[str, Any]] = {}
        #: dialogs the journal speaks for (the gate's view of them may lag an answer)
        journaled: set[str] = set()
        if self.journal is not None:
            try:
                dialogs = await self.journal.unfinished()
            except JournalError as e:
                raise ServiceError(e.message, type="journal-error") from e
            for dialog in dialogs:
                if dialog.workspace != workspace:
                    continue
                got = await self.journal.get(dialog.id, workspaces=[workspace])
                if got is None:
                    continue
                journaled.add(dialog.id)
                asked, answers = open_requests((e.kind, e.body) for e in got[1])
                for call, body in asked.items():
                    if call not in answers and seconds_left(body) > 0:
                        found[(dialog.id, call)] = body
        for body in self.gate.waiting(workspace):  # dialogs that run unrecorded
            if str(body["dialog"]) not in journaled:
                found.setdefault((str(body["dialog"]), str(body["call"])), body)
        return sorted(found.values(), key=lambda b: str(b.get("expires")))

    async def _asked(self, workspace: str, dialog: str, call: str) -> dict[str, Any]:
        """The request waiting for ``call`` of ``dialog`` in ``workspace``; or the error
        that says why there is none to answer."""
        held = self.gate.held(dialog, call)
        # a question of a call made outside any dialog (through /mcp) is in no journal
        if held is not None and held.get("workspace") == workspace \
                and (self.journal is None or held.get("journaled") is False):
            return held
        missing = ServiceError(f"no call {call!r} of dialog {dialog!r} waits for an answer in "
                               f"workspace {workspace!r}", type="not-found")
        if self.journal is None:
            raise missing
        try:
            got = await self.journal.get(dialog, workspaces=[workspace])
        except JournalError as e:
            raise ServiceError(e.message, type="journal-error") from e
        if got is None or not got[0].running:
            raise missing
        asked, answers = open_requests((e.kind, e.body) for e in got[1])
        if call not in asked:
            raise missing
        if call in answers:
            raise ServiceError(f"call {call!r} was answered already "
                               f"({answers[call].get('decision')})", type="answered")
        if seconds_left(asked[call]) <= 0:
            raise ServiceError(f"the request of call {call!r} expired at "
                               f"{asked[call].get('expires')}: the call was not run",
                               type="expired")
        return asked[call]


def _answer(operation: str, request: dict[str, Any], asked: dict[str, Any]) -> dict[str, Any]:
    """The answer ``request`` gives to ``asked``, checked."""
    kind = asked.get("kind") or APPROVAL
    answer: dict[str, Any] = {"dialog": asked["dialog"], "call": asked["call"],
                              "workspace": asked.get("workspace"),
                              "digest": asked.get("digest"), "at": iso(now())}
    if kind == ELICITATION:
        if operation != "answer":
            raise _bad(f"call {asked['call']!r} is a question of an MCP server: answer it "
                       f"with operation 'answer' and an action "
                       f"({', '.join(ELICITATION_DECISIONS)})")
        action = request.get("action")
        if action not in ELICITATION_DECISIONS:
            raise _bad(f"'action' must be one of {', '.join(ELICITATION_DECISIONS)}")
        answer["decision"] = action
        if action == "accept":
            answer["content"] = _content(request.get("content"), asked)
        return answer
    if operation not in APPROVAL_DECISIONS:
        raise _bad(f"call {asked['call']!r} waits for approval: approve or deny it")
    digest = request.get("digest")
    if operation == "approve" and digest is None:
        raise _bad("an approval names the 'digest' of the call it approves (as the "
                   "approval-request shows it)")
    if digest is not None and digest != asked.get("digest"):
        raise ServiceError(f"call {asked['call']!r} is not the call approved: its digest is "
                           f"{asked.get('digest')} (a changed call needs its own approval)",
                           type="stale")
    answer["decision"] = operation
    reason = request.get("reason")
    if reason is not None:
        if not isinstance(reason, str):
            raise _bad("'reason' must be a string")
        answer["reason"] = reason[:MAX_REASON]
    return answer


def _content(content: Any, asked: dict[str, Any]) -> dict[str, Any]:
    """An accepted form's values, checked against the schema the server asked for."""
    if content is None:
        content = {}
    if not isinstance(content, dict):
        raise _bad("'content' must be an object of the form's values")
    schema = asked.get("schema")
    if isinstance(schema, dict):
        import jsonschema  # here: ~0.1 s to import, and most agents never see a form

        problems = sorted(e.message for e in
                          jsonschema.Draft202012Validator(schema).iter_errors(content))
        if problems:
            raise _bad("the form's values do not fit what was asked: " + "; ".join(problems))
    return content


def _bad(message: str) -> ServiceError:
    return ServiceError(message, type="bad-request")
