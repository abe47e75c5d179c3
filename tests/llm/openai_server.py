"""A real OpenAI-compatible HTTP server with scripted answers, for tests.

In a test::

    async with OpenAITestServer(answers=["Hello!", Answer(status=500, error="boom")]) as server:
        llm = OpenAICompatible(base_url=server.base_url, model="m")   # base_url ends in /v1
        ...
        server.requests[0].messages   # what the client sent

As a process (for tests that run toolmesh as separate processes)::

    python -m tests.llm.openai_server --port 0 --answers-file answers.json [--api-key K]

prints ``listening on http://127.0.0.1:PORT/v1`` on stdout and serves until SIGTERM/SIGINT.
The answers file is a JSON list of answers, or ``{"answers": [...], "rules": [{"match":
"<regex>", "response": <answer>}], "default": <answer>}``; an answer is a string (the text)
or an object with :class:`Answer`'s fields.

Which answer a request gets: a request for one token (``max_tokens: 1``, how a client probes
a server) gets one, without using a scripted answer; else ``respond(request)`` if given and not
None; else the first rule
whose regex is found in the last user message; else the next queued answer; else ``default``;
else HTTP 500 "no answer scripted".
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import re
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Self

from aiohttp import web

_PIECES = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True, kw_only=True)
class Answer:
    """One scripted answer.

    ``body`` is sent as it is, with ``status`` and ``content_type``; otherwise ``status`` >= 400 sends OpenAI's error
    JSON with ``error`` as its message. ``hang`` never answers (until the server closes). ``chunks``
    fixes how a streamed answer is split (default: word by word); ``stream_error`` ends
    a stream after its chunks with an error event (as vLLM does when generation fails). Token counts default to
    word counts; ``usage=False`` leaves usage out.
    """

    text: str = ""
    status: int = 200
    error: str | None = None
    body: str | None = None
    content_type: str = "text/plain"
    hang: bool = False
    chunks: Sequence[str] | None = None
    stream_error: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage: bool = True
    #: why the answer ended, where not "stop" ("length": the model's limit cut it)
    finish_reason: str | None = None
    #: the reply's tool calls, ``[{"name", "arguments": <JSON text or object>, "id"?}]``;
    #: streamed as OpenAI streams them: each call's id and name, then its arguments in pieces
    tool_calls: Sequence[dict[str, Any]] = ()

    @classmethod
    def of(cls, value: str | Answer | dict[str, Any]) -> Answer:
        """An answer from its text, itself, or a JSON object of its fields."""
        if isinstance(value, Answer):
            return value
        if isinstance(value, str):
            return cls(text=value)
        known = {f.name for f in fields(cls)}
        unknown = set(value) - known
        if unknown:
            raise ValueError(f"unknown answer field(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(**value)


@dataclass(frozen=True)
class ReceivedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    #: the client's (host, port): equal for two requests on one kept-alive connection
    peer: tuple[str, int] | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or []) if isinstance(self.body, dict) else []

    @property
    def prompt(self) -> str:
        """The content of the last user message."""
        users = [m.get("content", "") for m in self.messages if m.get("role") == "user"]
        return users[-1] if users else ""

    @property
    def authorization(self) -> str | None:
        return self.headers.get("Authorization")


AnswerLike = str | Answer | dict[str, Any]
Responder = Callable[[ReceivedRequest], AnswerLike | None]


class OpenAITestServer:
    """Serves ``POST /v1/chat/completions`` (plain and ``stream: true``) and ``GET /v1/models``
    on 127.0.0.1 (a free port by default). See the module docstring for which answer is sent.

    ``api_key`` makes it demand ``Authorization: Bearer <api_key>`` and answer 401 otherwise
    (quoting the key it got, as careless servers do). ``requests`` records every request.

    ``kind`` makes it behave as that server does where servers differ (toolmesh.llm.quirks):
    ``"llama-cpp-python"`` says ``owned_by: "me"`` and answers HTTP 500 to an assistant message
    with ``content: null`` and to a ``json_schema`` response format, as llama-cpp-python's
    server does; ``"openai"`` (the default) takes both. ``escaping`` makes it count the prompt
    the way a server that HTML-escapes messages does (llama-cpp-python's
    ``chatml-function-calling`` format): a character a token, after escaping.
    """

    def __init__(self, answers: Iterable[AnswerLike] = (), *, respond: Responder | None = None,
                 rules: Sequence[tuple[str, AnswerLike]] = (), default: AnswerLike | None = None,
                 api_key: str | None = None, host: str = "127.0.0.1", port: int = 0,
                 kind: str = "openai", escaping: bool = False,
                 honor_max_tokens: bool = False,
                 embed: Callable[[str], list[float]] | None = None) -> None:
        self.kind = kind
        #: ``POST /v1/embeddings`` answers each input with ``embed(text)`` (``None``: 404)
        self.embed = embed
        #: a whole (not streamed) text answer stops at ``max_tokens`` words, ``"length"``
        self.honor_max_tokens = honor_max_tokens
        self.escaping = escaping
        self._answers: deque[Answer] = deque(Answer.of(a) for a in answers)
        self._respond = respond
        self._rules = [(re.compile(p, re.DOTALL), Answer.of(a)) for p, a in rules]
        self._default = None if default is None else Answer.of(default)
        self.api_key = api_key
        self.host, self.port = host, port
        self.requests: list[ReceivedRequest] = []
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    def add(self, *answers: AnswerLike) -> None:
        """Queue more answers."""
        self._answers.extend(Answer.of(a) for a in answers)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/embeddings", self._embeddings)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.base_url = f"http://{host}:{port}/v1"

    async def close(self) -> None:
        self._closing.set()  # release hanging answers first, so shutdown does not wait on them
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _pick(self, request: ReceivedRequest) -> Answer | None:
        if self._respond is not None:
            chosen = self._respond(request)
            if chosen is not None:
                return Answer.of(chosen)
        for pattern, answer in self._rules:
            if pattern.search(request.prompt):
                return answer
        if self._answers:
            return self._answers.popleft()
        return self._default

    def _refused(self, body: dict[str, Any]) -> str | None:
        """What a server of this kind would refuse in ``body`` (as its error message)."""
        if self.kind != "llama-cpp-python":
            return None
        for i, m in enumerate(body["messages"]):
            if isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None:
                return (f"1 validation error: ('body', 'messages', {i}, "
                        "'ChatCompletionRequestAssistantMessage', 'content') Input should be a "
                        "valid string")
        form = body.get("response_format")
        if isinstance(form, dict) and form.get("type") not in (None, "text", "json_object"):
            return ("1 validation error: ('body', 'response_format', 'type') Input should be "
                    "'text' or 'json_object'")
        return None

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(ReceivedRequest(request.method, request.path,
                                             dict(request.headers), body, None))
        if self.embed is None:
            return _error(404, "this server serves no embeddings")
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        return web.json_response({"object": "list", "model": body.get("model"), "data": [
            {"object": "embedding", "index": i, "embedding": self.embed(t)}
            for i, t in enumerate(texts)]})

    async def _models(self, request: web.Request) -> web.Response:
        owner = {"llama-cpp-python": "me", "openai": "openai"}.get(self.kind, self.kind)
        return web.json_response({"object": "list",
                                  "data": [{"id": "test-model", "object": "model",
                                            "owned_by": owner}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.text()
        try:
            body: Any = json.loads(raw)
        except json.JSONDecodeError:
            body = raw
        peername = request.transport.get_extra_info("peername") if request.transport else None
        received = ReceivedRequest(request.method, request.path, dict(request.headers), body,
                                   tuple(peername[:2]) if peername else None)
        self.requests.append(received)
        if self.api_key is not None and received.authorization != f"Bearer {self.api_key}":
            given = (received.authorization or "").removeprefix("Bearer ")
            return _error(401, f"Incorrect API key provided: {given}.", code="invalid_api_key")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "the body must be a JSON object with 'messages'")
        refused = self._refused(body)
        if refused is not None:
            return _error(500, refused)
        answer = Answer(text="x") if body.get("max_tokens") == 1 else self._pick(received)
        if answer is None:
            return _error(500, "the OpenAI test server has no answer scripted for this request")
        if answer.hang:
            await self._closing.wait()
            return _error(503, "the test server closed while hanging")
        if answer.body is not None:
            return web.Response(status=answer.status, text=answer.body,
                                content_type=answer.content_type)
        if answer.status >= 400:
            return _error(answer.status, answer.error or "scripted error")
        model = str(body.get("model") or "test-model")
        usage = _usage(answer, received, escaping=self.escaping) if answer.usage else None
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return await self._stream(request, answer, model, usage if include_usage else None)
        calls = _calls(answer)
        text, finish = answer.text, answer.finish_reason or ("tool_calls" if calls else "stop")
        limit = body.get("max_tokens")
        if self.honor_max_tokens and isinstance(limit, int) and not calls \
                and len(_PIECES.findall(text)) > limit:
            text, finish = "".join(_PIECES.findall(text)[:limit]), "length"
        message: dict[str, Any] = {"role": "assistant",
                                   "content": text if text or not calls else None}
        if calls:
            message["tool_calls"] = calls
        payload: dict[str, Any] = {
            "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "finish_reason": finish, "message": message}]}
        if usage is not None:
            payload["usage"] = usage
        return web.json_response(payload)

    async def _stream(self, request: web.Request, answer: Answer, model: str,
                      usage: dict[str, int] | None) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)

        async def event(data: dict[str, Any] | str) -> None:
            text = data if isinstance(data, str) else json.dumps(data)
            await response.write(f"data: {text}\n\n".encode())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"id": "chatcmpl-test", "object": "chat.completion.chunk",
                    "created": int(time.time()), "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        await response.write(b": a comment line, which clients must skip\n\n")
        await event(chunk({"role": "assistant", "content": ""}))
        pieces = answer.chunks if answer.chunks is not None else _PIECES.findall(answer.text)
        for piece in pieces:
            await event(chunk({"content": piece}))
        calls = _calls(answer)
        for index, call in enumerate(calls):
            await event(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                               "function": {"name": call["function"]["name"],
                                                            "arguments": ""}}]}))
            arguments = call["function"]["arguments"]
            for start in range(0, len(arguments), 7):  # a few characters at a time
                await event(chunk({"tool_calls": [{"index": index, "function": {
                    "arguments": arguments[start:start + 7]}}]}))
        if answer.stream_error is not None:
            await event({"error": {"message": answer.stream_error, "type": "server_error"}})
            await response.write_eof()
            return response
        await event(chunk({}, answer.finish_reason or ("tool_calls" if calls else "stop")))
        if usage is not None:
            await event({"id": "chatcmpl-test", "object": "chat.completion.chunk",
                         "created": int(time.time()), "model": model, "choices": [],
                         "usage": usage})
        await event("[DONE]")
        await response.write_eof()
        return response


def _calls(answer: Answer) -> list[dict[str, Any]]:
    """The answer's tool calls in OpenAI's shape."""
    out = []
    for i, call in enumerate(answer.tool_calls):
        arguments = call.get("arguments", {})
        out.append({"id": call.get("id", f"call_{i}"), "type": "function",
                    "function": {"name": call["name"],
                                 "arguments": arguments if isinstance(arguments, str)
                                 else json.dumps(arguments)}})
    return out


def _usage(answer: Answer, request: ReceivedRequest, *, escaping: bool = False
           ) -> dict[str, int]:
    prompt = answer.prompt_tokens
    if prompt is None and escaping:
        prompt = sum(len(html.escape(str(m.get("content") or ""))) for m in request.messages)
    if prompt is None:
        prompt = sum(len(str(m.get("content", "")).split()) for m in request.messages)
    completion = answer.completion_tokens
    if completion is None:
        completion = len(answer.text.split())
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def _error(status: int, message: str, *, code: str | None = None) -> web.Response:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return web.json_response({"error": {"message": message, "type": kind, "param": None,
                                        "code": code}}, status=status)


def load_answers_file(path: str | Path) -> dict[str, Any]:
    """The :class:`OpenAITestServer` keyword arguments an answers file describes."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, list):
        return {"answers": data}
    rules = [(r["match"], r["response"]) for r in data.get("rules", [])]
    return {"answers": data.get("answers", []), "rules": rules, "default": data.get("default")}


async def _serve(args: argparse.Namespace) -> None:
    from toolmesh.runtime import wait_for_signal

    options = load_answers_file(args.answers_file) if args.answers_file else {}
    async with OpenAITestServer(**options, api_key=args.api_key, host=args.host,
                                port=args.port) as server:
        print(f"listening on {server.base_url}", flush=True)
        await wait_for_signal()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 (default): a free port")
    parser.add_argument("--answers-file", help="JSON answers (see the module docstring)")
    parser.add_argument("--api-key", help="demand this bearer token")
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
