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
from typing import Any, Self

import aiohttp

from toolmesh.llm.base import Completion, CompletionStream, LLMError
from toolmesh.urls import mask_url

log = logging.getLogger("toolmesh.llm")

DEFAULT_TIMEOUT = 120.0


class OpenAICompatible:
    """Chat completions over HTTP (see the module docstring for ``base_url``).

    ``timeout`` bounds a whole non-streamed answer; when streaming it bounds the wait for the
    response and then for each next piece, so a long answer that keeps coming is not cut off.
    One HTTP session per provider, opened on first use and reused for every call; many calls
    may run at once. Close with :meth:`close` or ``async with``.
    """

    def __init__(self, *, base_url: str, model: str, api_key: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT, temperature: float | None = None,
                 max_tokens: int | None = None, stream_usage: bool = True) -> None:
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
        with self._errors():
            async with asyncio.timeout(self.timeout):
                async with self._post(self._payload(system, prompt, stream=False)) as response:
                    await self._check_status(response)
                    body = await self._json(response)
        return self._completion(body)

    def stream(self, *, system: str, prompt: str) -> CompletionStream:
        """The answer as it is generated (``"stream": true``, server-sent events)."""
        return CompletionStream(self._stream(self._payload(system, prompt, stream=True)))

    async def _stream(self, payload: dict[str, Any]) -> AsyncIterator[str | Completion]:
        with self._errors():
            # Timeouts wrap each wait, never a yield: the consumer's time is not ours to bound.
            async with asyncio.timeout(self.timeout):
                response = await self._post(payload)
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
                usage: dict[str, Any] = {}
                model: str | None = None
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
                    model = event.get("model") or model
                    if isinstance(event.get("usage"), dict):
                        usage = event["usage"]
                    text = _delta_text(event)
                    if text:
                        yield text
                yield _with_usage(usage, model or self.model)

    def _payload(self, system: str, prompt: str, *, stream: bool) -> dict[str, Any]:
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": prompt})
        payload: dict[str, Any] = {"model": self.model, "messages": messages, "stream": stream}
        if stream and self.stream_usage:
            payload["stream_options"] = {"include_usage": True}
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        return payload

    def _post(self, payload: dict[str, Any]) -> Any:
        if self._session is None or self._session.closed:
            # Created here, inside the running loop; our own timeouts replace aiohttp's.
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        headers = {"Accept": "text/event-stream" if payload["stream"] else "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        log.debug("POST %s model=%s stream=%s", self._shown_url, self.model, payload["stream"])
        return self._session.post(self.url, json=payload, headers=headers)

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
        raise LLMError(f"the LLM at {self._shown_url} answered HTTP {response.status}: "
                       f"{detail}{hint}")

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
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise LLMError(f"the LLM at {self._shown_url} sent no choices: "
                           f"{json.dumps(body)[:200]}")
        message = choices[0].get("message")
        text = message.get("content") if isinstance(message, dict) else None
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        done = _with_usage(usage, body.get("model") or self.model)
        return Completion(text=text if isinstance(text, str) else "", in_tokens=done.in_tokens,
                          out_tokens=done.out_tokens, model=done.model)

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


def _delta_text(event: dict[str, Any]) -> str | None:
    choices = event.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None  # e.g. the usage-only last event
    delta = choices[0].get("delta")
    content = delta.get("content") if isinstance(delta, dict) else None
    return content if isinstance(content, str) else None


def _with_usage(usage: dict[str, Any], model: str | None) -> Completion:
    def count(name: str) -> int | None:
        value = usage.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return Completion(text="", in_tokens=count("prompt_tokens"),
                      out_tokens=count("completion_tokens"), model=model)


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
