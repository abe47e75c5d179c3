"""Request/response over the bus: correlation by the ``id`` property, streaming, deadlines.

One :class:`RequestClient` holds one response subscription and a table ``id -> inbox``; a
response is a dict lookup away from the caller that waits for it. The subscription is
*inline* (:meth:`~toolmesh.bus.base.Bus.subscribe`): handling a response only decodes it and
resolves the caller's future, so on the in-process bus it happens within the service's send,
with no task per response. Responses whose id is not in the table (another client's, or a
call that already timed out or was cancelled) are dropped.

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
import collections
import itertools
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
        # id -> the inbox a waiting call reads its responses from
        self._waiting: dict[str, _Inbox] = {}
        # request ids: unique without a uuid4 per call (which reads os.urandom each time)
        self._id_prefix = f"{uuid.uuid4().hex}-"
        self._ids = itertools.count(1)
        # the calls' deadlines, on one timer
        self._deadlines = deadline.Deadlines()
        self._producer: Producer | None = None
        self._subscription: Subscription | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # set by stop(): ends the pauses of calls waiting for a consumer
        self._stopped = asyncio.Event()

    async def start(self) -> None:
        """Bind the response queue (before any request can be sent) and open the producer."""
        if self._subscription is not None:
            return
        self._stopped.clear()
        self._subscription = await self.bus.subscribe(
            self.response_queue, self._on_response,
            subscription=self._subscription_name, concurrency=DEFAULT_CONCURRENCY, inline=True)
        self._producer = await self.bus.producer(self.request_queue)
        self._loop = asyncio.get_running_loop()

    async def stop(self) -> None:
        """Stop receiving; calls still waiting end with a timeout-free :class:`RequestError`."""
        sub, self._subscription = self._subscription, None
        self._stopped.set()
        if sub is not None:
            await sub.close()
        self._deadlines.close()
        for inbox in self._waiting.values():
            inbox.put({"error": {"type": "client-closed",
                                 "message": "the request client was stopped"}})

    async def __aenter__(self) -> RequestClient:
        await self.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    def _on_response(self, message: Message) -> None:
        inbox = self._waiting.get(message.id or "")
        if inbox is None:
            log.debug("dropped a response on %s with unknown id %r", self.response_queue, message.id)
            return
        try:
            body = message.json()
            if not isinstance(body, dict):
                raise MalformedMessage(f"response is a JSON {type(body).__name__}, not an object")
        except MalformedMessage as e:
            body = {"error": {"type": e.type, "message": e.message}}
        inbox.put(body)

    async def request(self, body: Mapping[str, Any], *, timeout: float | None = DEFAULT_TIMEOUT,
                      properties: Mapping[str, str] | None = None,
                      request_id: str | None = None) -> dict[str, Any]:
        """Send one request and return its first response; raise :class:`RequestError`.

        ``request_id``: the ``id`` to send instead of a new one — to retry a request as the
        same request, which a service that is idempotent by id (config) applies once.
        """
        request_id, inbox, timeout = await self._send(body, timeout, properties, request_id)
        try:
            response = inbox.next()
            return self._checked(await inbox.wait() if response is None else response, timeout)
        finally:
            self._forget(request_id, inbox)

    async def collect(self, body: Mapping[str, Any], *,
                      timeout: float | None = DEFAULT_TIMEOUT,
                      properties: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        """Send one request and return all its responses, up to and including the final one:
        :meth:`stream` gathered, for callers that want the whole answer (no async generator
        to step through per response)."""
        request_id, inbox, timeout = await self._send(body, timeout, properties)
        try:
            # the first response by hand: a coroutine less for the usual call, one response
            response = inbox.next()
            responses = [
                self._checked(await inbox.wait() if response is None else response, timeout)]
            while not self._is_final(responses[-1]):
                responses.append(await self._receive(inbox, timeout))
            return responses
        finally:
            self._forget(request_id, inbox)

    async def stream(self, body: Mapping[str, Any], *, timeout: float | None = DEFAULT_TIMEOUT,
                     properties: Mapping[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        """Send one request and yield its responses up to and including the final one.

        ``timeout`` bounds the whole stream, measured from when the request was sent.
        """
        request_id, inbox, timeout = await self._send(body, timeout, properties)
        try:
            while True:
                response = await self._receive(inbox, timeout)
                yield response
                if self._is_final(response):
                    return
        finally:
            self._forget(request_id, inbox)

    def _forget(self, request_id: str, inbox: _Inbox) -> None:
        # from now on a response with this id is dropped as unknown
        del self._waiting[request_id]
        if inbox.deadline is not None:
            self._deadlines.discard(inbox.deadline)

    async def _send(self, body: Mapping[str, Any], timeout: float | None,
                    properties: Mapping[str, str] | None, request_id: str | None = None,
                    ) -> tuple[str, _Inbox, float | None]:
        producer = self._producer
        if producer is None or self._subscription is None:
            raise RequestError("the request client is not started; use 'async with' or start()",
                               type="client-closed")
        timeout = deadline.bounded(timeout)
        if timeout is not None and timeout <= 0:
            raise RequestTimeout(f"no time left to call {self.request_queue}: the request "
                                 "being answered is already past its deadline")
        if request_id is None:
            request_id = f"{self._id_prefix}{next(self._ids)}"
        elif request_id in self._waiting:
            # two calls waiting on one id would steal each other's responses
            raise RequestError(f"a call with request id {request_id!r} is still waiting",
                               type="duplicate-request-id")
        loop = self._loop
        assert loop is not None  # set with the producer
        inbox = self._waiting[request_id] = _Inbox(loop)
        sent = {"id": request_id} if properties is None else {**properties, "id": request_id}
        tracing.inject(sent)  # the request's handling continues the current span's trace
        # The deadline bounds the whole call: waiting for a consumer and for the answers.
        due = None
        if timeout is not None:
            due = loop.time() + timeout
            inbox.deadline = self._deadlines.add(due, inbox.expire)
            sent[deadline.PROPERTY] = deadline.as_property(timeout)
        try:
            try:  # nearly always the only attempt
                await producer.send(body, properties=sent, mandatory=True)
            except NoConsumer:
                await self._send_when_consumed(body, sent, due, timeout)
        except BaseException:
            self._forget(request_id, inbox)
            raise
        return request_id, inbox, timeout

    async def _send_when_consumed(self, body: Mapping[str, Any], properties: dict[str, str],
                                  due: float | None, timeout: float | None) -> None:
        """The request was refused for want of a consumer: fail, or send it again once one
        appears (see the module docstring)."""
        if self._when_no_consumer == "fail":
            raise RequestError(f"nothing is consuming {self.request_queue}: {self.hint}",
                               type="service-unavailable") from None
        assert self._producer is not None
        loop = asyncio.get_running_loop()
        for pause in backoff.pauses():
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
            if due is not None:
                properties[deadline.PROPERTY] = deadline.as_property(due - loop.time())
            try:
                await self._producer.send(body, properties=properties, mandatory=True)
                return
            except NoConsumer:
                pass  # "fail" raised at the first attempt

    async def _receive(self, inbox: _Inbox, timeout: float | None) -> dict[str, Any]:
        response = inbox.next()
        return self._checked(await inbox.wait() if response is None else response, timeout)

    def _checked(self, response: dict[str, Any] | None, timeout: float | None,
                 ) -> dict[str, Any]:
        """``response``, or the error it carries raised; ``None`` (the deadline passed):
        :class:`RequestTimeout`."""
        if response is None:
            raise RequestTimeout(f"no response from {self.request_queue} within "
                                 f"{timeout:.3g} s: {self.hint}")
        error = self._error_of(response)
        if error is not None:
            raise error
        return response

    @property
    def in_flight(self) -> int:
        """How many calls are waiting for responses."""
        return len(self._waiting)


class _Inbox:
    """The responses of one call, in the order they came.

    Lighter than an :class:`asyncio.Queue`: a future only while the call waits. The call's
    deadline (on the client's :class:`~toolmesh.rpc.deadline.Deadlines`) ends the wait with
    :meth:`expire`, once for the whole call, not once per response.
    """

    __slots__ = ("_expired", "_loop", "_responses", "_waiter", "deadline")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        # made when a response comes with nobody waiting (most calls wait before it comes)
        self._responses: collections.deque[dict[str, Any]] | None = None
        self._waiter: asyncio.Future[dict[str, Any] | None] | None = None
        self._expired = False
        #: the key of the call's deadline, if it has one
        self.deadline: int | None = None

    def put(self, response: dict[str, Any]) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(response)
        elif self._responses is None:
            self._responses = collections.deque((response,))
        else:
            self._responses.append(response)

    def next(self) -> dict[str, Any] | None:
        """The next response if one came, else ``None`` (then :meth:`wait`).

        Responses that came before the deadline are handed out even after it, as a timeout
        around a queue's ``get`` that need not wait would."""
        return self._responses.popleft() if self._responses else None

    def wait(self) -> asyncio.Future[dict[str, Any] | None]:
        """A future of the next response, or of ``None`` once the deadline has passed (a
        future, not a coroutine: one layer less to await, once per response)."""
        waiter = self._waiter = self._loop.create_future()
        if self._expired:
            waiter.set_result(None)
        return waiter

    def expire(self) -> None:
        """The deadline has passed: :meth:`get` hands out what came, then ``None``."""
        self._expired = True
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


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
