"""The ``dialogs`` service: the dialogs of a workspace, read back from the journal.

Requests on ``request:tg:dialogs:{flow}`` (the agent serves them, beside its dialogs):

* ``{"operation": "list", "workspace"?, "status"?, "limit"?}`` → ``{"workspace",
  "dialogs": [summary, ...]}``, newest first (:meth:`~toolmesh.dialogs.journal.Dialog.wire`);
* ``{"operation": "show", "id", "workspace"?}`` → ``{"dialog": summary + {"request",
  "entries": [{"seq", "at", "kind", "body"}, ...]}}``; a ``not-found`` error for a dialog
  that is not in that workspace (or no longer kept).

The gateway serves it as ``POST /api/v1/flow/{flow}/service/dialogs``, in the workspace of
the caller's token; ``toolmesh dialogs`` prints it.
"""

from __future__ import annotations

from typing import Any

from toolmesh.bus.base import Bus
from toolmesh.config.workspaces import request_workspace
from toolmesh.dialogs.journal import LIST_LIMIT, DialogJournal, Entry
from toolmesh.errors import ServiceError
from toolmesh.rpc.service import Reply, Service

DIALOGS_REQUEST_QUEUE = "request:tg:dialogs:default"
DIALOGS_RESPONSE_QUEUE = "response:tg:dialogs:default"


class DialogsService(Service):
    """Answers ``dialogs`` requests from ``journal`` (``workspace``: of requests that name
    none); with no journal (``--dialogs off``), each with an error that says so."""

    error_type = "dialogs-error"

    def __init__(self, bus: Bus, journal: DialogJournal | None, *, id: str = "agent",
                 workspace: str = "default", request_queue: str = DIALOGS_REQUEST_QUEUE,
                 response_queue: str = DIALOGS_RESPONSE_QUEUE) -> None:
        super().__init__(bus, request_queue=request_queue, response_queue=response_queue,
                         subscription=f"{id}-dialogs-request", concurrency=16)
        self.journal = journal
        self.workspace = workspace

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        if self.journal is None:
            raise ServiceError("this agent records no dialogs: it runs with --dialogs off",
                               type="not-recorded")
        workspace = request_workspace(request, default=self.workspace)
        operation = request.get("operation") or "list"
        if operation == "list":
            status = request.get("status")
            if status is not None and not isinstance(status, str):
                raise _bad("'status' must be a string")
            limit = request.get("limit", 100)
            if (not isinstance(limit, int) or isinstance(limit, bool)
                    or not 1 <= limit <= LIST_LIMIT):
                raise _bad(f"'limit' must be a whole number from 1 to {LIST_LIMIT}")
            dialogs = await self.journal.recent(workspaces=[workspace], status=status or None,
                                                limit=limit)
            await reply({"workspace": workspace, "dialogs": [d.wire() for d in dialogs]})
        elif operation == "show":
            id = request.get("id")
            if not isinstance(id, str) or not id:
                raise _bad("'id' must name a dialog")
            found = await self.journal.get(id, workspaces=[workspace])
            if found is None:
                raise ServiceError(f"no dialog {id!r} in workspace {workspace!r} (it may be "
                                   "older than the dialogs kept)", type="not-found")
            dialog, entries = found
            await reply({"dialog": {**dialog.wire(), "request": dialog.request,
                                    "entries": [_entry(e) for e in entries]}})
        else:
            raise _bad(f"unknown operation {operation!r}; operations: list, show")


def _entry(entry: Entry) -> dict[str, Any]:
    return {"seq": entry.seq, "at": entry.at.isoformat(), "kind": entry.kind,
            "body": entry.body}


def _bad(message: str) -> ServiceError:
    return ServiceError(message, type="bad-request")
