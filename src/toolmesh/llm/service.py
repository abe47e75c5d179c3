"""The text-completion service: an :class:`LLMProvider` on the bus, on TrustGraph's wire.

Request: ``{"system": str, "prompt": str, "streaming": bool}`` (``system`` and ``streaming``
optional). Response: ``{"error": null | {"type", "message"}, "response": str, "in_token":
int | null, "out_token": int | null, "model": str | null, "end_of_stream": bool}``.

Not streaming: one response, ``end_of_stream: true``. Streaming: responses carrying the text
as the LLM writes it (``end_of_stream: false``), then a last one with ``response: ""``, the
token counts and the model when known, and ``end_of_stream: true``. The chunks that come
within a few milliseconds of each other share a response (:mod:`toolmesh.llm.coalesce`; the
first chunk, and the end, are never held); with coalescing off, each chunk is a response of
its own. An error — before or during a stream — is one response carrying ``error`` with
``end_of_stream: true``, after the text that came before it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from toolmesh.bus.base import DEFAULT_CONCURRENCY, Bus
from toolmesh.errors import ServiceError, ToolmeshError
from toolmesh.llm.base import Completion, CompletionStream, LLMProvider
from toolmesh.llm.coalesce import Coalescer, Coalescing
from toolmesh.rpc.client import DEFAULT_TIMEOUT, RequestClient, RpcClient
from toolmesh.rpc.service import Reply, Service
from toolmesh.telemetry import metrics, tracing

log = logging.getLogger("toolmesh.llm")

REQUEST_QUEUE = "request:tg:text-completion:default"
RESPONSE_QUEUE = "response:tg:text-completion:default"


def request(*, system: str, prompt: str, streaming: bool = False) -> dict[str, Any]:
    """A text-completion request."""
    return {"system": system, "prompt": prompt, "streaming": streaming}


def parse_request(body: Mapping[str, Any]) -> tuple[str, str, bool]:
    """``(system, prompt, streaming)``, or :class:`ServiceError` saying what is wrong."""
    system = body.get("system")
    system = "" if system is None else system
    prompt = body.get("prompt")
    streaming = body.get("streaming")
    streaming = False if streaming is None else streaming
    if not isinstance(system, str):
        raise _malformed("system", "a string", system)
    if not isinstance(prompt, str):
        raise _malformed("prompt", "a string", prompt)
    if not isinstance(streaming, bool):
        raise _malformed("streaming", "true or false", streaming)
    return system, prompt, streaming


def _malformed(name: str, expected: str, value: Any) -> ServiceError:
    problem = (f"{name!r} is missing; it must be {expected}" if value is None
               else f"{name!r} must be {expected}, not {type(value).__name__}")
    return ServiceError(problem, type="malformed-request")


def response(text: str, *, in_token: int | None = None, out_token: int | None = None,
             model: str | None = None, end_of_stream: bool = True) -> dict[str, Any]:
    """A success response (every field present, as TrustGraph's clients expect)."""
    return {"error": None, "response": text, "in_token": in_token, "out_token": out_token,
            "model": model, "end_of_stream": end_of_stream}


def error_response(error: Mapping[str, str]) -> dict[str, Any]:
    """An error response; it always ends the stream."""
    return {**response(""), "error": dict(error)}


def completion_of(body: Mapping[str, Any], text: str | None = None) -> Completion:
    """The :class:`Completion` a (final) response describes; ``text`` overrides its text."""
    def count(name: str) -> int | None:
        value = body.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    model = body.get("model")
    return Completion(text=str(body.get("response") or "") if text is None else text,
                      in_tokens=count("in_token"), out_tokens=count("out_token"),
                      model=model if isinstance(model, str) else None)


class TextCompletionService(Service):
    """Serves text completions from ``provider``; many requests are answered at once.

    Replicas with the same ``id`` share the work (competing consumers on the subscription
    ``<id>-request``). An :class:`~toolmesh.llm.base.LLMError` — or any other failure of the
    provider — becomes an error response of type ``llm-error``; the service keeps serving.
    The provider belongs to the caller: stopping the service does not close it.
    ``coalescing``: how a stream's chunks are gathered into responses (:data:`~toolmesh.llm.
    coalesce.OFF`: a response per chunk).
    """

    error_type = "llm-error"

    def __init__(self, bus: Bus, provider: LLMProvider, *,
                 request_queue: str = REQUEST_QUEUE, response_queue: str = RESPONSE_QUEUE,
                 id: str = "text-completion", concurrency: int = DEFAULT_CONCURRENCY,
                 coalescing: Coalescing = Coalescing()) -> None:
        super().__init__(bus, request_queue=request_queue, response_queue=response_queue,
                         subscription=f"{id}-request", concurrency=concurrency)
        self.id = id
        self.provider = provider
        self.coalescing = coalescing

    async def start(self) -> None:
        await super().start()
        log.info("text-completion %r answers with %s", self.id, self.provider.name)

    def error_response(self, error: dict[str, str]) -> dict[str, Any]:
        return error_response(error)

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        system, prompt, streaming = parse_request(request)
        started = time.perf_counter()
        done: Completion | None = None
        outcome = "cancelled"
        with tracing.span("llm completion", kind="client", attributes={
                "toolmesh.llm": self.provider.name, "toolmesh.streaming": streaming}) as span:
            try:
                done = await self._complete(system, prompt, streaming, reply)
                outcome = "ok"
            except ToolmeshError as e:
                outcome = e.type
                raise
            except Exception:
                outcome = self.error_type
                raise
            finally:
                if outcome != "ok":
                    tracing.failed(span, outcome)
                elif span is not None and done is not None:
                    span.set_attributes({k: v for k, v in {
                        "gen_ai.response.model": done.model,
                        "gen_ai.usage.input_tokens": done.in_tokens,
                        "gen_ai.usage.output_tokens": done.out_tokens}.items()
                        if v is not None})
                metrics.llm_call(model=done.model if done else None, outcome=outcome,
                                 seconds=time.perf_counter() - started,
                                 in_tokens=done.in_tokens if done else None,
                                 out_tokens=done.out_tokens if done else None)

    async def _complete(self, system: str, prompt: str, streaming: bool,
                        reply: Reply) -> Completion | None:
        """Answer one completion through ``reply``; the completion's counts (``None``: the
        provider's stream reported none)."""
        if not streaming:
            done = await self.provider.complete(system=system, prompt=prompt)
            await reply(response(done.text, in_token=done.in_tokens, out_token=done.out_tokens,
                                 model=done.model))
            return done

        async def send(text: str) -> None:
            await reply(response(text, end_of_stream=False))

        out = Coalescer(send, self.coalescing)
        chunks = self.provider.stream(system=system, prompt=prompt)
        try:
            try:
                async for chunk in chunks:
                    await out.add(chunk)
            except Exception:
                with contextlib.suppress(Exception):  # the failure to report is the first
                    await out.flush()  # the text before the failure goes out before its error
                raise
            await out.flush()
        finally:
            out.cancel()
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()  # on error or cancel, release the provider's response now
        done = chunks.completion if isinstance(chunks, CompletionStream) else None
        await reply(response("", in_token=done.in_tokens if done else None,
                             out_token=done.out_tokens if done else None,
                             model=done.model if done else None))
        return done


class TextCompletionClient(RpcClient):
    """Asks a text-completion service; one client serves any number of concurrent calls.

    An error response raises :class:`toolmesh.RequestError` with the service's type (e.g.
    ``llm-error``) and message; a missed deadline raises :class:`toolmesh.RequestTimeout`.
    Use ``async with`` or :meth:`start`/:meth:`stop`.
    """

    def __init__(self, bus: Bus, *, request_queue: str = REQUEST_QUEUE,
                 response_queue: str = RESPONSE_QUEUE, subscription: str | None = None) -> None:
        self._rpc = RequestClient(bus, request_queue=request_queue,
                                  response_queue=response_queue, subscription=subscription)


    async def complete(self, system: str, prompt: str, *,
                       timeout: float | None = DEFAULT_TIMEOUT) -> Completion:
        """The whole answer in one response."""
        body = await self._rpc.request(request(system=system, prompt=prompt), timeout=timeout)
        return completion_of(body)

    def stream(self, system: str, prompt: str, *,
               timeout: float | None = DEFAULT_TIMEOUT) -> CompletionStream:
        """The answer chunk by chunk; ``completion`` holds the token counts at the end.

        ``timeout`` bounds the whole stream.
        """
        return CompletionStream(self._stream(system, prompt, timeout))

    async def _stream(self, system: str, prompt: str,
                      timeout: float | None) -> AsyncIterator[str | Completion]:
        body = request(system=system, prompt=prompt, streaming=True)
        async for message in self._rpc.stream(body, timeout=timeout):
            text = message.get("response")
            if message.get("end_of_stream", True) is not False:
                if isinstance(text, str) and text:
                    yield text  # a service that sends its last piece in the final message
                yield completion_of(message, "")
            elif isinstance(text, str):
                yield text
