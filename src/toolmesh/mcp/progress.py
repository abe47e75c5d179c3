"""Progress of an MCP tool call: the ``progressToken``, a deadline that progress pushes back,
and the progress responses of the mcp-tool service.

Every call is sent with a progress callback, so the SDK puts a ``progressToken`` in the
request's ``_meta``. Each ``notifications/progress`` the server sends for it moves the call's
deadline to ``timeout`` seconds after that notification — never past ``max_timeout`` seconds
after the call began — and is handed to the call's ``sink``. A server that keeps reporting
may run long; one that goes quiet is cancelled ``timeout`` seconds after its last sign of life.

On the bus (see :mod:`toolmesh.mcp.service`), a request with ``"progress": true`` gets one
response per notification before its final one::

    {"error": null, "text": null, "object": null, "end_of_stream": false,
     "progress": {"progress": 3, "total": 10, "message": "indexing"}}

The final response keeps TrustGraph's shape (no ``end_of_stream``: a response without it is
final). Without ``"progress": true`` nothing but the final response is sent — TrustGraph's
clients take the first response as the answer — though the deadline still moves.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolmesh.errors import RequestTimeout, ServiceError
from toolmesh.mcp.errors import McpError
from toolmesh.rpc import deadline

if TYPE_CHECKING:
    import mcp_types
    from mcp import ClientSession

    from toolmesh.mcp.config import McpServer
    from toolmesh.rpc.client import RequestClient

#: the longest a call that keeps reporting progress may run, unless the request says less
DEFAULT_MAX_TIMEOUT = 600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """One ``notifications/progress``: how far, out of how much (if known), and what now."""

    progress: float
    total: float | None = None
    message: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"progress": self.progress, "total": self.total, "message": self.message}

    @classmethod
    def from_wire(cls, raw: Any) -> Progress | None:
        """The update a progress response carries, or ``None`` if it carries none we can read."""
        if not isinstance(raw, Mapping):
            return None
        progress, total, message = raw.get("progress"), raw.get("total"), raw.get("message")
        if not _number(progress):
            return None
        return cls(progress=float(progress), total=float(total) if _number(total) else None,
                   message=message if isinstance(message, str) else None)

    def describe(self) -> str:
        """Short, for a person watching: ``3/10 indexing``."""
        amount = f"{self.progress:g}" + (f"/{self.total:g}" if self.total is not None else "")
        return f"{amount} {self.message}" if self.message else amount


ProgressSink = Callable[[Progress], Awaitable[None]]
#: takes a question of the server for the person (:mod:`toolmesh.mcp.elicitation`)
QuestionSink = Callable[[dict[str, Any]], Awaitable[None]]


def _number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


class CallProgress:
    """The deadline of one MCP tool call, pushed back by the server's progress.

    Create it when the call's clock starts (the time to connect counts against ``timeout``);
    :meth:`call` sends the request. ``max_timeout`` bounds everything, ``timeout`` included.
    """

    def __init__(self, *, timeout: float, max_timeout: float,
                 sink: ProgressSink | None = None) -> None:
        now = _now()
        self.timeout = timeout
        self.max_timeout = max_timeout
        self.sink = sink
        self.updates = 0
        self.due = now + min(timeout, max_timeout)
        self._start = now
        self._limit = now + self.max_timeout
        self._scope: asyncio.Timeout | None = None
        self._relaying = 0
        self._relayed = asyncio.Event()
        self._relayed.set()

    async def on_progress(self, progress: float, total: float | None,
                          message: str | None) -> None:
        """The SDK's progress callback for this call."""
        # Counted before the first await: the SDK starts this callback (a task it spawns when
        # the notification is read) before the call's own task sees the result read after
        # it, so settled() cannot miss an update that came before the result.
        self._relaying += 1
        self._relayed.clear()
        try:
            self.updates += 1
            self.due = min(_now() + self.timeout, self._limit)
            if self._scope is not None and not self._scope.expired():
                self._scope.reschedule(self.due)
            if self.sink is not None:
                await self.sink(Progress(progress=progress, total=total, message=message))
        finally:
            self._relaying -= 1
            if not self._relaying:
                self._relayed.set()

    def left(self) -> float:
        """Seconds the call may still take at most."""
        return max(self._limit - _now(), 0.0)

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """While a person is asked (:mod:`toolmesh.mcp.elicitation`), the call may take its
        longest; then ``timeout`` more from the answer, as after a progress report."""
        if self._scope is not None and not self._scope.expired():
            self._scope.reschedule(self._limit)
        try:
            yield
        finally:
            self.due = min(_now() + self.timeout, self._limit)
            if self._scope is not None and not self._scope.expired():
                self._scope.reschedule(self.due)

    async def settled(self) -> None:
        """Wait until every update received so far has been handed to the sink (so a
        progress response never trails the final one)."""
        await self._relayed.wait()

    async def call(self, session: ClientSession, server: McpServer, arguments: dict[str, Any],
                   *, cap: float, meta: dict[str, Any] | None = None,
                   ) -> mcp_types.CallToolResult:
        """Call ``server.remote_name`` under this deadline.

        ``cap`` is the SDK's own timeout, the hard limit of the caller (the session pool);
        this deadline, which progress moves, is kept by a timeout scope around the request.
        Either way the SDK tells the server to cancel (on our scope: its caller-cancelled path).
        """
        try:
            async with asyncio.timeout_at(self.due) as scope:
                self._scope = scope
                try:
                    # here, not at the top: this module is read by the agent and the CLI,
                    # which must not load the MCP SDK; a call has it loaded already
                    from toolmesh.mcp.elicitation import call_answering

                    return await call_answering(session, server.remote_name, arguments,
                                                read_timeout_seconds=cap,
                                                progress_callback=self.on_progress,
                                                meta=meta)
                finally:
                    self._scope = None
        except TimeoutError:
            if not scope.expired():
                raise
            # without progress, the same words as any other timeout of the session pool
            if self.updates and self.due >= self._limit:
                when = (f"{self.max_timeout:.3g} s, the most it may take while reporting "
                        "progress")
            elif self.updates:
                when = (f"{_now() - self._start:.3g} s, {self.timeout:g} s after its last "
                        "progress report")
            else:
                when = f"{min(self.timeout, self.max_timeout):g} s"
            raise McpError(f"MCP server {server.id!r} did not finish tool "
                           f"{server.remote_name!r}: timed out after {when} (the server was "
                           "told to cancel it)") from None


