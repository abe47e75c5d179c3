"""The tools each step of a dialog shows, as the client and the journal learn of them.

The loop asks :class:`DialogOffers` for a step's tools: the tools the request may use that can
work now go through selection (:mod:`toolmesh.agent.selection`), and what it shows — with
``find-tools`` when it left some out — is what the strategy offers the model. When a step
leaves tools out and shows other tools than the step before, the client gets an ``offer``
message and the journal an ``offer`` entry (the object below and the step); a dialog whose
steps show every tool gets neither::

    {"message_type": "offer", "content": "1 of 60 tools (bm25): tell-joke (matched: joke); ...",
     "offer": {"method", "available", "shown", "find_tools", "tools": [{"name", "reason",
               "score"}]}, ...}

Like ``tool-call``, the type is toolmesh's own: TrustGraph's clients skip it.

A call may name any tool the request may use, shown or not (a model may remember one from an
earlier step): it runs, as it would have before selection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from toolmesh.agent.calls import Offered
from toolmesh.agent.journaling import DialogLog
from toolmesh.agent.selection import FIND_TOOLS, DialogView, FindTools, Offer, ToolSelector
from toolmesh.agent.tools import Tool
from toolmesh.agent.toolset import ToolSet
from toolmesh.agent.transcript import Transcript
from toolmesh.schema.agent import message, new_message_id

Emit = Callable[[dict[str, Any]], Awaitable[None]]


def dialog_view(transcript: Transcript) -> DialogView:
    """What selection reads of the dialog: the question, the tools called, the searches."""
    called: list[str] = []
    searches: list[str] = []
    answered = False
    for turn in transcript.turns:
        for call in turn.calls:
            answered = answered or (call.ok and call.name != FIND_TOOLS)
            if call.name == FIND_TOOLS:
                query = call.arguments.get("query") if isinstance(call.arguments, dict) else None
                if isinstance(query, str) and query.strip():
                    searches.append(query.strip())
            elif call.name not in called:
                called.append(call.name)
    return DialogView(question=transcript.question, called=called, searches=searches,
                      answered=answered)


class DialogOffers:
    """The offers of one dialog's steps (module docstring)."""

    def __init__(self, selector: ToolSelector, *, emit: Emit, journal: DialogLog,
                 finder: bool = True) -> None:
        self._selector = selector
        #: whether ``find-tools`` is shown when tools are left out
        self._finder = finder
        self._emit = emit
        self._journal = journal
        self._last: tuple[str, ...] | None = None
        #: the offer of the last step
        self.offer: Offer | None = None

    async def step(self, number: int, available: Offered, toolset: ToolSet,
                   transcript: Transcript) -> tuple[dict[str, Tool], Offered]:
        """The tools step ``number`` shows the model, and those its calls may run (every
        available tool, and ``find-tools`` when it is shown)."""
        catalogue = toolset.catalogue
        catalogue.refresh(toolset.tools.values())
        offer = await self._selector.select(available, catalogue=catalogue,
                                            dialog=dialog_view(transcript))
        finds = self._finder and offer.finder and FIND_TOOLS not in available
        offer = replace(offer, finder=finds)
        self.offer = offer
        shown: dict[str, Tool] = dict(offer.tools)
        runnable = Offered(available, left_out=available.left_out)
        if finds:
            finder = FindTools(available, catalogue)
            shown[FIND_TOOLS] = finder
            runnable[FIND_TOOLS] = finder
        names = tuple(shown)
        if names != self._last:
            self._last = names
            if offer.left_out:
                wire = offer.wire()
                self._journal.offered(number, wire)
                await self._emit(message("offer", offer.describe(),
                                         message_id=new_message_id(), offer=wire))
        return shown, runnable
