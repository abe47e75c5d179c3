"""A tool's progress in the dialog: ``progress`` messages, and a deadline that progress moves.

An MCP tool that reports progress (:mod:`toolmesh.mcp.progress`) is given more time: each
report moves the agent's deadline for the call to ``timeout`` seconds later, never past
``max_timeout`` after the call began, and is streamed to the client as a message of its own::

    {"message_type": "progress", "content": "indexer: 3/10 reading files",
     "progress": {"tool": "indexer", "progress": 3, "total": 10, "message": "reading files"},
     "end_of_message": true, "end_of_dialog": false, "message_id": "…", "error": null}

It carries no thought and never enters the history or the prompt: it is for the person
watching. TrustGraph's clients skip message types they do not know.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from toolmesh.mcp.progress import Progress
from toolmesh.schema.agent import message, new_message_id


def progress_message(tool: str, update: Progress) -> dict[str, Any]:
    return message("progress", f"{tool}: {update.describe()}", message_id=new_message_id(),
                   progress={"tool": tool, **update.to_wire()})


class ProgressRelay:
    """The ``progress`` callback of one tool call: emits the message and moves ``backstop``
    (the agent's own timeout around the call) as the tool's deadline moves."""

    def __init__(self, *, tool: str, emit: Callable[[dict[str, Any]], Awaitable[None]],
                 backstop: asyncio.Timeout, timeout: float, max_timeout: float) -> None:
        now = asyncio.get_running_loop().time()
        self.tool = tool
        self._emit = emit
        self._backstop = backstop
        self._timeout = timeout
        self._limit = now + max_timeout

    def hold(self) -> None:
        """A person is asked: the call may take its longest (the next report, or the
        result, comes when they answer)."""
        if not self._backstop.expired():
            self._backstop.reschedule(self._limit)

    async def __call__(self, update: Progress) -> None:
        if not self._backstop.expired():
            due = asyncio.get_running_loop().time() + self._timeout
            self._backstop.reschedule(min(due, self._limit))
        await self._emit(progress_message(self.tool, update))
