"""A dialog's journal as the agent writes it and reads it back (docs/dialogs.md).

The loop tells :class:`DialogLog` what happens; it writes the entries of
:mod:`toolmesh.dialogs.journal` in as few transactions as durability allows: a step's reply
is written, with whatever came before it, before any of its calls runs — so a dialog taken up
again knows every call that may have been made, with its id — and the results, the end of the
step and the answer go with the next write. :func:`resumption` turns the entries back into the
loop's state: the turns so far, and the calls of the last reply that have no result yet
(made again, with the same idempotency keys).

A journal that fails does not fail the dialog: the dialog goes on unrecorded, with a warning
(the history is there to keep work, not to stop it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from toolmesh.agent.strategies import CallRequest, Calls, Unusable, Wrap
from toolmesh.agent.transcript import CallRecord, Turn
from toolmesh.approvals.wire import ANSWER_ENTRY, REQUEST_ENTRY, open_requests
from toolmesh.dialogs import DialogJournal, Entry, JournalError

log = logging.getLogger("toolmesh.agent")


class DialogLog:
    """The journal of one dialog (``journal=None``: nothing is recorded), and the
    idempotency keys of its calls.

    ``opening``: the dialog is new (a request delivered for the first time: its id names no
    dialog yet) and is begun by its first write, in the same transaction — so a dialog that
    calls one tool costs two writes: its reply before the call, and its end. These are the
    arguments of :meth:`~toolmesh.dialogs.journal.DialogJournal.begin_with`; ``timeout``
    among them counts from when the log was made."""

    def __init__(self, journal: DialogJournal | None, id: str, *,
                 opening: dict[str, Any] | None = None) -> None:
        self.journal = journal
        self.id = id
        self._opening = opening
        self._made = time.monotonic()
        self.tool_calls = 0
        self._pending: list[tuple[str, dict[str, Any]]] = []
        #: the pieces of the answer streamed so far (the last message holds only the last)
        self._answer: list[str] = []

    def told(self, message: dict[str, Any]) -> None:
        """A message went to the client (its answer pieces are kept for the end entry)."""
        if self.journal is not None and message.get("message_type") == "answer":
            self._answer.append(str(message.get("content") or ""))

    def key(self, step: int, call: str) -> str:
        """The idempotency key of call ``call`` of step ``step``: the same whenever the
        dialog is taken up again (a model may reuse its call ids from step to step)."""
        return f"{self.id}/{step}/{call}"

    def reply(self, step: int, decision: Calls | Unusable) -> None:
        """What the model decided in ``step`` (written before its calls run: :meth:`flush`)."""
        if self.journal is None:
            return
        body: dict[str, Any] = {"step": step, "thought": decision.thought, "raw": decision.raw}
        if isinstance(decision, Calls):
            body["calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments,
                              **({"problem": c.problem} if c.problem is not None else {})}
                             for c in decision.calls]
        else:
            body["problem"] = decision.problem
        self._pending.append(("reply", body))

    def offered(self, step: int, offer: dict[str, Any]) -> None:
        """The tools step ``step`` shows the model, and why (:mod:`toolmesh.agent.offering`;
        written with the step's reply)."""
        if self.journal is not None:
            self._pending.append(("offer", {"step": step, **offer}))

    def result(self, step: int, record: CallRecord, seconds: float | None) -> None:
        if self.journal is None:
            return
        # counted as the dialog's usage counts them: calls of a tool, not refusals
        self.tool_calls += record.ran
        self._pending.append(("result", {
            "step": step, "call": record.id, "name": record.name,
            "arguments": record.arguments, "observation": record.observation, "ok": record.ok,
            "redundant": record.redundant, "ran": record.ran,
            "seconds": None if seconds is None else round(seconds, 6)}))

    def asked(self, request: dict[str, Any]) -> None:
        """A call waits for a person (:mod:`toolmesh.agent.approving`; written by the next
        :meth:`flush`, before anyone is told)."""
        if self.journal is not None:
            self._pending.append((REQUEST_ENTRY, request))

    def answered(self, answer: dict[str, Any]) -> None:
        """An answer the agent itself gave (the request expired)."""
        if self.journal is not None:
            self._pending.append((ANSWER_ENTRY, answer))

    async def answer_to(self, call: str) -> dict[str, Any] | None:
        """The answer the journal holds for ``call`` (given while no agent ran the dialog,
        or while this one took it up), or ``None``."""
        if self.journal is None:
            return None
        try:
            found = await self.journal.get(self.id)
        except JournalError as e:
            self._give_up(e)
            return None
        if found is None:
            return None
        _, answers = open_requests((e.kind, e.body) for e in found[1])
        return answers.get(call)

    def turn(self, step: int, state: str | None, wrap: Wrap | None) -> None:
        if self.journal is None:
            return
        self._pending.append(("turn", {"step": step, "state": state, "wrap": wrap}))

    async def _write(self, entries: list[tuple[str, dict[str, Any]]], *,
                     steps: int | None,
                     end: tuple[str, int | None, int | None] | None = None) -> None:
        journal = self.journal
        assert journal is not None
        try:
            if self._opening is None:
                if end is None:
                    await journal.append(self.id, entries, steps=steps,
                                         tool_calls=self.tool_calls)
                else:
                    await journal.finish(self.id, status=end[0], entries=entries, steps=steps,
                                         tool_calls=self.tool_calls, in_token=end[1],
                                         out_token=end[2])
                return
            opening, self._opening = self._opening, None
            timeout = opening.pop("timeout")
            if timeout is not None:
                timeout = max(timeout - (time.monotonic() - self._made), 0.0)
            if not await journal.begin_with(self.id, **opening, timeout=timeout,
                                            entries=entries, steps=steps,
                                            tool_calls=self.tool_calls, end=end):
                # a client reusing a request id: the first dialog of that id keeps the record
                log.warning("dialog %s was begun before by a request of the same id; this one "
                            "goes unrecorded", self.id)
                self.journal = None
        except JournalError as e:
            self._give_up(e)

    async def flush(self, *, steps: int | None = None) -> None:
        """Write what is pending (before a step's calls run)."""
        if self.journal is None or not self._pending:
            return
        entries, self._pending = self._pending, []
        await self._write(entries, steps=steps)

    async def end(self, message: dict[str, Any], *, steps: int | None) -> None:
        """The dialog's last message, as the client gets it (before the request is
        acknowledged: a dialog cut short after its answer went out asks for it again)."""
        if self.journal is None:
            return
        if message.get("message_type") == "answer":
            self._answer.append(str(message.get("content") or ""))
        end = {"message": message, "answer": "".join(self._answer)}
        entries, self._pending = [*self._pending, ("end", end)], []
        error = message.get("error")
        status = "answer" if message.get("message_type") == "answer" else (
            str(error.get("type") or "error") if isinstance(error, dict) else "error")
        await self._write(entries, steps=steps,
                          end=(status, message.get("in_token"), message.get("out_token")))

    def _give_up(self, e: JournalError) -> None:
        log.warning("dialog %s goes on unrecorded: %s", self.id, e.message)
        self.journal = None


@dataclass(kw_only=True)
class Resumption:
    """Where a dialog taken up again stands, from its journal."""

    turns: list[Turn] = field(default_factory=list)
    state: str | None = None
    wrap: Wrap | None = None
    #: the steps that were completed
    steps: int = 0
    #: the last reply's calls, when its step did not complete: they run (again) first
    pending: Calls | None = None
    #: the results of ``pending``'s calls that were recorded, by call id: not run again
    known: dict[str, CallRecord] = field(default_factory=dict)
    tool_calls: int = 0
    #: the dialog's last message, when it had ended (an answer with the whole answer)
    end: dict[str, Any] | None = None
    #: the calls of ``pending`` that asked a person, and the answers they got, by call key
    asked: dict[str, dict[str, Any]] = field(default_factory=dict)
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)


