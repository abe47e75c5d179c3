"""The server side of request/response: consume a request queue, answer on a response queue.

A :class:`Service` subclass implements :meth:`Service.handle`, which may answer any number
of times through ``reply``; every answer carries the request's ``id``. Requests are handled
concurrently (up to ``concurrency`` at once). Nothing a request contains can stop the service:
a body that is not a JSON object gets an error response (when it has an id, otherwise it is
logged), and an exception in ``handle`` becomes an error response (``KeyError: 'text'``: its
type and text, :meth:`Service.describe_failure`; the traceback goes to the log).

Deadlines: a request that says how long its caller waits (:mod:`toolmesh.rpc.deadline`) is
handled under that deadline — calls made for it end sooner, and a handler still running when
it passes is cancelled with a ``timeout`` error response (nobody waits for its answer).

Redelivery is bounded: a request the bus has delivered more than ``max_deliveries`` times
(each time its handling was cut short: the connection to the broker lost, the service
killed) is answered with a ``too-many-deliveries`` error instead of being handled again
(:func:`toolmesh.bus.delivery.deliveries`).

Stopping drains: no new requests are taken, those in hand get ``drain_timeout`` seconds to
finish, then are cancelled with a ``service-stopping`` error response, so callers hear at once
instead of waiting out their deadlines, and the process exits in bounded time. A request that
waits only for a person (:mod:`toolmesh.rpc.parking`: a dialog whose call awaits approval,
kept in its journal) is not drained: it is cancelled at once, the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import types
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from types import TracebackType
from typing import Any

import toolmesh.coroutines as coroutines
from toolmesh.bus import delivery
from toolmesh.bus.base import DEFAULT_CONCURRENCY, Bus, Message, Producer, Subscription
from toolmesh.bus.queue_id import parse_queue_id
from toolmesh.errors import MalformedMessage, ToolmeshError
from toolmesh.rpc import deadline
from toolmesh.rpc.parking import Parked
from toolmesh.telemetry import metrics, processors, tracing

#: seconds the requests in hand get to finish when a service stops
DEFAULT_DRAIN_TIMEOUT = 10.0
#: the deliveries of one request a service handles at most (0: no limit)
DEFAULT_MAX_DELIVERIES = 5

log = logging.getLogger("toolmesh.service")

Reply = Callable[[dict[str, Any]], Awaitable[None]]

#: the span of a request when tracing is off
_NO_SPAN: contextlib.nullcontext[None] = contextlib.nullcontext()

#: the ``id`` of the request being handled (what a broker delivering it again keeps)
_request_id: ContextVar[str | None] = ContextVar("toolmesh_request_id", default=None)


def current_request_id() -> str | None:
    """The ``id`` of the request the calling handler is answering, if it has one: the same
    on every delivery of the request, so a handler can tell a redelivery (the agent's
    dialog journal does)."""
    return _request_id.get()


async def _awaited(awaitable: Awaitable[Any]) -> None:
    """``awaitable`` awaited (what a ``handle`` that is not an ``async def`` returned)."""
    await awaitable


class _Expiry:
    """The caller's deadline of one request whose handling waits: the task handling it is
    cancelled when it passes — what ``asyncio.timeout`` does, with the timer shared by
    every request in hand (see :class:`~toolmesh.rpc.deadline.Deadlines`)."""

    __slots__ = ("_cancelling", "_deadlines", "_expired", "_key", "_task")

    def __init__(self, task: asyncio.Task[Any], deadlines: deadline.Deadlines,
                 due: float) -> None:
        self._task = task
        self._deadlines = deadlines
        # cancellations asked of the task before: those are not the deadline's
        self._cancelling = task.cancelling()
        self._expired = False
        self._key = deadlines.add(due, self._expire)

    def _expire(self) -> None:
        self._expired = True
        self._task.cancel()

    def passed(self) -> bool:
        """Whether the deadline passed and its cancellation is the only one asked since the
        handling began (then the CancelledError the handler raised is the deadline's, and
        is taken back; else it is someone else's too, and goes on)."""
        if not self._expired:
            return False
        self._expired = False
        return self._task.uncancel() <= self._cancelling

    def end(self) -> None:
        """The handling is over: the deadline no longer matters, and a cancellation it
        asked for and the handler swallowed is taken back."""
        self._deadlines.discard(self._key)
        if self._expired:
            self._expired = False
            self._task.uncancel()


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
        drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
        max_deliveries: int = DEFAULT_MAX_DELIVERIES,
    ) -> None:
        self.bus = bus
        self.drain_timeout = drain_timeout
        #: a request delivered more often than this is refused, not handled (0: no limit)
        self.max_deliveries = max_deliveries
        self.request_queue = parse_queue_id(request_queue)
        self.response_queue = parse_queue_id(response_queue)
        self.subscription = subscription
        self.concurrency = concurrency
        self._producer: Producer | None = None
        self._subscription: Subscription | None = None
        self._handling: set[asyncio.Task[Any]] = set()
        self._stopping = False
        #: the requests in hand that wait only for a person (let go at once by a stop)
        self._parked = Parked()
        # the callers' deadlines of the requests in hand, on one timer
        self._deadlines = deadline.Deadlines()
        self._counts = metrics.ServiceCounts(self.request_queue.topic)
        self._span_name = f"{self.request_queue.topic} handle"
        self._span_attributes = {"messaging.destination.name": str(self.request_queue),
                                 "toolmesh.service": type(self).__name__}

    #: the services of this process that serve their queues now (each said "serving")
    _serving = 0

    @classmethod
    def serving(cls) -> int:
        """How many services of this process are serving their request queues."""
        return Service._serving

    @abstractmethod
    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        """Answer one request (a JSON object) by awaiting ``reply(response)`` one or more times."""

    def error_response(self, error: dict[str, str]) -> dict[str, Any]:
        """The response that carries ``error`` (``{"type", "message"}``) for this service."""
        return {"error": error}

    def describe_failure(self, error: Exception) -> str:
        """The message a caller gets when :meth:`handle` raised ``error``, an exception no
        one meant to send (a :class:`ToolmeshError` keeps its own message).

        The exception's type and text: ``str()`` alone can be as bare as ``'text'`` (a
        KeyError), which tells the caller nothing. Subclasses add where it came from.
        """
        text = str(error)
        return f"{type(error).__name__}: {text}" if text else type(error).__name__

    @property
    def reply_producer(self) -> Producer:
        """The producer of the response queue (for answers the service sends of its own
        accord, such as a dialog it takes up again; :meth:`start` opens it)."""
        if self._producer is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._producer

    async def start(self) -> None:
        """Open the response producer, then start consuming requests."""
        if self._subscription is not None:
            return
        self._producer = await self.bus.producer(self.response_queue)
        self._subscription = await self.bus.subscribe(
            self.request_queue, self._on_request,
            subscription=self.subscription, concurrency=self.concurrency)
        processors.consumer_started(self.request_queue.topic, self.subscription,
                                    kind=type(self).__name__)
        self._parked = Parked()  # started again: nothing is let go yet
        Service._serving += 1
        log.info("%s serving %s -> %s", type(self).__name__, self.request_queue,
                 self.response_queue)

    async def stop(self) -> None:
        """Stop consuming; requests in hand get ``drain_timeout`` seconds, then are cancelled
        (each with an error response)."""
        sub, self._subscription = self._subscription, None
        if sub is None:
            return
        processors.consumer_stopped(self.request_queue.topic, self.subscription)
        Service._serving -= 1
        # closing stops deliveries, then waits for the handlers in flight
        closing = asyncio.create_task(sub.close())
        self._parked.let_go(type(self).__name__)
        done, _ = await asyncio.wait({closing}, timeout=self.drain_timeout)
        if not done:
            log.warning("%s: %d request(s) still in hand after %g s; cancelling them",
                        type(self).__name__, len(self._handling), self.drain_timeout)
            self._stopping = True
            for task in list(self._handling):
                task.cancel()
        await closing
        self._deadlines.close()

    async def __aenter__(self) -> Service:
        await self.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    async def _on_request(self, message: Message) -> None:
        """Handle one request: every way it can fail becomes an error response."""
        producer = self._producer
        assert producer is not None
        properties = message.properties
        request_id = properties.get("id")
        reply: Reply = functools.partial(
            producer.send, properties={"id": request_id} if request_id is not None else {})
        count = delivery.deliveries()
        if count > 1 and 0 < self.max_deliveries < count:
            await self._refuse_redelivery(request_id, count, reply)
            return
        try:
            request = message.json()
            if type(request) is not dict:
                raise MalformedMessage(
                    f"request must be a JSON object, not a JSON {type(request).__name__}")
        except MalformedMessage as e:
            if request_id is None:
                log.warning("dropped a malformed request without id on %s: %s",
                            self.request_queue, e.message)
                return
            await reply(self.error_response({"type": "malformed-request", "message": e.message}))
            return

        started = time.perf_counter()
        timeout = deadline.from_properties(properties)
        due = None if timeout is None else asyncio.get_running_loop().time() + timeout
        # calls made for this request end before its caller's deadline (in this handler's
        # own context: a task's, or a copy the bus made for it)
        token = None if due is None else deadline.enter(due)
        id_token = _request_id.set(request_id) if request_id is not None else None
        # whether it waits only for a person (a stop lets it go: rpc/parking.py)
        parking = self._parked.enter()
        error: dict[str, str] | None = None
        # no span unless tracing is on (the name and attributes are not even looked at)
        with (tracing.span(self._span_name, kind="server", parent=properties,
                           attributes=self._span_attributes)
              if tracing.enabled() else _NO_SPAN) as span:
            # The handler's first step by hand: most finish in it, and one that never waits
            # can be neither cancelled nor overtaken by its deadline, so it needs no timer
            # and no place among the requests a stop cancels.
            try:
                handling = self.handle(request, reply)
                if type(handling) is not types.CoroutineType:  # handle() not an async def
                    handling = _awaited(handling)
                waits_on = handling.send(None)
            except StopIteration:
                pass
            except BaseException as e:
                error = self._failure(e, None, request_id, timeout)
            else:
                error = await self._waiting(handling, waits_on, due, request_id, timeout)
            finally:
                if token is not None:
                    deadline.leave(token)
                if id_token is not None:
                    _request_id.reset(id_token)
                self._parked.leave(parking)
            if error is not None:
                await reply(self.error_response(error))
                if span is not None:
                    tracing.failed(span, error["type"])
        self._counts.finished(None if error is None else error["type"],
                              time.perf_counter() - started)

    async def _refuse_redelivery(self, request_id: str | None, count: int,
                                 reply: Reply) -> None:
        """Answer a request delivered too often with an error, and handle it no more."""
        log.warning("request %s on %s was delivered %d times (at most %d are handled): "
                    "answered with an error, not handled again", request_id,
                    self.request_queue, count, self.max_deliveries)
        self._counts.finished("too-many-deliveries", 0.0)
        if request_id is None:
            return
        await reply(self.error_response({
            "type": "too-many-deliveries",
            "message": f"{type(self).__name__} got this request {count} times; each time "
                       "its handling was cut short (the connection to the broker lost, or "
                       f"the service stopped), and after {self.max_deliveries} it is not "
                       "handled again; send it anew if it should still run"}))

    async def _waiting(self, handling: Coroutine[Any, Any, None], waits_on: Any,
                       due: float | None, request_id: str | None, timeout: float | None,
                       ) -> dict[str, str] | None:
        """The rest of a handling that waits (see :meth:`_on_request`): cancelled by the
        caller's deadline or a stop that runs out of patience; the error response's
        ``error`` if it failed."""
        task = asyncio.current_task()
        assert task is not None
        self._handling.add(task)
        expiry = None if due is None else _Expiry(task, self._deadlines, due)
        self._parked.own(task)
        try:
            await coroutines.resume(handling, waits_on)
        except BaseException as e:
            return self._failure(e, expiry, request_id, timeout)
        finally:
            self._handling.discard(task)
            if expiry is not None:
                expiry.end()
        return None

    def _failure(self, e: BaseException, expiry: _Expiry | None, request_id: str | None,
                 timeout: float | None) -> dict[str, str]:
        """The error response's ``error`` for what :meth:`handle` raised, or ``e`` raised
        again when it is not the handler's to answer (a cancellation from outside)."""
        if isinstance(e, ToolmeshError):
            log.info("request %s on %s failed: %s: %s", request_id, self.request_queue,
                     e.type, e.message)
            return e.to_wire()
        if isinstance(e, asyncio.CancelledError):
            if expiry is not None and expiry.passed():
                # the caller's deadline (a TimeoutError of the handler's own is a failure like
                # any other: below)
                log.info("request %s on %s was not answered within its caller's %g s",
                         request_id, self.request_queue, timeout)
                return {"type": "timeout",
                        "message": f"{type(self).__name__} did not finish within the "
                                   f"caller's deadline of {timeout:g} s"}
            task = asyncio.current_task()
            assert task is not None
            if self._parked.was_let_go(task):
                task.uncancel()
                return {"type": "service-stopping",
                        "message": f"{type(self).__name__} stopped while this request waited "
                                   "for a person (a dialog is kept in its journal and taken "
                                   "up again when the agent is back); ask again once it is"}
            if not self._stopping:
                raise e
            # the drain ran out: say so, and let the bus acknowledge the request
            task.uncancel()
            return {"type": "service-stopping",
                    "message": f"{type(self).__name__} stopped before it finished this "
                               "request; send it again"}
        if not isinstance(e, Exception):
            raise e  # KeyboardInterrupt, SystemExit: not a request's failure
        message = self.describe_failure(e)
        # the traceback is for the service's author; the caller gets the one line
        log.warning("request %s on %s failed: %s", request_id, self.request_queue,
                    message, exc_info=e)
        return {"type": self.error_type, "message": message}
