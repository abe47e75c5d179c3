"""Request/response over the bus: correlation by the ``id`` property, streaming, deadlines.

One :class:`RequestClient` holds one response subscription and a table ``id -> waiter``; a
response is a dict lookup away from the caller that waits for it. Responses whose id is not in
the table (another client's, or a call that already timed out) are dropped.

Requests are sent *mandatory*: when the bus can tell that nothing consumes the request queue
(see :meth:`~toolmesh.bus.base.Producer.send`), the client either retries with backoff until a
consumer appears or the deadline passes (``when_no_consumer="wait"``, for services calling
services, so parts may start in any order) or fails at once with ``service-unavailable``
(``"fail"``, for the gateway, whose caller is a person or a program that should know now).
Each request carries its timeout, shortened to the deadline of the request being handled, if
any (:mod:`toolmesh.rpc.deadline`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import Any, Literal, Self

from toolmesh.bus.base import DEFAULT_CONCURRENCY, Bus, Message, Producer, Subscription
from toolmesh.bus.queue_id import parse_queue_id
from toolmesh.errors import MalformedMessage, NoConsumer, RequestError, RequestTimeout
from toolmesh.rpc import backoff, deadline
from toolmesh.telemetry import tracing

log = logging.getLogger("toolmesh.rpc")

DEFAULT_TIMEOUT = 600.0



def default_is_final(response: dict[str, Any]) -> bool:
    """A response ends its stream unless it says ``end_of_stream: false``."""
    return response.get("end_of_stream", True) is not False


def default_error(response: dict[str, Any]) -> RequestError | None:
    """The error carried in a response's ``error`` field, if it holds one."""
    error = response.get("error")
    return RequestError.from_wire(error) if error else None


