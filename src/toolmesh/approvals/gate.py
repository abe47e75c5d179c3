"""Where a paused call waits for its answer, in the agent process that runs the dialog.

A dialog that asks a person (:mod:`toolmesh.agent.approving`) waits on a future here, keyed by
its dialog and call. Whichever agent replica takes the answer (the ``approvals`` service)
records it in the journal and announces it on a notify queue every replica hears; the replica
that holds the call resolves its future. On the memory bus that is the same process; on a
broker, any replica may take the answer of any dialog.

The same queue carries ``{"asked": REQUEST}`` when a call begins to wait: the approvals
services of every replica hear both, for the people who watch what waits
(:meth:`ApprovalGate.listen`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from toolmesh.bus.base import Bus, Message, Producer, Subscription
from toolmesh.errors import MalformedMessage, ToolmeshError

log = logging.getLogger("toolmesh.approvals")

APPROVALS_NOTIFY_QUEUE = "notify:tg:approvals:default"
#: the notice of a request that begins to wait: ``{ASKED: REQUEST}``
ASKED = "asked"
#: hears every notice: an answer, or ``{ASKED: REQUEST}``
Listener = Callable[[dict[str, Any]], None]


class ApprovalGate:
    """The calls of this process that wait for a person, and the notices that answer them."""

    def __init__(self, bus: Bus, *, notify_queue: str = APPROVALS_NOTIFY_QUEUE) -> None:
        self._bus = bus
        self._queue = notify_queue
        #: (dialog, call) -> the request shown to the user, and the future its answer sets
        self._waiting: dict[tuple[str, str], tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]] = {}
        self._subscription: Subscription | None = None
        self._producer: Producer | None = None
        self._listeners: list[Listener] = []

    async def start(self) -> None:
        self._producer = await self._bus.producer(self._queue)
        # a name of our own: a notify queue gives each subscription every notice
        self._subscription = await self._bus.subscribe(
            self._queue, self._on_notice, subscription=f"approvals-{uuid.uuid4().hex[:8]}",
            concurrency=1)

    async def stop(self) -> None:
        if self._subscription is not None:
            await self._subscription.close()
            self._subscription = None
        for _, future in self._waiting.values():
            future.cancel()

    def expect(self, request: Mapping[str, Any]) -> asyncio.Future[dict[str, Any]]:
        """The future the answer to ``request`` (``dialog``, ``call``, ...) will set."""
        key = (str(request["dialog"]), str(request["call"]))
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[key] = (dict(request), future)
        return future

    def forget(self, dialog: str, call: str) -> None:
        """Stop waiting for the answer to ``call`` of ``dialog``."""
        entry = self._waiting.pop((dialog, call), None)
        if entry is not None and not entry[1].done():
            entry[1].cancel()

    def held(self, dialog: str, call: str) -> dict[str, Any] | None:
        """The request of ``call`` of ``dialog`` when this process waits for its answer."""
        entry = self._waiting.get((dialog, call))
        return entry[0] if entry is not None else None

    def waiting(self, workspace: str) -> list[dict[str, Any]]:
        """The requests of ``workspace`` this process waits on, oldest first."""
        return [request for request, _ in self._waiting.values()
                if request.get("workspace") == workspace]

    def resolve(self, answer: Mapping[str, Any]) -> bool:
        """Hand ``answer`` to the call it answers, if this process waits for it."""
        entry = self._waiting.get((str(answer.get("dialog")), str(answer.get("call"))))
        if entry is None or entry[1].done():
            return False
        request, future = entry
        if answer.get("digest") != request.get("digest"):
            log.warning("an answer to call %s was for another digest; ignored", answer.get("call"))
            return False
        future.set_result(dict(answer))
        return True

    async def announce(self, answer: Mapping[str, Any]) -> None:
        """Tell every replica (this one too) the answer to a call."""
        if self._producer is None:
            raise ToolmeshError("the approval gate is not started")
        await self._producer.send(dict(answer))

    async def announce_asked(self, request: Mapping[str, Any]) -> None:
        """Tell every replica that ``request`` waits for a person (for those who watch)."""
        if self._producer is not None:
            await self._producer.send({ASKED: dict(request)})

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Have ``listener`` hear every notice from now on; returns the call that stops it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners \
            else None

    async def _on_notice(self, message: Message) -> None:
        try:
            notice = message.json()
        except MalformedMessage as e:
            log.warning("ignored a malformed approval notice: %s", e.message)
            return
        asked = notice.get(ASKED) if isinstance(notice, dict) else None
        if isinstance(asked, dict):
            if isinstance(asked.get("dialog"), str) and isinstance(asked.get("call"), str):
                self._tell(notice)
            return
        if not isinstance(notice, dict) or not isinstance(notice.get("dialog"), str) \
                or not isinstance(notice.get("call"), str):
            log.warning("ignored an approval notice without a dialog and a call: %r", notice)
            return
        self.resolve(notice)
        self._tell(notice)

    def _tell(self, notice: dict[str, Any]) -> None:
        for listener in list(self._listeners):
            try:
                listener(notice)
            except Exception:  # one listener's fault must not keep the notice from others
                log.exception("an approvals listener failed on a notice")
