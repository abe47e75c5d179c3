"""The prompt service: render a named template, ask text-completion, answer (TrustGraph's wire).

Request ``{"id": "<template id>", "terms": {"<name>": "<JSON text>"}, "streaming": bool}``;
response ``{"error", "text", "object", "end_of_stream", "in_token", "out_token", "model"}``
(``object`` is JSON text, for templates of response-type ``json``).

It talks to text-completion only through that service's wire format on the bus —
request ``{"system", "prompt", "streaming"}``, response ``{"error", "response", "in_token",
"out_token", "model", "end_of_stream"}`` — so any text-completion implementation will do.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from types import MappingProxyType
from typing import Any

from toolmesh.bus.base import DEFAULT_CONCURRENCY, Bus
from toolmesh.config.client import ConfigSnapshot, ConfigWatcher
from toolmesh.prompt.defaults import DEFAULT_TEMPLATES
from toolmesh.prompt.templates import (
    CONFIG_TYPE,
    PromptError,
    PromptTemplate,
    extract_json,
)
from toolmesh.rpc.client import DEFAULT_TIMEOUT, RequestClient, RpcClient
from toolmesh.rpc.service import Reply, Service
from toolmesh.schema.json_text import JsonTextError, NotJson, loads

log = logging.getLogger("toolmesh.prompt")

PROMPT_REQUEST_QUEUE = "request:tg:prompt:default"
PROMPT_RESPONSE_QUEUE = "response:tg:prompt:default"
TEXT_COMPLETION_REQUEST_QUEUE = "request:tg:text-completion:default"
TEXT_COMPLETION_RESPONSE_QUEUE = "response:tg:text-completion:default"


def response(*, text: str | None = None, object: str | None = None, end_of_stream: bool = True,
             usage: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A prompt response with every field present, as TrustGraph's clients expect."""
    usage = usage or {}
    return {"error": None, "text": text, "object": object, "end_of_stream": end_of_stream,
            "in_token": usage.get("in_token"), "out_token": usage.get("out_token"),
            "model": usage.get("model")}


def encode_terms(variables: Mapping[str, Any]) -> dict[str, str]:
    """Template variables as TrustGraph sends them: every value JSON-encoded."""
    return {k: json.dumps(v, ensure_ascii=False) for k, v in variables.items()}


def decode_terms(terms: Any) -> dict[str, Any]:
    """The template variables of a request's ``terms``.

    Values are JSON text by convention; a value that is not JSON text (a plain string from a
    lenient client, or an already decoded list or object) is taken as it is. JSON text Python
    cannot decode safely (nested too deep, an integer too long, lone surrogates) is refused.
    """
    if terms is None:
        return {}
    if not isinstance(terms, dict):
        raise PromptError(f"'terms' must be an object of template variables, "
                          f"not {type(terms).__name__}")
    variables: dict[str, Any] = {}
    for name, value in terms.items():
        if isinstance(value, str):
            try:
                value = loads(value, what=f"term {name!r}")
            except NotJson:
                pass
            except JsonTextError as e:
                raise PromptError(str(e)) from None
        variables[name] = value
    return variables


