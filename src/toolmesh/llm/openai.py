"""An LLM provider for any server that speaks OpenAI's chat-completions API over HTTP.

That is OpenAI itself, vLLM, Ollama, llama.cpp's server, LM Studio, LiteLLM and most others.
``base_url`` is the API root *including* its version segment, exactly as those servers
document it: ``https://api.openai.com/v1``, ``http://localhost:11434/v1`` (Ollama),
``http://localhost:8000/v1`` (vLLM). The provider appends ``/chat/completions`` and never
guesses a missing ``/v1`` (a wrong guess would hide a misconfiguration); a 404 says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any, Self

import aiohttp

import toolmesh.llm.openai_wire as openai_wire
from toolmesh.llm import counting
from toolmesh.llm.base import Completion, CompletionStream, LLMError, LLMRefused
from toolmesh.llm.chat import ChatMessage, ChatRequest
from toolmesh.llm.models import served_model
from toolmesh.llm.quirks import OPENAI, PROBE, Quirks, escapes, identify, quirks_of
from toolmesh.urls import mask_url

log = logging.getLogger("toolmesh.llm")

DEFAULT_TIMEOUT = 120.0
#: pieces a stream may run past its ``max_tokens`` before it is cut (a piece is about a token;
#: a little slack keeps a server that counts differently from being cut short)
LIMIT_SLACK = 16
#: characters of a stream kept to see whether the model is stuck in a loop
LOOP_TAIL = 2 * openai_wire.LOOP_REPEATS * openai_wire.LOOP_PERIOD


class OpenAICompatible:
    """Chat completions over HTTP (see the module docstring for ``base_url``).

    ``timeout`` bounds a whole non-streamed answer; when streaming it bounds the wait for the
    response and then for each next piece, so a long answer that keeps coming is not cut off.
    ``server``: the kind of server (:data:`toolmesh.llm.quirks.TABLE`); by default it is
    recognised from ``GET /models`` at the first call.
    One HTTP session per provider, opened on first use and reused for every call; many calls
    may run at once. Close with :meth:`close` or ``async with``.
    """

    def __init__(self, *, base_url: str, model: str, api_key: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT, temperature: float | None = None,
                 max_tokens: int | None = None, stream_usage: bool = True,
                 server: str | None = None) -> None:
        if not model:
            raise LLMError("no model given for the OpenAI-compatible LLM at "
                           f"{mask_url(base_url)}; pass model= (or set TOOLMESH_LLM_MODEL)")
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.model = model
        self.timeout = timeout
        self.temperature = temperature
        self.max_tokens = max_tokens
        # stream_options.include_usage asks for token counts at the end of a stream; the few
        # servers that reject unknown fields can be served with stream_usage=False
        self.stream_usage = stream_usage
        self._api_key = api_key or None  # private: never logged, never in a message
        self._shown_url = mask_url(self.url)
        self.name = f"openai-compatible {model} @ {mask_url(self.base_url)}"
        self._session: aiohttp.ClientSession | None = None
        #: the kind of server (:mod:`toolmesh.llm.quirks`); ``None``: asked at the first call
        self.server = server
        self._escaping: bool | None = None
        #: whether the server reports token counts in streams (``None``: not seen yet); when
        #: it does not, the provider counts them (:mod:`toolmesh.llm.counting`)
        self.stream_reports_usage: bool | None = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def __repr__(self) -> str:
        return f"OpenAICompatible({self.name!r})"

    async def complete(self, *, system: str, prompt: str) -> Completion:
        """The whole answer; :class:`LLMError` if the server cannot give it."""
        stream = self.chat(ChatRequest.of_prompt(system, prompt))
        async for _ in stream:
            pass
        assert stream.completion is not None
        return stream.completion

    def stream(self, *, system: str, prompt: str) -> CompletionStream:
        """The answer as it is generated (``"stream": true``, server-sent events)."""
        return self.chat(ChatRequest.of_prompt(system, prompt, stream=True))

    def chat(self, request: ChatRequest) -> CompletionStream:
        """The answer to a chat request (:mod:`toolmesh.llm.chat`), encoded as the server
        accepts it (:mod:`toolmesh.llm.quirks`). ``max_tokens`` is kept even by a server that
        ignores it: the stream is cut once that many pieces have come."""
        return CompletionStream(self._chat(request))

    async def server_kind(self) -> str:
        """Which kind of server this is (:func:`toolmesh.llm.quirks.identify`), asked once."""
        if self.server is None:
            self.server = await self._identify()
            log.info("the LLM at %s is %s", mask_url(self.base_url), self.server)
        return self.server

    async def escaping(self, quirks: Quirks) -> bool:
        """Whether the server HTML-escapes what the model reads (:func:`toolmesh.llm.quirks.
        escapes`), asked once, of servers that may."""
        if not quirks.may_escape:
            return False
        if self._escaping is None:
            counts = []
            for content in ("", PROBE):
                stream = CompletionStream(self._chat(ChatRequest(
                    messages=(ChatMessage(role="user", content=content),), max_tokens=1,
                    temperature=0.0), escaping=False))
                async for _ in stream:
                    pass
                counts.append(stream.completion.in_tokens if stream.completion else None)
            empty, quoted = counts
            self._escaping = empty is not None and quoted is not None \
                and escapes(empty, quoted)
            if self._escaping:
                log.warning("the LLM at %s HTML-escapes what the model reads (llama-cpp-python's "
                            "chatml-function-calling format?): quotes, apostrophes, <, > and & "
                            "are sent as look-alike characters", mask_url(self.base_url))
        return self._escaping

    async def models(self) -> list[dict[str, Any]]:
        """The model this provider answers with, and what the server's ``GET /models`` tells
        of it (:func:`toolmesh.llm.models.served_model`); the id alone when the server lists
        nothing (the model is still the one every answer comes from)."""
        listing: Any = None
        try:
            listing = await self._listing()
        except (LLMError, ValueError) as e:
            log.info("the LLM at %s lists no models: %s", mask_url(self.base_url), e)
        return [served_model(self.model, listing)]

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One embedding vector per text, from the server's ``POST /embeddings``
        (:class:`LLMError` if it has none)."""
        with self._errors():
            async with asyncio.timeout(self.timeout):
                async with self._session_().post(
                        self.base_url + "/embeddings", json={"model": self.model, "input": texts},
                        headers=self._headers("application/json")) as response:
                    await self._check_status(response)
                    body = await self._json(response)
        data = body.get("data")
        if not isinstance(data, list) or len(data) != len(texts):
            raise LLMError(f"the LLM at {mask_url(self.base_url)} answered /embeddings without "
                           f"{len(texts)} vectors")
        vectors = []
        for item in sorted(data, key=lambda d: d.get("index", 0) if isinstance(d, dict) else 0):
            vector = item.get("embedding") if isinstance(item, dict) else None
            if isinstance(vector, list) and vector and isinstance(vector[0], list):
                vector = vector[0]  # llama-cpp-python answers one vector per token row
            if not isinstance(vector, list) or not all(isinstance(v, (int, float))
                                                       for v in vector):
                raise LLMError(f"the LLM at {mask_url(self.base_url)} sent an embedding that "
                               "is not a list of numbers")
            vectors.append([float(v) for v in vector])
        return vectors

    async def _identify(self) -> str:
        try:
            listing = await self._listing()
        except (LLMError, ValueError):
            return OPENAI.kind  # the chat request says what is wrong, if anything is
        return OPENAI.kind if listing is None else identify(listing)

    async def _listing(self) -> Any:
        """What the server's ``GET /models`` answers, decoded; ``None`` for a 4xx or 5xx."""
        with self._errors():
            async with asyncio.timeout(min(self.timeout, 10.0)):
                async with self._session_().get(self.base_url + "/models",
                                                headers=self._headers("application/json")
                                                ) as response:
                    if response.status >= 400:
                        return None
                    return json.loads(await response.text(errors="replace"))

    async def _chat(self, request: ChatRequest, *,
                    escaping: bool | None = None) -> AsyncIterator[str | Completion]:
        quirks = quirks_of(await self.server_kind())
        if escaping is None:
            escaping = await self.escaping(quirks)
        if request.stream and request.tools and not quirks.streams_tool_calls:
            request = replace(request, stream=False)
        elif request.action_max_tokens is not None and not request.stream \
                and (quirks.streams_tool_calls or not request.tools):
            # streamed from the server so that an action can be cut at its bound while an
            # answer goes on (the caller still gets the whole text and the calls)
            request = replace(request, stream=True)
        body = openai_wire.payload(request, model=self.model, quirks=quirks,
                                   default_temperature=self.temperature,
                                   default_max_tokens=self.max_tokens, escaping=escaping)
        if request.stream and self.stream_usage:
            body["stream_options"] = {"include_usage": True}
        if not request.stream:
            whole = await self._whole(body)
            if request.action_max_tokens is not None and not whole.tool_calls \
                    and whole.finish_reason == "length" \
                    and body.get("max_tokens") != request.max_tokens:
                # an answer the action bound cut (a server that cannot stream this request
                # cannot be cut once the reply turns out to be one): asked again, with the
                # answer's own bound
                body = openai_wire.payload(replace(request, action_max_tokens=None),
                                           model=self.model, quirks=quirks,
                                           default_temperature=self.temperature,
                                           default_max_tokens=self.max_tokens,
                                           escaping=escaping)
                whole = await self._whole(body)
            if whole.in_tokens is None:
                whole = counting.completed(whole, in_tokens=counting.estimate(body),
                                           source=counting.ESTIMATED, pieces=0, text=whole.text)
            yield whole.text
            yield whole
            return
        counted: tuple[int, str] | None = None
        if self.stream_reports_usage is False:
            # counted first, so that the stream finds its prompt evaluated (counting.py)
            counted = await counting.prompt_tokens(body, self._whole)
        limit = body.get("max_tokens")
        with self._errors():
            # Timeouts wrap each wait, never a yield: the consumer's time is not ours to bound.
            async with asyncio.timeout(self.timeout):
                response = await self._post(body)
            async with response:
                async with asyncio.timeout(self.timeout):
                    await self._check_status(response)
                if response.content_type == "application/json":
                    # a server that ignores "stream": true answers in one piece
                    async with asyncio.timeout(self.timeout):
                        whole = self._completion(await self._json(response))
                    yield whole.text
                    yield whole
                    return
                deltas = openai_wire.DeltaAssembler(model=self.model)
                action = openai_wire.ActionBound(request.action_max_tokens,
                                                 request.answer_marker, slack=LIMIT_SLACK)
                cut = False
                tail = ""
                while True:
                    async with asyncio.timeout(self.timeout):
                        line = await response.content.readline()
                    if not line:
                        break  # the server closed the stream without [DONE]: take what came
                    event = self._event(line)
                    if event is None:
                        continue
                    if event is _DONE:
                        break
                    text = deltas.add(event)
                    if text:
                        yield text
                        tail = (tail + text)[-LOOP_TAIL:]
                        if deltas.pieces % 16 == 0 and openai_wire.looping(tail):
                            log.warning("the LLM at %s is repeating itself; its answer is cut",
                                        self._shown_url)
                            cut = True
                            break
                    if action.passed(deltas, text):
                        log.info("the LLM at %s went on past the step's bound of %d tokens "
                                 "for an action; cut", self._shown_url, action.limit)
                        cut = True
                        break
                    if limit is not None and deltas.pieces > limit + LIMIT_SLACK:
                        # the server went on past max_tokens (llama-cpp-python does in some
                        # chat formats): closing the response stops it
                        log.warning("the LLM at %s went on past max_tokens=%d; cut",
                                    self._shown_url, limit)
                        cut = True
                        break
                done = deltas.completion()
        if done.in_tokens is None or done.out_tokens is None:
            if self.stream_reports_usage is None:
                log.info("the LLM at %s reports no token counts in streams; toolmesh counts "
                         "them", mask_url(self.base_url))
            self.stream_reports_usage = False
            counted = counted or await counting.prompt_tokens(body, self._whole)
            done = counting.completed(done, in_tokens=counted[0], source=counted[1],
                                      pieces=deltas.pieces, text="")
        elif self.stream_reports_usage is None:
            self.stream_reports_usage = True
        yield replace(done, finish_reason="length") if cut else done

    async def _whole(self, body: dict[str, Any]) -> Completion:
        """The whole (not streamed) answer to ``body``."""
        with self._errors():
            async with asyncio.timeout(self.timeout):
                async with self._post(body) as response:
                    await self._check_status(response)
                    return self._completion(await self._json(response))

    def _session_(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # Created here, inside the running loop; our own timeouts replace aiohttp's.
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        return self._session

    def _headers(self, accept: str) -> dict[str, str]:
        headers = {"Accept": accept}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _post(self, payload: dict[str, Any]) -> Any:
        accept = "text/event-stream" if payload["stream"] else "application/json"
        log.debug("POST %s model=%s stream=%s", self._shown_url, self.model, payload["stream"])
        return self._session_().post(self.url, json=payload, headers=self._headers(accept))

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn transport failures into :class:`LLMError` saying what happened and what to check."""
        try:
            yield
        except LLMError as e:
            e.message = self._redact(e.message)
            e.args = (e.message,)
            raise
        except TimeoutError:  # before ClientError: aiohttp's timeouts are both
            raise LLMError(f"the LLM at {self._shown_url} did not answer within "
                           f"{self.timeout:g} s; is it overloaded, or is the timeout too short "
                           "for this model?") from None
        except aiohttp.ClientConnectorError as e:
            raise LLMError(f"cannot reach the LLM at {self._shown_url}: "
                           f"{self._redact(str(e.os_error or e))}; is the server running, and is "
                           "the base URL right?") from None
        except (aiohttp.ClientError, ValueError) as e:
            raise LLMError(f"the request to the LLM at {self._shown_url} failed: "
                           f"{self._redact(str(e) or type(e).__name__)}") from None

    async def _check_status(self, response: aiohttp.ClientResponse) -> None:
        if response.status < 400:
            return
        raw = await response.text(errors="replace")
        detail = _error_message(raw) or response.reason or "no details"
        hint = ""
        if response.status in (401, 403):
            hint = "; check the API key (TOOLMESH_LLM_API_KEY or OPENAI_API_KEY)"
        elif response.status == 404:
            hint = (f"; check the model name {self.model!r} and that the base URL is the API "
                    "root including its version, e.g. http://host:8000/v1")
        raise LLMRefused(f"the LLM at {self._shown_url} answered HTTP {response.status}: "
                         f"{detail}{hint}", status=response.status)

    async def _json(self, response: aiohttp.ClientResponse) -> dict[str, Any]:
        raw = await response.text(errors="replace")
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            raise LLMError(f"the LLM at {self._shown_url} sent a response that is not JSON: "
                           f"{raw[:200]!r}") from None
        if not isinstance(body, dict):
            raise LLMError(f"the LLM at {self._shown_url} sent a JSON {type(body).__name__}, "
                           "not a chat-completion object")
        return body

    def _completion(self, body: dict[str, Any]) -> Completion:
        if body.get("error"):
            raise LLMError(f"the LLM at {self._shown_url} reported an error: "
                           f"{_error_message(body) or body['error']}")
        try:
            return openai_wire.completion(body, model=self.model)
        except ValueError as e:
            raise LLMError(f"the LLM at {self._shown_url} sent {e}") from None

    def _event(self, line: bytes) -> dict[str, Any] | None:
        """One SSE line: an event object, ``_DONE``, or None for lines that carry no data."""
        text = line.decode("utf-8", errors="replace").strip()
        if not text.startswith("data:"):
            return None  # blank separators, ": comments", "event:" and "id:" fields
        data = text[5:].strip()
        if data == "[DONE]":
            return _DONE
        try:
            event = json.loads(data)
        except json.JSONDecodeError:
            raise LLMError(f"the LLM at {self._shown_url} sent a stream event that is not "
                           f"JSON: {data[:200]!r}") from None
        if not isinstance(event, dict):
            return None
        if event.get("error"):
            raise LLMError(f"the LLM at {self._shown_url} reported an error mid-stream: "
                           f"{_error_message(event) or event['error']}")
        return event

    def _redact(self, text: str) -> str:
        # Servers sometimes quote the key they rejected; it must not reach logs or clients.
        return text.replace(self._api_key, "***") if self._api_key else text


#: what :meth:`OpenAICompatible._event` returns for ``data: [DONE]`` (compared by identity)
_DONE: dict[str, Any] = {}


def _error_message(raw: str | dict[str, Any]) -> str | None:
    """The message in an error body: OpenAI's ``{"error": {"message"}}``, Ollama's
    ``{"error": "..."}``, FastAPI's ``{"detail": ...}``; else the raw text, shortened."""
    body: Any = raw
    if isinstance(raw, str):
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            return raw.strip()[:300] or None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        for value in (error, body.get("detail"), body.get("message")):
            if isinstance(value, str) and value:
                return value
        return json.dumps(body)[:300]
    return str(body)[:300]
