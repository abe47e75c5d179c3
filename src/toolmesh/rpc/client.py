"""Request/response over the bus: correlation by the ``id`` property, streaming, deadlines.

One :class:`RequestClient` holds one response subscription and a table ``id -> waiter``; a
response is a dict lookup away from the caller that waits for it. Responses whose id is not in
the table (another client's, or a call that already timed out) are dropped.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import Any, Self

from toolmesh.bus.base import DEFAULT_CONCURRENCY, Bus, Message, Producer, Subscription
from toolmesh.bus.queue_id import parse_queue_id
from toolmesh.errors import MalformedMessage, RequestError, RequestTimeout

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
    ) -> None:
        self.bus = bus
        self.request_queue = parse_queue_id(request_queue)
        self.response_queue = parse_queue_id(response_queue)
        self._subscription_name = subscription or f"client-{uuid.uuid4().hex[:8]}"
        self._is_final = is_final
        self._error_of = error_of
        # id -> the queue a waiting call reads its responses from
        self._waiting: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        self._producer: Producer | None = None
        self._subscription: Subscription | None = None

    async def start(self) -> None:
        """Bind the response queue (before any request can be sent) and open the producer."""
        if self._subscription is not None:
            return
        self._subscription = await self.bus.subscribe(
            self.response_queue, self._on_response,
            subscription=self._subscription_name, concurrency=DEFAULT_CONCURRENCY)
        self._producer = await self.bus.producer(self.request_queue)

    async def stop(self) -> None:
        """Stop receiving; calls still waiting end with a timeout-free :class:`RequestError`."""
        sub, self._subscription = self._subscription, None
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
        request_id, inbox, deadline = await self._send(body, timeout, properties, request_id)
        try:
            return await self._receive(inbox, deadline, timeout)
        finally:
            del self._waiting[request_id]

    async def stream(self, body: Mapping[str, Any], *, timeout: float | None = DEFAULT_TIMEOUT,
                     properties: Mapping[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        """Send one request and yield its responses up to and including the final one.

        ``timeout`` bounds the whole stream, measured from when the request was sent.
        """
        request_id, inbox, deadline = await self._send(body, timeout, properties)
        try:
            while True:
                response = await self._receive(inbox, deadline, timeout)
                yield response
                if self._is_final(response):
                    return
        finally:
            del self._waiting[request_id]

    async def _send(self, body: Mapping[str, Any], timeout: float | None,
                    properties: Mapping[str, str] | None, request_id: str | None = None,
                    ) -> tuple[str, asyncio.Queue[dict[str, Any]], float | None]:
        if self._producer is None or self._subscription is None:
            raise RequestError("the request client is not started; use 'async with' or start()",
                               type="client-closed")
        if request_id is None:
            request_id = str(uuid.uuid4())
        elif request_id in self._waiting:
            # two calls waiting on one id would steal each other's responses
            raise RequestError(f"a call with request id {request_id!r} is still waiting",
                               type="duplicate-request-id")
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._waiting[request_id] = inbox
        try:
            await self._producer.send(body, properties={**(properties or {}), "id": request_id})
        except BaseException:
            del self._waiting[request_id]
            raise
        # The deadline starts once the request is out: it bounds the wait, not the send.
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        return request_id, inbox, deadline

    async def _receive(self, inbox: asyncio.Queue[dict[str, Any]], deadline: float | None,
                       timeout: float | None) -> dict[str, Any]:
        try:
            async with asyncio.timeout_at(deadline):
                response = await inbox.get()
        except TimeoutError:
            raise RequestTimeout(
                f"no response from {self.request_queue} within {timeout:g} s") from None
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