class PromptService(Service):
    """Serves prompt requests from the default templates overlaid by config ``prompt`` items.

    Config changes apply to the next request without a restart. A config value that does not
    parse is logged and its key keeps the template it had (or the default); the other keys
    still apply. A template of response-type ``json`` is answered in one response even when
    streaming is asked for, because only the whole answer can be checked to be JSON.
    """

    error_type = "prompt-error"

    def __init__(
        self,
        bus: Bus,
        *,
        request_queue: str = PROMPT_REQUEST_QUEUE,
        response_queue: str = PROMPT_RESPONSE_QUEUE,
        text_completion_request_queue: str = TEXT_COMPLETION_REQUEST_QUEUE,
        text_completion_response_queue: str = TEXT_COMPLETION_RESPONSE_QUEUE,
        config_queues: dict[str, str] | None = None,
        config_timeout: float = 30.0,
        id: str = "prompt",
        concurrency: int = DEFAULT_CONCURRENCY,
        timeout: float = 600.0,
    ) -> None:
        super().__init__(bus, request_queue=request_queue, response_queue=response_queue,
                         subscription=id, concurrency=concurrency)
        self.id = id
        self.timeout = timeout
        self._llm = RequestClient(bus, request_queue=text_completion_request_queue,
                                  response_queue=text_completion_response_queue)
        self._watcher = ConfigWatcher(bus, types=[CONFIG_TYPE], on_change=self._apply_config,
                                      timeout=config_timeout, **(config_queues or {}))
        self._templates: Mapping[str, PromptTemplate] = DEFAULT_TEMPLATES
        self._config_version = -1
        self._config_applied = asyncio.Condition()

    @property
    def templates(self) -> Mapping[str, PromptTemplate]:
        """The templates in effect now: id -> template (read-only)."""
        return self._templates

    @property
    def config_version(self) -> int:
        """The config version last applied; -1 before the config service answered."""
        return self._config_version

    async def wait_for_config(self, version: int) -> None:
        """Wait until config ``version`` (e.g. the one a put returned) or a later one applies."""
        async with self._config_applied:
            await self._config_applied.wait_for(lambda: self._config_version >= version)

    async def start(self) -> None:
        """Start the text-completion client and the config watcher, then serve.

        If the config service is not up, this returns after ``config_timeout`` and serves the
        defaults until the config service announces itself.
        """
        await self._llm.start()
        await self._watcher.start()
        await super().start()

    async def stop(self) -> None:
        """Stop serving (finishing requests in flight), then the watcher and the client."""
        await super().stop()
        await self._watcher.stop()
        await self._llm.stop()

    def error_response(self, error: dict[str, str]) -> dict[str, Any]:
        return {**response(), "error": error}

    async def _apply_config(self, snapshot: ConfigSnapshot) -> None:
        templates = dict(DEFAULT_TEMPLATES)
        for key, value in snapshot.of(CONFIG_TYPE).items():
            try:
                templates[key] = PromptTemplate.from_config(key, value)
            except PromptError as e:
                kept = self._templates.get(key)
                if kept is not None:
                    templates[key] = kept
                log.warning("config %s/%s (version %d) not applied, %s: %s", CONFIG_TYPE, key,
                            snapshot.version,
                            "keeping the template it had" if kept else "no such template", e.message)
        async with self._config_applied:
            self._templates = MappingProxyType(templates)
            self._config_version = snapshot.version
            self._config_applied.notify_all()

    def _template(self, template_id: Any) -> PromptTemplate:
        templates = self._templates  # one snapshot for this request
        template = templates.get(template_id) if isinstance(template_id, str) else None
        if template is None:
            raise PromptError(f"unknown prompt template {template_id!r}; known templates: "
                              + ", ".join(sorted(templates)))
        return template

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        template = self._template(request.get("id"))
        system, prompt = template.render(decode_terms(request.get("terms")))
        streaming = request.get("streaming") is True and template.response_type == "text"
        body = {"system": system, "prompt": prompt, "streaming": streaming}
        pieces: list[str] = []
        usage: dict[str, Any] = {}
        # A non-streaming call reads a stream too, so that a text-completion service that
        # streams regardless is still answered in full.
        async with aclosing(self._llm.stream(body, timeout=self.timeout)) as upstreams:
            async for upstream in upstreams:
                usage.update({k: upstream[k] for k in ("in_token", "out_token", "model")
                              if upstream.get(k) is not None})
                piece = upstream.get("response")
                if not isinstance(piece, str) or not piece:
                    continue
                if streaming:
                    await reply(response(text=piece, end_of_stream=False))
                else:
                    pieces.append(piece)
        if streaming:
            await reply(response(text="", usage=usage))
        elif template.response_type == "json":
            await reply(response(object=extract_json("".join(pieces), template_id=template.id),
                                 usage=usage))
        else:
            await reply(response(text="".join(pieces), usage=usage))


class PromptClient(RpcClient):
    """Asks the prompt service to render a template and complete it.

    Errors raise :class:`toolmesh.RequestError` with the service's ``type`` (``prompt-error``,
    or the text-completion service's own) and message.
    """

    def __init__(self, bus: Bus, *, request_queue: str = PROMPT_REQUEST_QUEUE,
                 response_queue: str = PROMPT_RESPONSE_QUEUE,
                 subscription: str | None = None) -> None:
        self._rpc = RequestClient(bus, request_queue=request_queue,
                                  response_queue=response_queue, subscription=subscription)


    async def render_and_complete(self, id: str, variables: Mapping[str, Any], *,
                                  timeout: float | None = DEFAULT_TIMEOUT) -> str:
        """The LLM's answer to template ``id``: its text, or the JSON text for a json template."""
        pieces: list[str] = []
        async with aclosing(self._responses(id, variables, streaming=False,
                                            timeout=timeout)) as responses:
            async for r in responses:
                if r.get("object") is not None:
                    return str(r["object"])
                if isinstance(r.get("text"), str):
                    pieces.append(r["text"])
        return "".join(pieces)

    async def stream(self, id: str, variables: Mapping[str, Any], *,
                     timeout: float | None = DEFAULT_TIMEOUT) -> AsyncIterator[str]:
        """The answer piece by piece as the LLM writes it (empty pieces skipped)."""
        async with aclosing(self._responses(id, variables, streaming=True,
                                            timeout=timeout)) as responses:
            async for r in responses:
                piece = r.get("object") if r.get("object") is not None else r.get("text")
                if isinstance(piece, str) and piece:
                    yield piece

    def _responses(self, id: str, variables: Mapping[str, Any], *, streaming: bool,
                   timeout: float | None) -> AsyncIterator[dict[str, Any]]:
        return self._rpc.stream({"id": id, "terms": encode_terms(variables),
                                 "streaming": streaming}, timeout=timeout)
