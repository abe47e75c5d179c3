"""The server side of request/response: consume a request queue, answer on a response queue.

A :class:`Service` subclass implements :meth:`Service.handle`, which may answer any number
of times through ``reply``; every answer carries the request's ``id``. Requests are handled
concurrently (up to ``concurrency`` at once). Nothing a request contains can stop the service:
a body that is not a JSON object gets an error response (when it has an id, otherwise it is
logged), and an exception in ``handle`` becomes an error response.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from toolmesh.bus.base import DEFAULT_CONCURRENCY, Bus, Message, Producer, Subscription
from toolmesh.bus.queue_id import parse_queue_id
from toolmesh.errors import MalformedMessage, ToolmeshError

log = logging.getLogger("toolmesh.service")

Reply = Callable[[dict[str, Any]], Awaitable[None]]


class Service(ABC):
    """Base of every request/response service on the bus."""

    #: the error type sent when ``handle`` raises something that is not a ToolmeshError
    error_type: str = "service-error"

    def __init__(
        self,
        bus: Bus,
        *,
        request_queue: str,
        response_queue: str,
        subscription: str,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        self.bus = bus
        self.request_queue = parse_queue_id(request_queue)
        self.response_queue = parse_queue_id(response_queue)
        self.subscription = subscription
        self.concurrency = concurrency
        self._producer: Producer | None = None
        self._subscription: Subscription | None = None

    @abstractmethod
    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        """Answer one request (a JSON object) by awaiting ``reply(response)`` one or more times."""

    def error_response(self, error: dict[str, str]) -> dict[str, Any]:
        """The response that carries ``error`` (``{"type", "message"}``) for this service."""
        return {"error": error}

    async def start(self) -> None:
        """Open the response producer, then start consuming requests."""
        if self._subscription is not None:
            return
        self._producer = await self.bus.producer(self.response_queue)
        self._subscription = await self.bus.subscribe(
            self.request_queue, self._on_request,
            subscription=self.subscription, concurrency=self.concurrency)
        log.info("%s serving %s -> %s", type(self).__name__, self.request_queue, self.response_queue)

    async def stop(self) -> None:
        """Stop consuming; requests being handled are finished first."""
        sub, self._subscription = self._subscription, None
        if sub is not None:
            await sub.close()

    async def __aenter__(self) -> Service:
        await self.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    async def _on_request(self, message: Message) -> None:
        producer = self._producer
        assert producer is not None
        request_id = message.id
        properties = {"id": request_id} if request_id is not None else {}

        async def reply(response: dict[str, Any]) -> None:
            await producer.send(response, properties=properties)

        try:
            request = message.json()
            if not isinstance(request, dict):
                raise MalformedMessage(
                    f"request must be a JSON object, not a JSON {type(request).__name__}")
        except MalformedMessage as e:
            if request_id is None:
                log.warning("dropped a malformed request without id on %s: %s",
                            self.request_queue, e.message)
                return
            await reply(self.error_response({"type": "malformed-request", "message": e.message}))
            return

        try:
            await self.handle(request, reply)
        except ToolmeshError as e:
            log.info("request %s on %s failed: %s: %s", request_id, self.request_queue,
                     e.type, e.message)
            await reply(self.error_response(e.to_wire()))
        except Exception as e:
            log.warning("request %s on %s raised %s", request_id, self.request_queue,
                        type(e).__name__, exc_info=True)
            await reply(self.error_response({"type": self.error_type,
                                             "message": str(e) or type(e).__name__}))
