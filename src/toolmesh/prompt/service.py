"""The prompt service: render a named template, ask text-completion, answer (TrustGraph's wire).

Request ``{"id": "<template id>", "terms": {"<name>": "<JSON text>"}, "streaming": bool,
"workspace": "<name>"}``; response ``{"error", "text", "object", "end_of_stream", "in_token",
"out_token", "model"}`` (``object`` is JSON text, for templates of response-type ``json``).
``variables`` (the values themselves, as TrustGraph's clients send them to its gateway) may
stand for ``terms``. A request is served from its ``workspace``'s templates (default: the
service's); nothing of another workspace is used or named.

``"operation": "render"`` (toolmesh's own) renders without asking the LLM and answers
``{"error": null, "system", "prompt", "end_of_stream": true, ...}`` (the other fields ``null``):
of the template ``id``, or of a draft ``"template": {"prompt", "system"?, "response-type"?}``
(text being edited, not stored) — the draft gets the workspace's system prompt when it has
none of its own, as a stored template would. So an editor can show what the LLM would be sent.

A request may carry limits for the LLM's answer — ``max_tokens``, ``stop``, ``temperature`` —
passed on to text-completion. A **chat request** (toolmesh's own, :mod:`toolmesh.llm.chat`)
carries ``messages`` and may carry ``tools``, ``tool_choice`` and ``response_schema``: the
template ``id`` (optional) is rendered into the system message put before them, and the last
response adds the reply's ``tool_calls`` and ``finish_reason``. ``{"operation":
"capabilities"}`` is passed to text-completion as it is: which tool-calling strategy its LLM
takes.

It talks to text-completion only through that service's wire format on the bus —
request ``{"system", "prompt", "streaming"}``, response ``{"error", "response", "in_token",
"out_token", "model", "end_of_stream"}`` — so any text-completion implementation will do.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import Any

from toolmesh.bus.base import DEFAULT_CONCURRENCY, Bus
from toolmesh.config.client import ConfigSnapshot
from toolmesh.config.service import DEFAULT_WORKSPACE
from toolmesh.config.workspaces import WorkspaceWatcher, request_workspace
from toolmesh.errors import RequestError, RequestTimeout, ToolmeshError
from toolmesh.llm.base import Completion, CompletionStream
from toolmesh.llm.chat import (
    ChatMessage,
    ChatRequest,
    limits_from_wire,
    limits_to_wire,
    request_from_wire,
    request_to_wire,
)
from toolmesh.llm.service import completion_of
from toolmesh.llm.usage import record
from toolmesh.prompt.defaults import DEFAULT_TEMPLATES
from toolmesh.prompt.layout import SHIPPED, Prompts, load
from toolmesh.prompt.renderer import RenderPool
from toolmesh.prompt.sandbox import RenderLimits
from toolmesh.prompt.templates import (
    CONFIG_TYPE,
    PromptError,
    PromptTemplate,
    extract_json,
)
from toolmesh.rpc.client import DEFAULT_TIMEOUT, RequestClient, RpcClient
from toolmesh.rpc.service import Reply, Service
from toolmesh.schema.json_text import JsonTextError, NotJson, check, loads

log = logging.getLogger("toolmesh.prompt")

PROMPT_REQUEST_QUEUE = "request:tg:prompt:default"
PROMPT_RESPONSE_QUEUE = "response:tg:prompt:default"
TEXT_COMPLETION_REQUEST_QUEUE = "request:tg:text-completion:default"
TEXT_COMPLETION_RESPONSE_QUEUE = "response:tg:text-completion:default"


def response(*, text: str | None = None, object: str | None = None, end_of_stream: bool = True,
             usage: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A prompt response with every field present, as TrustGraph's clients expect."""
    usage = usage or {}
    out = {"error": None, "text": text, "object": object, "end_of_stream": end_of_stream,
           "in_token": usage.get("in_token"), "out_token": usage.get("out_token"),
           "model": usage.get("model")}
    # toolmesh's own: the counts were not reported; the answer was cut ("length")
    for name in ("token_source", "finish_reason"):
        if usage.get(name) is not None:
            out[name] = usage[name]
    return out


#: the fields of text-completion's responses that carry its usage, passed on
USAGE_FIELDS = ("in_token", "out_token", "model", "token_source")
#: fields of text-completion's last response a chat request's last response passes on
CHAT_FIELDS = ("tool_calls", "finish_reason")


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


