"""One call in flight that a server may ask about during the call (elicitation, sign-in).

Plain data, apart from the MCP SDK: the mcp-tool service makes one for every call before any
session exists, and must load without the SDK (:mod:`toolmesh.mcp.elicitation`, which answers
the server's questions through the SDK, re-exports it).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(kw_only=True)
class Asking:
    """One call in flight that may be asked about: where its questions go."""

    #: the call's idempotency key (``DIALOG/STEP/CALL``); ``None``: not a dialog's call
    key: str | None
    workspace: str
    #: sends a non-final response to the caller; ``None``: the caller does not stream
    send: Send | None
    #: seconds the call may still take at most
    left: Callable[[], float]
    #: a person is asked: the call may take its longest
    hold: Callable[[], contextlib.AbstractContextManager[None]]
    _numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1))
