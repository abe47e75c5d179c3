"""What a tool service offers, declared in its class: its descriptor and its tools.

A tool service's config is two kinds of items: a ``tool-service`` item (the descriptor: its
queues and the config-params it reads) and one ``tool`` item per tool the agent may call
(name, description, arguments, the config-param values). Writing them by hand means keeping
them in step with the code; a :class:`ToolServiceDefinition` on the class keeps them beside
it instead::

    class WordCount(DynamicToolService):
        definition = ToolServiceDefinition(
            id="word-count",
            tools=[Tool("count-words", "Count the words in a text",
                        arguments=[Argument("text", "string", "The text", required=True)])])

``toolmesh tool-service register wordtools:WordCount`` writes the items it describes
(:meth:`ToolServiceDefinition.items`), and ``toolmesh run wordtools:WordCount`` needs no
``--topic`` (the definition's). The items are exactly what ``tg-put-config-item`` would store,
so TrustGraph's tools read them too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolmesh.errors import ToolmeshError
from toolmesh.tools.queues import resolve_queues

__all__ = ["Argument", "ConfigParam", "DefinitionError", "Tool", "ToolServiceDefinition"]


class DefinitionError(ToolmeshError):
    """A tool service's definition would make items the config service refuses."""

    def __init__(self, message: str) -> None:
        super().__init__(message, type="definition-error")


@dataclass(frozen=True, slots=True)
class Argument:
    """One argument the LLM passes: its JSON type, what it means, whether it must be given.

    ``schema``: further JSON Schema keywords for its value (``enum``, ``minimum``,
    ``items``...), shown to the LLM and checked before a call.
    """

    name: str
    type: str = "string"
    description: str = ""
    required: bool = False
    schema: Mapping[str, Any] = field(default_factory=dict)

    def item(self) -> dict[str, Any]:
        """The argument as it appears in a ``tool`` item's ``arguments``."""
        value: dict[str, Any] = {"name": self.name, "type": self.type,
                                 "description": self.description}
        if self.required:
            value["required"] = True
        return {**value, **self.schema}


@dataclass(frozen=True, slots=True)
class ConfigParam:
    """A value the service reads from each tool's config (the joke service's ``style``):
    one service can back several tools that differ only in these values."""

    name: str
    required: bool = False

    def item(self) -> dict[str, Any]:
        return {"name": self.name, "required": self.required}


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool the service backs, as the agent offers it.

    ``config``: this tool's config-param values (sent with every call of it); ``key``: its
    config key (default: ``name``); ``group``, ``applicable_states``, ``state``: as in a
    ``tool`` item (which dialogs offer it, and the state using it moves a dialog to).
    """

    name: str
    description: str
    arguments: Sequence[Argument] = ()
    config: Mapping[str, Any] = field(default_factory=dict)
    key: str | None = None
    group: Sequence[str] | None = None
    applicable_states: Sequence[str] | None = None
    state: str | None = None

    def item(self, service_id: str) -> dict[str, Any]:
        """The ``tool`` item: type ``tool-service``, naming the service ``service_id``."""
        value: dict[str, Any] = {"type": "tool-service", "name": self.name,
                                 "description": self.description, "service": service_id,
                                 **self.config,
                                 "arguments": [a.item() for a in self.arguments]}
        if self.group is not None:
            value["group"] = list(self.group)
        if self.applicable_states is not None:
            value["applicable-states"] = list(self.applicable_states)
        if self.state is not None:
            value["state"] = self.state
        return value


#: fields of a ``tool`` item that a tool's config values may not overwrite
_TOOL_FIELDS = frozenset({"type", "name", "description", "service", "arguments", "group",
                          "applicable-states", "state"})


@dataclass(frozen=True, slots=True)
class ToolServiceDefinition:
    """A tool service's descriptor and tools. ``id``: the key of its ``tool-service`` item
    (and the id replicas share); ``topic``: its queues are ``non-persistent://tg/request/TOPIC``
    and ``.../response/TOPIC`` (default: ``id``)."""

    id: str
    tools: Sequence[Tool] = ()
    config_params: Sequence[ConfigParam] = ()
    topic: str | None = None

    def descriptor(self, *, id: str | None = None, topic: str | None = None,
                   request_queue: str | None = None,
                   response_queue: str | None = None) -> dict[str, Any]:
        """The ``tool-service`` item; the keywords override the definition's id and queues
        (as ``toolmesh run --id/--topic/--request-queue`` do)."""
        if request_queue is None and response_queue is None:
            topic = topic or self.topic or self.id
        request, response = resolve_queues(topic=topic, request_queue=request_queue,
                                           response_queue=response_queue)
        return {"id": id or self.id, "request-queue": request, "response-queue": response,
                "config-params": [p.item() for p in self.config_params]}

    def items(self, *, id: str | None = None, topic: str | None = None,
              request_queue: str | None = None,
              response_queue: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
        """Every config item the service needs, ``{(type, key): value}``, checked as the
        config service checks a put; :class:`DefinitionError` names what is wrong."""
        service_id = id or self.id
        descriptor = self.descriptor(id=id, topic=topic, request_queue=request_queue,
                                     response_queue=response_queue)
        items = {("tool-service", service_id): descriptor}
        for tool in self.tools:
            key = tool.key or tool.name
            if ("tool", key) in items:
                raise DefinitionError(f"two tools of {service_id!r} have the key {key!r}")
            items[("tool", key)] = tool.item(service_id)
        self._check(items)
        return items

    def _check(self, items: Mapping[tuple[str, str], dict[str, Any]]) -> None:
        params = {p.name: p for p in self.config_params}
        for tool in self.tools:
            where = f"tool {tool.name!r}"
            clash = sorted(set(tool.config) & _TOOL_FIELDS)
            if clash:
                raise DefinitionError(f"{where}: config value(s) {', '.join(clash)} would "
                                      "overwrite fields of its tool item; rename the param")
            unknown = sorted(set(tool.config) - set(params))
            if unknown:
                raise DefinitionError(
                    f"{where}: config value(s) {', '.join(unknown)} are not config_params of "
                    f"the service (it has: {', '.join(params) or 'none'})")
            missing = sorted(n for n, p in params.items() if p.required and n not in tool.config)
            if missing:
                raise DefinitionError(f"{where}: the required config param(s) "
                                      f"{', '.join(missing)} have no value in its config")
        # imported here: the checks load jsonschema, which a running service never needs
        from toolmesh.config.errors import ConfigError
        from toolmesh.config.validation import validate

        for (type, key), value in items.items():
            try:
                validate(type, key, json.dumps(value))
            except ConfigError as e:
                raise DefinitionError(e.message) from None