def resumption(entries: Sequence[Entry], *, state: str | None = None) -> Resumption:
    """The loop's state after ``entries`` (``state``: the request's, before any step)."""
    out = Resumption(state=state)
    reply: dict[str, Any] | None = None
    results: dict[str, CallRecord] = {}
    for entry in entries:
        body = entry.body
        if entry.kind == "reply":
            reply, results = body, {}
        elif entry.kind == "result":
            ran = body.get("ran") is not False  # absent: written before it was recorded
            out.tool_calls += ran
            results[str(body.get("call"))] = CallRecord(
                id=str(body.get("call")), name=str(body.get("name")),
                arguments=body.get("arguments"), observation=str(body.get("observation")),
                ok=bool(body.get("ok")), redundant=bool(body.get("redundant")), ran=ran)
        elif entry.kind == "turn" and reply is not None:
            out.turns.append(_turn(reply, results))
            out.state, out.wrap = body.get("state"), body.get("wrap")
            out.steps = int(body.get("step") or out.steps + 1)
            reply, results = None, {}
        elif entry.kind == "end" and isinstance(body.get("message"), dict):
            # told again whole: the client asking again may have missed any piece of it
            out.end = {**body["message"], **({"content": body["answer"]}
                                             if body.get("answer") else {})}
    if reply is not None and "calls" in reply:
        out.pending = Calls(thought=str(reply.get("thought") or ""), raw=reply.get("raw"),
                            calls=tuple(CallRequest(id=str(c["id"]), name=str(c["name"]),
                                                    arguments=c.get("arguments"),
                                                    problem=c.get("problem"))
                                        for c in reply["calls"]))
        out.known = results
        out.asked, out.answers = open_requests(
            (e.kind, e.body) for e in entries if e.kind in (REQUEST_ENTRY, ANSWER_ENTRY))
    return out


def _turn(reply: dict[str, Any], results: dict[str, CallRecord]) -> Turn:
    thought, raw = str(reply.get("thought") or ""), reply.get("raw")
    if "problem" in reply:
        return Turn(thought=thought, problem=f"Error: {reply['problem']}", raw=raw)
    calls = tuple(results[str(c["id"])] for c in reply.get("calls", ())
                  if str(c["id"]) in results)
    return Turn(thought=thought, calls=calls, raw=raw)