class RequestClient:
    """Sends requests to ``request_queue`` and matches responses from ``response_queue``.

    Use ``async with RequestClient(bus, ...) as client`` or :meth:`start`/:meth:`stop`.
    ``hint`` ends the message of a timeout or an unavailable service: how to check the
    service (for example "is `toolmesh run config` running?").
    """

    def __init__(
        self,
        bus: Bus,
        *,
        request_queue: str,
        response_queue: str,
        subscription: str | None = None,
        is_final: Callable[[dict[str, Any]], bool] = default_is_final,
        error_of: Callable[[dict[str, Any]], RequestError | None] = default_error,
        when_no_consumer: Literal["wait", "fail"] = "wait",
        hint: str | None = None,
    ) -> None:
        self.bus = bus
        self.request_queue = parse_queue_id(request_queue)
        self.response_queue = parse_queue_id(response_queue)
        self._subscription_name = subscription or f"client-{uuid.uuid4().hex[:8]}"
        self._is_final = is_final
        self._error_of = error_of
        self._when_no_consumer = when_no_consumer
        self.hint = hint or f"is a service consuming {self.request_queue} running?"
        # id -> the queue a waiting call reads its responses from
        self._waiting: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        self._producer: Producer | None = None
        self._subscription: Subscription | None = None
        # set by stop(): ends the pauses of calls waiting for a consumer
        self._stopped = asyncio.Event()

    async def start(self) -> None:
        """Bind the response queue (before any request can be sent) and open the producer."""
        if self._subscription is not None:
            return
        self._stopped.clear()
        self._subscription = await self.bus.subscribe(
            self.response_queue, self._on_response,
            subscription=self._subscription_name, concurrency=DEFAULT_CONCURRENCY)
        self._producer = await self.bus.producer(self.request_queue)

    async def stop(self) -> None:
        """Stop receiving; calls still waiting end with a timeout-free :class:`RequestError`."""
        sub, self._subscription = self._subscription, None
        self._stopped.set()
        if sub is not None:
            await sub.close()
        for q in self._waiting.values():
            q.put_nowait({"error": {"type": "client-closed",
                                    "message": "the request client was stopped"}})

    async def __aenter__(self) -> RequestClient:
        await self.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    async def _on_response(self, message: Message) -> None:
        waiter = self._waiting.get(message.id or "")
        if waiter is None:
            log.debug("dropped a response on %s with unknown id %r", self.response_queue, message.id)
            return
        try:
            body = message.json()
            if not isinstance(body, dict):
                raise MalformedMessage(f"response is a JSON {type(body).__name__}, not an object")
        except MalformedMessage as e:
            body = {"error": {"type": e.type, "message": e.message}}
        waiter.put_nowait(body)

    async def request(self, body: Mapping[str, Any], *, timeout: float | None = DEFAULT_TIMEOUT,
                      properties: Mapping[str, str] | None = None,
                      request_id: str | None = None) -> dict[str, Any]:
        """Send one request and return its first response; raise :class:`RequestError`.

        ``request_id``: the ``id`` to send instead of a new one — to retry a request as the
        same request, which a service that is idempotent by id (config) applies once.
        """
        request_id, inbox, due, timeout = await self._send(body, timeout, properties, request_id)
        try:
            return await self._receive(inbox, due, timeout)
        finally:
            del self._waiting[request_id]

    async def stream(self, body: Mapping[str, Any], *, timeout: float | None = DEFAULT_TIMEOUT,
                     properties: Mapping[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        """Send one request and yield its responses up to and including the final one.

        ``timeout`` bounds the whole stream, measured from when the request was sent.
        """
        request_id, inbox, due, timeout = await self._send(body, timeout, properties)
        try:
            while True:
                response = await self._receive(inbox, due, timeout)
                yield response
                if self._is_final(response):
                    return
        finally:
            del self._waiting[request_id]

    async def _send(self, body: Mapping[str, Any], timeout: float | None,
                    properties: Mapping[str, str] | None, request_id: str | None = None,
                    ) -> tuple[str, asyncio.Queue[dict[str, Any]], float | None, float | None]:
        if self._producer is None or self._subscription is None:
            raise RequestError("the request client is not started; use 'async with' or start()",
                               type="client-closed")
        timeout = deadline.bounded(timeout)
        if timeout is not None and timeout <= 0:
            raise RequestTimeout(f"no time left to call {self.request_queue}: the request "
                                 "being answered is already past its deadline")
        if request_id is None:
            request_id = str(uuid.uuid4())
        elif request_id in self._waiting:
            # two calls waiting on one id would steal each other's responses
            raise RequestError(f"a call with request id {request_id!r} is still waiting",
                               type="duplicate-request-id")
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._waiting[request_id] = inbox
        loop = asyncio.get_running_loop()
        # The deadline bounds the whole call: waiting for a consumer and for the answers.
        due = None if timeout is None else loop.time() + timeout
        sent = {**(properties or {}), "id": request_id}
        tracing.inject(sent)  # the request's handling continues the current span's trace
        try:
            await self._send_mandatory(body, sent, due, timeout)
        except BaseException:
            del self._waiting[request_id]
            raise
        return request_id, inbox, due, timeout

    async def _send_mandatory(self, body: Mapping[str, Any], properties: dict[str, str],
                              due: float | None, timeout: float | None) -> None:
        assert self._producer is not None
        loop = asyncio.get_running_loop()
        for pause in backoff.pauses():
            if due is not None:
                properties[deadline.PROPERTY] = f"{max(due - loop.time(), 0.001):.3f}"
            try:
                await self._producer.send(body, properties=properties, mandatory=True)
                return
            except NoConsumer:
                if self._when_no_consumer == "fail":
                    raise RequestError(f"nothing is consuming {self.request_queue}: "
                                       f"{self.hint}", type="service-unavailable") from None
            # Not a poll of local state: the broker is the only one who knows when a consumer
            # arrives, and a returned publish is the only way to ask it.
            left = None if due is None else due - loop.time()
            wait = pause if left is None else max(min(pause, left), 0)
            try:
                await asyncio.wait_for(self._stopped.wait(), wait)
            except TimeoutError:
                pass
            else:
                raise RequestError("the request client was stopped", type="client-closed")
            if left is not None and left <= pause:
                raise RequestTimeout(f"nothing consumed {self.request_queue} within "
                                     f"{timeout:.3g} s: {self.hint}")

    async def _receive(self, inbox: asyncio.Queue[dict[str, Any]], due: float | None,
                       timeout: float | None) -> dict[str, Any]:
        try:
            async with asyncio.timeout_at(due):
                response = await inbox.get()
        except TimeoutError:
            raise RequestTimeout(f"no response from {self.request_queue} within "
                                 f"{timeout:.3g} s: {self.hint}") from None
        error = self._error_of(response)
        if error is not None:
            raise error
        return response

    @property
    def in_flight(self) -> int:
        """How many calls are waiting for responses."""
        return len(self._waiting)


class RpcClient:
    """Base of the typed clients built on one :class:`RequestClient` (``self._rpc``): gives
    them ``start``/``stop`` and ``async with``."""

    _rpc: RequestClient

    async def start(self) -> None:
        await self._rpc.start()

    async def stop(self) -> None:
        await self._rpc.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()
