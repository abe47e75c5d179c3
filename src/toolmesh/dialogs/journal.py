"""The dialog-journal seam: what every backend that keeps dialogs provides.

A dialog is a journal (DESIGN.md, third round): its entries are appended as they happen, in
order, each in the transaction that also moves the dialog's summary along. Entries:

``offer``
    the tools a step shows the model, when they differ from the step before's (tool
    selection, docs/tool-calling.md): ``step``, ``method``, ``available``, ``shown``,
    ``find_tools``, ``tools`` (each ``{"name", "reason", "score"}``).
``reply``
    what the model decided in one step, before any of its calls runs: ``step``, ``thought``,
    ``calls`` (each ``{"id", "name", "arguments", "problem"?}``), ``raw``; or ``problem``
    when the reply could not be used.
``result``
    what one call came to: ``call`` (its id), ``name``, ``observation``, ``ok``,
    ``redundant``, ``seconds``.
``turn``
    the step is over: ``state`` (the dialog's state after it) and ``wrap`` (why the next step
    may only answer, or ``null``).
``end``
    the dialog's last message, exactly as it went to the client.

Times are the database's clock, never a process's: replicas on several machines share one
journal and need not agree on the time. A dialog's ``due`` is when its client stops waiting
(the time it began plus the caller's timeout); a dialog taken up after that is not run for
nobody.

Who may read what is the caller's business: every read takes the workspaces it may see.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from toolmesh.errors import ToolmeshError

#: the kinds of entries, in the order a step writes them
KINDS = ("offer", "reply", "approval", "answer", "result", "turn", "end")

#: how many dialogs a journal keeps by default, besides those still running (the oldest
#: finished ones go first)
DEFAULT_KEEP = 10_000

#: how many days a finished dialog is kept by default
DEFAULT_MAX_AGE_DAYS = 30.0

#: how many bytes a journal may take by default (0: no bound): a laptop's share — a
#: thousandth of a 256 GB disk — and, at the 10-30 KB an ordinary dialog takes, room for the
#: :data:`DEFAULT_KEEP` dialogs, so that the count binds for ordinary dialogs and the bytes
#: only for large ones
DEFAULT_MAX_BYTES = 256 * 1024 * 1024

#: a sweep brings a journal over this share of its byte budget back under it (dropping the
#: oldest finished dialogs), and runs whenever a further :data:`SWEEP_SHARE` of the budget was
#: written (a writer that outpaces it waits for it after another share): so what is kept
#: stays under the budget between sweeps, with room for the database's own overhead
KEEP_SHARE = 0.75
SWEEP_SHARE = 0.03125

#: the most dialogs one :meth:`DialogJournal.recent` call returns
LIST_LIMIT = 1_000

#: a dialog that has begun and not ended
RUNNING = "running"
#: a dialog whose client had stopped waiting before it could be taken up again
ABANDONED = "abandoned"


class JournalError(ToolmeshError):
    """The dialog journal cannot be opened, read or written."""

    type = "journal-error"


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One entry of a dialog's journal."""

    seq: int
    at: datetime
    kind: str
    body: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Dialog:
    """A dialog's summary: who asked what, where it stands, and what it cost."""

    id: str
    workspace: str
    user: str
    question: str
    #: :data:`RUNNING`, :data:`ABANDONED`, ``answer``, or the type of the error it ended with
    status: str
    started: datetime
    updated: datetime
    #: when its client stops waiting (``None``: the request said no deadline)
    due: datetime | None
    steps: int = 0
    tool_calls: int = 0
    in_token: int | None = None
    out_token: int | None = None
    #: the request as the agent parsed it (question, user, groups, state, history, streaming)
    request: dict[str, Any] | None = None

    @property
    def running(self) -> bool:
        return self.status == RUNNING

    def wire(self) -> dict[str, Any]:
        """The summary as JSON (the API, ``toolmesh dialogs``); times in ISO 8601 UTC."""
        return {"id": self.id, "workspace": self.workspace, "user": self.user,
                "question": self.question, "status": self.status,
                "started": self.started.isoformat(), "updated": self.updated.isoformat(),
                "due": self.due.isoformat() if self.due else None, "steps": self.steps,
                "tool_calls": self.tool_calls, "in_token": self.in_token,
                "out_token": self.out_token,
                "seconds": round((self.updated - self.started).total_seconds(), 3)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Begun:
    """What :meth:`DialogJournal.begin` found: the dialog (new, or begun before by another
    delivery of the same request) and its entries so far."""

    dialog: Dialog
    entries: list[Entry]
    #: begun by this call (no earlier delivery got as far)
    fresh: bool
    #: its client had stopped waiting: the dialog is now :data:`ABANDONED` and must not run
    expired: bool
    #: seconds until its client stops waiting (``None``: no deadline)
    remaining: float | None = None


@runtime_checkable
class DialogJournal(Protocol):
    """Where dialogs are kept (:mod:`toolmesh.dialogs.sqlite`,
    :mod:`toolmesh.dialogs.postgres`)."""

    async def open(self) -> None:
        """Connect, creating the tables if missing."""

    async def close(self) -> None:
        """Disconnect; safe to call twice."""

    async def begin(self, id: str, *, workspace: str, user: str, question: str,
                    request: dict[str, Any], timeout: float | None) -> Begun:
        """Begin dialog ``id`` — or, when it was begun before (the same request delivered
        again), take it up: its entries, and whether its client is still waiting."""

    async def begin_with(self, id: str, *, workspace: str, user: str, question: str,
                         request: dict[str, Any], timeout: float | None,
                         entries: Sequence[tuple[str, dict[str, Any]]],
                         steps: int | None = None, tool_calls: int | None = None,
                         end: tuple[str, int | None, int | None] | None = None) -> bool:
        """Begin dialog ``id`` with its first ``entries``, in one transaction (a new request's
        dialog, at its first write); ``end``: it ends with them too (``(status, in_token,
        out_token)``). ``False``, writing nothing, if ``id`` was begun before."""

    async def append(self, id: str, entries: Sequence[tuple[str, dict[str, Any]]], *,
                     steps: int | None = None, tool_calls: int | None = None) -> None:
        """Append ``(kind, body)`` entries, in one transaction with the summary's counts."""

    async def finish(self, id: str, *, status: str,
                     entries: Sequence[tuple[str, dict[str, Any]]] = (),
                     steps: int | None = None, tool_calls: int | None = None,
                     in_token: int | None = None, out_token: int | None = None) -> None:
        """Append the last entries and close the dialog with ``status``; then drop what the
        retention no longer keeps."""

    async def get(self, id: str, *, workspaces: Collection[str] | None = None,
                  ) -> tuple[Dialog, list[Entry]] | None:
        """Dialog ``id`` and its entries, if it exists in one of ``workspaces`` (``None``:
        any)."""

    async def recent(self, *, workspaces: Collection[str] | None = None,
                   status: str | None = None, limit: int = 100) -> list[Dialog]:
        """The newest dialogs first (at most ``limit``, itself at most :data:`LIST_LIMIT`)."""

    async def unfinished(self) -> list[Dialog]:
        """The running dialogs, oldest first (what an embedded deployment takes up again when
        it starts: those whose client stopped waiting are then abandoned)."""


def fold(question: str, request: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The request to store beside ``question``: without its ``question`` field when that is
    ``question`` — a question is stored once — and whether it was left out (what
    :func:`unfold` needs to give the request back as it came)."""
    if request.get("question") == question:
        return {k: v for k, v in request.items() if k != "question"}, True
    return request, False


def unfold(question: str, request: dict[str, Any], folded: bool) -> dict[str, Any]:
    """The request :func:`fold` was given (``folded``: what it said)."""
    return {"question": question, **request} if folded else request


def check_entries(entries: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Refuse an entry of an unknown kind: a bug in the caller, not the journal's to keep."""
    for kind, body in entries:
        if kind not in KINDS or not isinstance(body, dict):
            raise JournalError(f"not a journal entry: {kind!r}")


def check_limit(limit: int) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise JournalError(f"limit must be a positive whole number, not {limit!r}")
    return min(limit, LIST_LIMIT)
