"""Token usage added up over a piece of work that makes several LLM calls (an agent dialog).

The work opens a meter with :func:`metering`; every client that receives an LLM answer on its
behalf passes the answer's final response to :func:`record`, which adds its ``in_token`` and
``out_token`` to the meter and keeps its ``model``. The meter is a context variable, as the
deadline of :mod:`toolmesh.rpc.deadline` is, so it reaches the clients a dialog's tools use
without being handed down through each; outside a meter :func:`record` does nothing.

Only clients that act for the work itself record (the agent's prompt client): a service that
handles a request on the bus never does, even though the in-memory bus runs its handler in
a copy of the sender's context.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


@dataclass(kw_only=True)
class Usage:
    """Tokens in and out summed over the answers recorded so far, and the last model named.

    A count stays ``None`` until some answer reports it: "not reported" is not zero.
    """

    in_token: int | None = None
    out_token: int | None = None
    model: str | None = None
    #: ``None`` while every count was reported by the LLM's server; ``"counted"`` or
    #: ``"estimated"`` once some were found by toolmesh (:mod:`toolmesh.llm.counting`)
    token_source: str | None = None

    def add(self, *, in_token: Any = None, out_token: Any = None, model: Any = None,
            token_source: Any = None) -> None:
        """Add one answer's counts (ignoring any that is not a non-negative integer)."""
        if _count(in_token):
            self.in_token = (self.in_token or 0) + in_token
        if _count(out_token):
            self.out_token = (self.out_token or 0) + out_token
        if isinstance(model, str) and model:
            self.model = model
        if token_source in _SOURCES and _SOURCES.index(token_source) > _SOURCES.index(
                self.token_source):
            self.token_source = token_source

    def wire(self) -> dict[str, Any]:
        """The fields TrustGraph's messages carry usage in (and toolmesh's ``token_source``
        when some count was not reported)."""
        out: dict[str, Any] = {"in_token": self.in_token, "out_token": self.out_token,
                               "model": self.model}
        if self.token_source not in (None, "reported"):
            out["token_source"] = self.token_source
        return out


#: where counts come from, least certain last: a sum is as certain as its least certain part
_SOURCES: tuple[str | None, ...] = (None, "reported", "counted", "estimated")


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


_meter: ContextVar[Usage | None] = ContextVar("toolmesh_usage", default=None)


@contextlib.contextmanager
def metering() -> Iterator[Usage]:
    """Within this block, :func:`record` adds to the :class:`Usage` it yields."""
    usage = Usage()
    token = _meter.set(usage)
    try:
        yield usage
    finally:
        _meter.reset(token)


def record(response: Mapping[str, Any]) -> None:
    """Add the usage a prompt or text-completion response reports to the current meter.

    Pass every response of a call: pieces of a stream (``end_of_stream: false``) are skipped,
    since the counts ride on the last response.
    """
    usage = _meter.get()
    if usage is None or response.get("end_of_stream") is False:
        return
    usage.add(in_token=response.get("in_token"), out_token=response.get("out_token"),
              model=response.get("model"), token_source=response.get("token_source"))