def request_variables(request: Mapping[str, Any]) -> dict[str, Any]:
    """The template variables of a request: its ``variables`` as they are, if it has them
    (TrustGraph's gateway takes these and sends them on as ``terms``), else its ``terms``."""
    variables = request.get("variables")
    if variables is None:
        return decode_terms(request.get("terms"))
    if not isinstance(variables, dict):
        raise PromptError(f"'variables' must be an object of template variables, "
                          f"not {type(variables).__name__}")
    try:
        check(variables, what="'variables'")
    except JsonTextError as e:
        raise PromptError(str(e)) from None
    return dict(variables)


def _limits(request: Mapping[str, Any]) -> dict[str, Any]:
    """The answer's limits a prompt request carries, checked (a prompt-error if wrong)."""
    try:
        return limits_from_wire(request)
    except ToolmeshError as e:
        raise PromptError(e.message) from None


def _chat_request(request: Mapping[str, Any]) -> ChatRequest:
    """The chat part of a prompt request, checked (a prompt-error naming the wrong field)."""
    try:
        return request_from_wire(request)
    except ToolmeshError as e:
        raise PromptError(e.message) from None


class PromptService(Service):
    """Serves prompt requests from the shipped templates overlaid by the ``prompt`` items of
    the request's workspace (:mod:`toolmesh.prompt.layout`).

    A workspace's items are read at the first request naming it and followed from then on:
    changes apply to the next request without a restart. A config value that does not parse
    is logged and its key keeps the template it had (or the shipped one); the other keys still
    apply. A template of response-type ``json`` is answered in one response even when
    streaming is asked for, because only the whole answer can be checked to be JSON.
    ``workspace``: the one of requests that name none.

    Config templates are compiled and rendered in worker processes (:mod:`.renderer`), never
    on this service's event loop, within ``render_limits`` (time, size, memory): a template
    that passes one fails with a prompt-error naming it, and other workspaces' requests go on.
    The templates toolmesh ships render on the loop: their code is toolmesh's own.
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
        workspace: str = DEFAULT_WORKSPACE,
        id: str = "prompt",
        concurrency: int = DEFAULT_CONCURRENCY,
        timeout: float = 600.0,
        render_limits: RenderLimits | None = None,
    ) -> None:
        super().__init__(bus, request_queue=request_queue, response_queue=response_queue,
                         subscription=id, concurrency=concurrency)
        self.id = id
        self.timeout = timeout
        self.workspace = workspace
        self._llm = RequestClient(bus, request_queue=text_completion_request_queue,
                                  response_queue=text_completion_response_queue)
        self._watcher = WorkspaceWatcher(bus, types=[CONFIG_TYPE], on_change=self._apply_config,
                                         on_forget=self._forget_workspace,
                                         preload=(workspace,), timeout=config_timeout,
                                         **(config_queues or {}))
        #: workspace -> its prompts (each request is served from its own workspace's)
        self._workspaces: dict[str, Prompts] = {}
        self._config_applied = asyncio.Condition()
        self._renderer = RenderPool(limits=render_limits)

    @property
    def templates(self) -> Mapping[str, PromptTemplate]:
        """The templates in effect now in the default workspace: id -> template (read-only)."""
        return self.templates_of(self.workspace)

    def templates_of(self, workspace: str) -> Mapping[str, PromptTemplate]:
        """The templates in effect now in ``workspace`` (the shipped ones until it is loaded),
        each with the system prompt it is sent with."""
        return self._workspaces.get(workspace, SHIPPED).templates

    @property
    def config_version(self) -> int:
        """The config version last applied to the default workspace; -1 before the config
        service answered."""
        return self._workspaces.get(self.workspace, SHIPPED).version

    async def wait_for_config(self, version: int, *, workspace: str | None = None) -> None:
        """Wait until config ``version`` (e.g. the one a put returned) or a later one applies
        to ``workspace`` (default: the service's), loading it if no request has named it yet."""
        workspace = workspace or self.workspace
        await self._watcher.ensure(workspace)
        async with self._config_applied:
            await self._config_applied.wait_for(
                lambda: self._workspaces.get(workspace, SHIPPED).version >= version)

    async def start(self) -> None:
        """Start the text-completion client and the config watcher, then serve.

        If the config service is not up, this returns after ``config_timeout`` and serves the
        shipped templates until the config service answers.
        """
        await self._renderer.start()
        await self._llm.start()
        await self._watcher.start()
        await super().start()

    async def stop(self) -> None:
        """Stop serving (finishing requests in flight), then the watcher and the client."""
        await super().stop()
        await self._watcher.stop()
        await self._llm.stop()
        await self._renderer.stop()

    def error_response(self, error: dict[str, str]) -> dict[str, Any]:
        return {**response(), "error": error}

    async def _apply_config(self, snapshot: ConfigSnapshot) -> None:
        workspace = snapshot.workspace
        items = snapshot.of(CONFIG_TYPE)
        previous = self._workspaces.get(workspace, SHIPPED)
        # Compiling a hostile text can take seconds: the texts are compiled by a render worker
        # (those already compiled in the previous version are known good), then loaded.
        known = {t.prompt for t in previous.configured.values()} | {
            t.system for t in previous.configured.values()} | {previous.system}
        sources: dict[str, tuple[str, str, str]] = {}

        def collect(owner: str, part: str, source: str) -> None:
            if source not in known:
                sources.setdefault(source, (owner, part, source))

        load(items, version=snapshot.version, workspace=workspace, previous=previous,
             check=collect)
        errors = await self._renderer.check(list(sources.values()), tenant=workspace)
        broken = {source: error for source, error in zip(sources, errors, strict=True)
                  if error is not None}

        def check(owner: str, part: str, source: str) -> None:
            if (error := broken.get(source)) is not None:
                # the message names the item it was first found in; name this one
                raise PromptError(error.replace(sources[source][0], owner, 1))

        prompts = load(items, version=snapshot.version, workspace=workspace, previous=previous,
                       check=check)
        async with self._config_applied:
            if prompts.version < self._workspaces.get(workspace, SHIPPED).version:
                return  # a newer version was applied while this one was being compiled
            self._workspaces[workspace] = prompts
            self._config_applied.notify_all()
        log.info("config version %d: prompt templates of workspace %r: %s; system prompt %s",
                 snapshot.version, workspace, ", ".join(sorted(prompts.templates)),
                 "set" if prompts.system else "none")

    async def _forget_workspace(self, workspace: str) -> None:
        self._workspaces.pop(workspace, None)

    async def _prompts(self, workspace: str) -> Prompts:
        """``workspace``'s prompts, read at its first use; the shipped ones if the config
        service does not answer (as before it ever answered). Its refusal (a workspace name
        no store can hold) is the request's error."""
        try:
            await self._watcher.ensure(workspace)
        except RequestError as e:
            if not isinstance(e, RequestTimeout) and e.type != "service-unavailable":
                raise
            log.warning("config of workspace %r not loaded (%s): serving the shipped templates",
                        workspace, e.message)
        return self._workspaces.get(workspace, SHIPPED)

    async def _template(self, workspace: str, template_id: Any) -> PromptTemplate:
        prompts = await self._prompts(workspace)  # one snapshot for this request
        if not isinstance(template_id, str):
            template = None
        elif (template := prompts.templates.get(template_id)) is None and prompts.version >= 0:
            # The caller may have put the template a moment ago, and this service not have
            # applied the change yet (its push is on the way): read the config once more.
            try:
                await self._watcher.reload(workspace)
            except RequestError as e:
                log.warning("could not reload the prompt config of workspace %r: %s",
                            workspace, e.message)
            prompts = self._workspaces.get(workspace, prompts)
            template = prompts.templates.get(template_id)
        if template is None:
            # only this workspace's ids: another workspace's are not the caller's to see
            raise PromptError(f"unknown prompt template {template_id!r} in workspace "
                              f"{workspace!r}; known templates: "
                              + ", ".join(sorted(prompts.templates)))
        return template

    async def _draft(self, workspace: str, request: Mapping[str, Any]) -> PromptTemplate:
        """The draft template of a render request, with the workspace's system prompt when it
        has none of its own (as :func:`toolmesh.prompt.layout.load` gives a stored one)."""
        draft = request.get("template")
        if not isinstance(draft, dict):
            raise PromptError("'template' must be an object {\"prompt\", \"system\"?, "
                              f"\"response-type\"?}}, not {type(draft).__name__}")
        id = request.get("id")
        # the same parsing as a stored item's value: a draft is refused as a put would make
        # the prompt service refuse it
        template = PromptTemplate.from_config(id if isinstance(id, str) and id else "draft",
                                              json.dumps(draft, ensure_ascii=False),
                                              checked=True)  # compiled when rendered
        system = (await self._prompts(workspace)).system
        return template if template.system or not system else replace(template, system=system)

    async def _rendered(self, template: PromptTemplate, variables: Mapping[str, Any], *,
                        tenant: str) -> tuple[str, str]:
        """``(system, prompt)``: a template toolmesh ships (unchanged, with no configured
        system prompt in it) is its own code, not a tenant's, and renders here, as fast as it
        always did; any other goes to a render worker."""
        if DEFAULT_TEMPLATES.get(template.id) is template:
            return template.render(variables)
        return await self._renderer.render(template, variables, tenant=tenant)

    async def _render(self, workspace: str, request: Mapping[str, Any], reply: Reply) -> None:
        if request.get("template") is not None:
            template = await self._draft(workspace, request)
        else:
            template = await self._template(workspace, request.get("id"))
        system, prompt = await self._rendered(template, request_variables(request),
                                              tenant=workspace)
        await reply({**response(), "system": system, "prompt": prompt})

    async def _chat(self, workspace: str, request: Mapping[str, Any], reply: Reply) -> None:
        """A chat request: the template as the system message before the request's own, the
        rest passed on; the answer streamed back as text pieces, then the tool calls."""
        chat = _chat_request(request)
        if request.get("id") is not None:
            template = await self._template(workspace, request.get("id"))
            system, prompt = await self._rendered(template, request_variables(request),
                                                  tenant=workspace)
            instructions = "\n\n".join(part for part in (system, prompt) if part)
            chat = replace(chat, messages=(ChatMessage(role="system", content=instructions),
                                           *chat.messages))
        usage: dict[str, Any] = {}
        pieces: list[str] = []
        last: Mapping[str, Any] = {}
        async with aclosing(self._llm.stream(request_to_wire(chat),
                                             timeout=self.timeout)) as upstreams:
            async for upstream in upstreams:
                usage.update({k: upstream[k] for k in USAGE_FIELDS
                              if upstream.get(k) is not None})
                if upstream.get("end_of_stream", True) is not False:
                    last = upstream
                piece = upstream.get("response")
                if not isinstance(piece, str) or not piece:
                    continue
                if chat.stream:
                    await reply(response(text=piece, end_of_stream=False))
                else:
                    pieces.append(piece)
        await reply({**response(text="" if chat.stream else "".join(pieces), usage=usage),
                     **{k: last.get(k) for k in CHAT_FIELDS}})

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        workspace = request_workspace(request, default=self.workspace)
        operation = request.get("operation")
        if operation == "render":
            await self._render(workspace, request, reply)
            return
        if operation in ("capabilities", "embeddings"):
            await reply(await self._llm.request(dict(request), timeout=self.timeout))
            return
        if operation is not None:
            raise PromptError(f"unknown operation {operation!r}: a prompt request has no "
                              "'operation' (render and complete), 'render' (render only), "
                              "'capabilities' or 'embeddings'")
        if request.get("messages") is not None:
            await self._chat(workspace, request, reply)
            return
        template = await self._template(workspace, request.get("id"))
        system, prompt = await self._rendered(template, request_variables(request),
                                              tenant=workspace)
        streaming = request.get("streaming") is True and template.response_type == "text"
        body = {"system": system, "prompt": prompt, "streaming": streaming,
                **limits_to_wire(**_limits(request))}
        pieces: list[str] = []
        usage: dict[str, Any] = {}
        # A non-streaming call reads a stream too, so that a text-completion service that
        # streams regardless is still answered in full.
        async with aclosing(self._llm.stream(body, timeout=self.timeout)) as upstreams:
            async for upstream in upstreams:
                usage.update({k: upstream[k] for k in (*USAGE_FIELDS, "finish_reason")
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

    The token usage of each answer is recorded to the caller's meter, if it has one
    (:mod:`toolmesh.llm.usage`: an agent dialog adds up the usage of all its LLM calls).

    Errors raise :class:`toolmesh.RequestError` with the service's ``type`` (``prompt-error``,
    or the text-completion service's own) and message.
    """

    def __init__(self, bus: Bus, *, request_queue: str = PROMPT_REQUEST_QUEUE,
                 response_queue: str = PROMPT_RESPONSE_QUEUE,
                 subscription: str | None = None) -> None:
        self._rpc = RequestClient(bus, request_queue=request_queue,
                                  response_queue=response_queue, subscription=subscription)


    async def render_and_complete(self, id: str, variables: Mapping[str, Any], *,
                                  timeout: float | None = DEFAULT_TIMEOUT,
                                  workspace: str | None = None,
                                  limits: Mapping[str, Any] | None = None) -> str:
        """The LLM's answer to template ``id`` of ``workspace`` (default: the service's): its
        text, or the JSON text for a json template. ``limits``: ``max_tokens``, ``stop``,
        ``temperature`` for the answer."""
        pieces: list[str] = []
        async with aclosing(self._responses(id, variables, streaming=False, timeout=timeout,
                                            workspace=workspace, limits=limits)) as responses:
            async for r in responses:
                record(r)
                if r.get("object") is not None:
                    return str(r["object"])
                if isinstance(r.get("text"), str):
                    pieces.append(r["text"])
        return "".join(pieces)

    def stream(self, id: str, variables: Mapping[str, Any], *,
               timeout: float | None = DEFAULT_TIMEOUT, workspace: str | None = None,
               limits: Mapping[str, Any] | None = None) -> CompletionStream:
        """The answer piece by piece as the LLM writes it (empty pieces skipped); once the
        stream is exhausted, ``completion`` holds why it ended (``finish_reason``) and the
        usage."""
        return CompletionStream(self._stream(id, variables, timeout=timeout,
                                             workspace=workspace, limits=limits))

    async def _stream(self, id: str, variables: Mapping[str, Any], *, timeout: float | None,
                      workspace: str | None, limits: Mapping[str, Any] | None
                      ) -> AsyncIterator[str | Completion]:
        async with aclosing(self._responses(id, variables, streaming=True, timeout=timeout,
                                            workspace=workspace, limits=limits)) as responses:
            async for r in responses:
                record(r)
                piece = r.get("object") if r.get("object") is not None else r.get("text")
                if isinstance(piece, str) and piece:
                    yield piece
                if r.get("end_of_stream", True) is not False:
                    yield completion_of({**r, "response": ""})

    def chat(self, chat: ChatRequest, *, id: str | None = None,
             variables: Mapping[str, Any] | None = None,
             timeout: float | None = DEFAULT_TIMEOUT,
             workspace: str | None = None) -> CompletionStream:
        """The answer to a chat request, piece by piece; template ``id`` (rendered with
        ``variables``) goes first as the system message. ``completion`` holds the tool calls,
        the finish reason and the usage once the stream is exhausted."""
        body: dict[str, Any] = request_to_wire(chat)
        if id is not None:
            body["id"] = id
            body["terms"] = encode_terms(variables or {})
        if workspace is not None:
            body["workspace"] = workspace
        return CompletionStream(self._chat(body, timeout))

    async def _chat(self, body: dict[str, Any], timeout: float | None
                    ) -> AsyncIterator[str | Completion]:
        async with aclosing(self._rpc.stream(body, timeout=timeout)) as responses:
            async for r in responses:
                record(r)
                text = r.get("text")
                if isinstance(text, str) and text:
                    yield text
                if r.get("end_of_stream", True) is not False:
                    yield completion_of({**r, "response": ""})

    async def capabilities(self, *, timeout: float | None = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """Which tool-calling strategy the LLM behind the prompt service takes
        (:meth:`toolmesh.llm.service.TextCompletionService.capabilities`)."""
        return await self._rpc.request({"operation": "capabilities"}, timeout=timeout)

    async def embed(self, texts: Sequence[str], *,
                    timeout: float | None = DEFAULT_TIMEOUT) -> list[list[float]]:
        """Embedding vectors of ``texts`` from the LLM's server, through the text-completion
        service (:mod:`toolmesh.llm.embeddings`)."""
        answer = await self._rpc.request({"operation": "embeddings", "input": list(texts)},
                                         timeout=timeout)
        vectors = answer.get("embeddings")
        if not isinstance(vectors, list):
            raise PromptError("the text-completion service answered embeddings without vectors")
        return vectors

    def _responses(self, id: str, variables: Mapping[str, Any], *, streaming: bool,
                   timeout: float | None, workspace: str | None,
                   limits: Mapping[str, Any] | None = None) -> AsyncIterator[dict[str, Any]]:
        body: dict[str, Any] = {"id": id, "terms": encode_terms(variables),
                                "streaming": streaming, **(limits or {})}
        if workspace is not None:
            body["workspace"] = workspace
        return self._rpc.stream(body, timeout=timeout)
