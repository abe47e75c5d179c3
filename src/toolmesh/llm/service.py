"""The text-completion service: an :class:`LLMProvider` on the bus, on TrustGraph's wire.

Request: ``{"system": str, "prompt": str, "streaming": bool}`` (``system`` and ``streaming``
optional). Response: ``{"error": null | {"type", "message"}, "response": str, "in_token":
int | null, "out_token": int | null, "model": str | null, "end_of_stream": bool}``.

The request may also carry limits for the answer: ``max_tokens``, ``stop`` (a list of strings)
and ``temperature``; TrustGraph's requests, which have none, are answered as before.

A **chat request** (toolmesh's own; :mod:`toolmesh.llm.chat`) carries ``messages`` instead of
``system``/``prompt``, and may carry ``tools``, ``tool_choice`` and ``response_schema``; its last
response adds ``tool_calls`` (``[{"id", "name", "arguments"}]`` or ``null``) and
``finish_reason``.

``{"operation": "capabilities"}`` answers which tool-calling strategy to use with this
service's LLM: ``{"tool_calling": "native" | "json" | "react", "source": "configured" |
"detected" | "provider", "detail", "llm", "error": null, "end_of_stream": true}``. Unless the
operator chose one (``tool_calling``), it is detected by trying (:mod:`toolmesh.llm.detect`)
at the first such request, and kept for the life of the service (``"refresh": true`` detects
again).

``{"operation": "embeddings", "input": [...]}`` answers the provider's embedding vectors
(:mod:`toolmesh.llm.embeddings`).

``{"operation": "list-models"}`` (TrustGraph's ``tg-list-models``) answers ``{"models":
[{"id": ..., ...}], "error": null, "end_of_stream": true}``: the model this service answers with
(:mod:`toolmesh.llm.models`). ``"operation": "completion"`` is a completion, as with none.

Not streaming: one response, ``end_of_stream: true``. Streaming: responses carrying the text
as the LLM writes it (``end_of_stream: false``), then a last one with ``response: ""``, the
token counts and the model when known, and ``end_of_stream: true``. The chunks that come
within a few milliseconds of each other share a response (:mod:`toolmesh.llm.coalesce`; the
first chunk, and the end, are never held); with coalescing off, each chunk is a response of
its own. An error — before or during a stream — is one response carrying ``error`` with
``end_of_stream: true``, after the text that came before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from toolmesh.bus.base import DEFAULT_CONCURRENCY, Bus
from toolmesh.errors import ServiceError, ToolmeshError
from toolmesh.llm import embeddings
from toolmesh.llm.base import TOOL_CALLING, Completion, CompletionStream, LLMProvider
from toolmesh.llm.chat import (
    ChatRequest,
    is_chat_request,
    limits_from_wire,
    request_from_wire,
    request_to_wire,
    tool_calls_from_wire,
    tool_calls_to_wire,
)
from toolmesh.llm.coalesce import Coalescer, Coalescing
from toolmesh.llm.detect import Detection, detect
from toolmesh.llm.models import list_models
from toolmesh.rpc.client import DEFAULT_TIMEOUT, RequestClient, RpcClient
from toolmesh.rpc.service import Reply, Service
from toolmesh.telemetry import metrics, tracing

log = logging.getLogger("toolmesh.llm")

REQUEST_QUEUE = "request:tg:text-completion:default"
RESPONSE_QUEUE = "response:tg:text-completion:default"


def request(*, system: str, prompt: str, streaming: bool = False) -> dict[str, Any]:
    """A text-completion request."""
    return {"system": system, "prompt": prompt, "streaming": streaming}


def parse_prompt_request(body: Mapping[str, Any]) -> ChatRequest:
    """A ``{system, prompt}`` request (with its limits, if any) as a chat request."""
    system, prompt, streaming = parse_request(body)
    return ChatRequest.of_prompt(system, prompt, stream=streaming, **limits_from_wire(body))


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
             model: str | None = None, end_of_stream: bool = True,
             token_source: str | None = None) -> dict[str, Any]:
    """A success response (every field present, as TrustGraph's clients expect; toolmesh's
    ``token_source`` only where the counts were not reported by the LLM's server)."""
    out = {"error": None, "response": text, "in_token": in_token, "out_token": out_token,
           "model": model, "end_of_stream": end_of_stream}
    if token_source is not None and token_source != "reported":
        out["token_source"] = token_source
    return out


def last_response(done: Completion | None, *, text: str = "",
                  chat: bool = False) -> dict[str, Any]:
    """The response that ends an answer: its usage, and for a chat request its tool calls
    and finish reason."""
    out = response(text, in_token=done.in_tokens if done else None,
                   out_token=done.out_tokens if done else None,
                   model=done.model if done else None,
                   token_source=done.token_source if done else None)
    if chat:
        out["tool_calls"] = tool_calls_to_wire(done.tool_calls) if done else None
    if chat or (done is not None and done.finish_reason == "length"):
        # toolmesh's; a plain request (TrustGraph's shape) has it only when it was cut
        out["finish_reason"] = done.finish_reason if done else None
    return out


def error_response(error: Mapping[str, str]) -> dict[str, Any]:
    """An error response; it always ends the stream."""
    return {**response(""), "error": dict(error)}


def completion_of(body: Mapping[str, Any], text: str | None = None) -> Completion:
    """The :class:`Completion` a (final) response describes; ``text`` overrides its text."""
    def count(name: str) -> int | None:
        value = body.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    model = body.get("model")
    finish = body.get("finish_reason")
    source = body.get("token_source")
    in_tokens, out_tokens = count("in_token"), count("out_token")
    return Completion(text=str(body.get("response") or "") if text is None else text,
                      in_tokens=in_tokens, out_tokens=out_tokens,
                      model=model if isinstance(model, str) else None,
                      tool_calls=tool_calls_from_wire(body.get("tool_calls")),
                      finish_reason=finish if isinstance(finish, str) else None,
                      token_source=source if isinstance(source, str) else None)


class TextCompletionService(Service):
    """Serves text completions from ``provider``; many requests are answered at once.

    Replicas with the same ``id`` share the work (competing consumers on the subscription
    ``<id>-request``). An :class:`~toolmesh.llm.base.LLMError` — or any other failure of the
    provider — becomes an error response of type ``llm-error``; the service keeps serving.
    The provider belongs to the caller: stopping the service does not close it.
    ``coalescing``: how a stream's chunks are gathered into responses (:data:`~toolmesh.llm.
    coalesce.OFF`: a response per chunk). ``tool_calling``: the strategy agents use with this
    LLM, or ``auto`` to detect it (module docstring).
    """

    error_type = "llm-error"

    def __init__(self, bus: Bus, provider: LLMProvider, *,
                 request_queue: str = REQUEST_QUEUE, response_queue: str = RESPONSE_QUEUE,
                 id: str = "text-completion", concurrency: int = DEFAULT_CONCURRENCY,
                 coalescing: Coalescing = Coalescing(), tool_calling: str = "auto") -> None:
        super().__init__(bus, request_queue=request_queue, response_queue=response_queue,
                         subscription=f"{id}-request", concurrency=concurrency)
        if tool_calling not in ("auto", *TOOL_CALLING):
            raise ValueError(f"tool_calling must be auto, {', '.join(TOOL_CALLING)}; "
                             f"not {tool_calling!r}")
        self.id = id
        self.provider = provider
        self.coalescing = coalescing
        self.tool_calling = tool_calling
        self._detection: Detection | None = None
        #: the detection under way: requests that come meanwhile wait for it, not probe again
        self._detecting: asyncio.Future[Detection] | None = None

    async def start(self) -> None:
        await super().start()
        log.info("text-completion %r answers with %s", self.id, self.provider.name)

    def error_response(self, error: dict[str, str]) -> dict[str, Any]:
        return error_response(error)

    async def capabilities(self, *, refresh: bool = False) -> Detection:
        """The tool-calling strategy for this service's LLM (module docstring)."""
        if self.tool_calling != "auto":
            return Detection(strategy=self.tool_calling, source="configured",  # type: ignore[arg-type]
                             detail=f"set by the operator (--tool-calling {self.tool_calling})")
        if self._detection is not None and not refresh:
            return self._detection
        if self._detecting is None:
            self._detecting = asyncio.ensure_future(self._detect())
        detecting = self._detecting
        try:
            return await asyncio.shield(detecting)
        finally:
            if detecting.done() and self._detecting is detecting:
                self._detecting = None

    async def _detect(self) -> Detection:
        detection = await detect(self.provider)
        self._detection = detection
        log.info("tool calling with %s: %s (%s)", self.provider.name, detection.strategy,
                 detection.detail)
        return detection

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        operation = request.get("operation")
        if operation == "capabilities":
            detection = await self.capabilities(refresh=request.get("refresh") is True)
            await reply({"error": None, **detection.to_wire(), "llm": self.provider.name,
                         "end_of_stream": True})
            return
        if operation == "list-models":
            await reply({"error": None, "response": "",
                         "models": await list_models(self.provider), "end_of_stream": True})
            return
        if operation == "embeddings":
            await reply(await embeddings.answer(self.provider, request))
            return
        if operation not in (None, "completion"):
            raise ServiceError(f"unknown operation {operation!r}: a text-completion request has "
                               "none (or 'completion'), 'list-models', 'capabilities' or "
                               "'embeddings'", type="malformed-request")
        chat = is_chat_request(request)
        if chat:
            if not callable(getattr(self.provider, "chat", None)):
                raise ServiceError(f"{self.provider.name} takes no chat requests (messages, "
                                   "tools): only TrustGraph's {system, prompt}",
                                   type="llm-error")
            parsed = request_from_wire(request)
        else:
            parsed = parse_prompt_request(request)
        streaming = parsed.stream
        started = time.perf_counter()
        done: Completion | None = None
        outcome = "cancelled"
        with tracing.span("llm completion", kind="client", attributes={
                "toolmesh.llm": self.provider.name, "toolmesh.streaming": streaming}) as span:
            try:
                done = await self._complete(parsed, reply, chat=chat)
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

    def _ask(self, request: ChatRequest, *, chat: bool) -> AsyncIterator[str] | None:
        """The provider's stream for ``request``; ``None``: ask with :meth:`complete` (a plain
        TrustGraph request, which every provider takes, even one with no ``chat``)."""
        plain = not chat and request.max_tokens is None and not request.stop \
            and request.temperature is None and request.action_max_tokens is None
        if not plain and callable(getattr(self.provider, "chat", None)):
            return self.provider.chat(request)
        # a provider of the text protocol alone: the limits are its own business
        if not request.stream:
            return None
        system = request.messages[0].content if len(request.messages) > 1 else ""
        return self.provider.stream(system=system, prompt=request.messages[-1].content)

    async def _complete(self, request: ChatRequest, reply: Reply, *,
                        chat: bool) -> Completion | None:
        """Answer one completion through ``reply``; the completion's counts (``None``: the
        provider's stream reported none)."""
        chunks = self._ask(request, chat=chat)
        if chunks is None:
            system = request.messages[0].content if len(request.messages) > 1 else ""
            whole = await self.provider.complete(system=system,
                                                 prompt=request.messages[-1].content)
            await reply(last_response(whole, text=whole.text))
            return whole
        if not request.stream:  # one response: the whole text and the calls
            try:
                pieces = [chunk async for chunk in chunks]
            finally:
                await _close(chunks)
            done = chunks.completion if isinstance(chunks, CompletionStream) else None
            await reply(last_response(done, text="".join(pieces), chat=chat))
            return done

        async def send(text: str) -> None:
            await reply(response(text, end_of_stream=False))

        out = Coalescer(send, self.coalescing)
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
            await _close(chunks)  # on error or cancel, release the provider's response now
        done = chunks.completion if isinstance(chunks, CompletionStream) else None
        await reply(last_response(done, chat=chat))
        return done


async def _close(chunks: AsyncIterator[str]) -> None:
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        await aclose()


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
        return CompletionStream(self._stream(request(system=system, prompt=prompt,
                                                     streaming=True), timeout))

    def chat(self, chat: ChatRequest, *,
             timeout: float | None = DEFAULT_TIMEOUT) -> CompletionStream:
        """The answer to a chat request, chunk by chunk (one chunk when ``chat.stream`` is
        false); ``completion`` holds the tool calls and token counts at the end."""
        return CompletionStream(self._stream(request_to_wire(chat), timeout))

    async def capabilities(self, *, refresh: bool = False,
                           timeout: float | None = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The service's answer to ``{"operation": "capabilities"}`` (module docstring)."""
        body: dict[str, Any] = {"operation": "capabilities"}
        if refresh:
            body["refresh"] = True
        return await self._rpc.request(body, timeout=timeout)

    async def _stream(self, body: dict[str, Any],
                      timeout: float | None) -> AsyncIterator[str | Completion]:
        async for message in self._rpc.stream(body, timeout=timeout):
            text = message.get("response")
            if message.get("end_of_stream", True) is not False:
                if isinstance(text, str) and text:
                    yield text  # a service that sends its last piece in the final message
                yield completion_of(message, "")
            elif isinstance(text, str):
                yield text