def call_progress(request: Mapping[str, Any], *, timeout: float, default_max: float,
                  reply: Callable[[dict[str, Any]], Awaitable[None]]) -> CallProgress:
    """The :class:`CallProgress` of one mcp-tool request: its ``max-timeout`` (default
    ``default_max``, never past the caller's own deadline) and, with ``"progress": true``,
    a sink that answers each update with a progress response."""
    raw_max = request.get("max-timeout")
    if raw_max is not None and not (_number(raw_max) and raw_max > 0):
        raise ServiceError(f"'max-timeout' must be a positive number of seconds, not "
                           f"{raw_max!r}", type="bad-request")
    wanted = request.get("progress")
    if wanted is not None and not isinstance(wanted, bool):
        raise ServiceError(f"'progress' must be true or false, not {wanted!r}",
                           type="bad-request")
    limit = max(float(raw_max) if raw_max is not None else default_max, timeout)
    # Past the caller's deadline nobody waits for the answer; ending first lets our own
    # error (not the bus's bare timeout) reach it.
    bounded = deadline.bounded(limit)
    if bounded is not None:
        limit = max(bounded, 0.001)

    async def relay(update: Progress) -> None:
        await reply(progress_response(update))

    return CallProgress(timeout=timeout, max_timeout=limit, sink=relay if wanted else None)


def progress_response(update: Progress) -> dict[str, Any]:
    return {"error": None, "text": None, "object": None, "progress": update.to_wire(),
            "end_of_stream": False}


async def stream_call(rpc: RequestClient, body: dict[str, Any], *, timeout: float,
                      max_timeout: float, margin: float, on_progress: ProgressSink,
                      on_question: QuestionSink | None = None) -> dict[str, Any]:
    """Send an mcp-tool request with ``"progress": true``; hand each progress response to
    ``on_progress`` and return the final one.

    The stream as a whole may take ``max_timeout``; between two responses at most ``timeout``
    (each plus ``margin``, so the service's own timeout error comes first): a service that
    died is noticed as soon as it would have timed the call out. After a question for the
    person (``elicitation``, handed to ``on_question``), the next response may take what is
    left of ``max_timeout``: the service waits for the answer.
    """
    body = {**body, "timeout": timeout, "max-timeout": max_timeout, "progress": True}
    if on_question is None:
        # nobody to ask: the service refuses the server's questions (and a sign-in) at once
        # instead of waiting for an answer that cannot come
        body["questions"] = False
    responses: AsyncIterator[dict[str, Any]] = rpc.stream(body, timeout=max_timeout + margin)
    limit = _now() + max_timeout + margin
    asked = False
    try:
        while True:
            try:
                async with asyncio.timeout_at(limit if asked else _now() + timeout + margin):
                    answer = await anext(responses)
            except TimeoutError:
                raise RequestTimeout(f"no response from {rpc.request_queue} within "
                                     f"{timeout + margin:.3g} s: {rpc.hint}") from None
            if answer.get("end_of_stream", True) is not False:
                return answer
            question = answer.get("elicitation")
            asked = isinstance(question, dict)
            if asked:
                if on_question is not None:
                    await on_question(question)
                continue
            update = Progress.from_wire(answer.get("progress"))
            if update is not None:
                await on_progress(update)
    finally:
        await responses.aclose()  # type: ignore[attr-defined]


def _now() -> float:
    return asyncio.get_running_loop().time()
