"""Validation of the config types toolmesh understands, applied to every put.

``tool-service``, ``tool``, ``mcp`` and ``settings`` values must be JSON objects with the
fields their type requires (TrustGraph's formats; the README and docs/tool-services.md); a
``tool`` or ``tool-service`` item with ``"enabled": false`` needs no other field (it switches
off the item, or the announced one, of its key). Any other type is stored as given. A failure names the item and the field, and the whole put is refused
(nothing is stored). Values Python cannot decode safely (nested too
deep, integers too long) or that hold lone surrogates are refused like any other bad value.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from toolmesh.bus.queue_id import parse_queue_id
from toolmesh.config.errors import ConfigError
from toolmesh.config.stdio import DENY_ALL, StdioAllowList
from toolmesh.errors import QueueIdError
from toolmesh.schema.flow import FLOW_ID_RULE, valid_flow_id
from toolmesh.schema.json_text import JsonTextError, loads
from toolmesh.schema.mcp_auth import AuthSettingsError, OAuthSettings
from toolmesh.schema.tool_arguments import argument_problem
from toolmesh.schema.tool_types import not_available
from toolmesh.urls import is_secret_name, mask_url

#: tool type -> the fields it needs besides type/name/description (TrustGraph's query types
#: are refused with their own message: no service here implements them, see schema.tool_types)
TOOL_TYPES: dict[str, tuple[str, ...]] = {
    "text-completion": (),
    "prompt": ("template",),
    "mcp-tool": ("mcp-tool",),
    "tool-service": ("service",),
}

MCP_TRANSPORTS = ("streamable-http", "sse", "stdio")
#: who must approve a call (toolmesh.approvals.policy; kept here as text: config must not
#: import the agent's subsystems)
APPROVAL_VALUES = ("always", "never", "auto")


class _Item:
    """One value under validation; ``fail`` names it and the field in the error."""

    def __init__(self, type: str, key: str, value: Any) -> None:
        self.where = f"{type}/{key}"
        self.value = value

    def fail(self, field: str | None, problem: str) -> ConfigError:
        at = f"field {field!r} of {self.where}" if field else self.where
        return ConfigError(f"invalid {at}: {problem}")

    def string(self, field: str, *, required: bool = True) -> str | None:
        v = self.value.get(field)
        if v is None:
            if required:
                raise self.fail(field, "is required")
            return None
        if not isinstance(v, str) or (required and not v.strip()):
            # a secret field's value is not repeated in the error (errors are logged)
            shown = type_name(v) if is_secret_name(field) else json.dumps(v)
            raise self.fail(field, f"must be a non-empty string, not {shown}")
        return v

    def string_list(self, field: str) -> None:
        v = self.value.get(field)
        if v is not None and not (isinstance(v, list) and all(isinstance(s, str) for s in v)):
            raise self.fail(field, f"must be a list of strings, not {json.dumps(v)}")

    def queue(self, field: str) -> None:
        q = self.string(field)
        try:
            parsed = parse_queue_id(q)  # type: ignore[arg-type]
        except QueueIdError as e:
            raise self.fail(field, e.message) from None
        if parsed.cls == "notify":
            # broadcast queues (config pushes, announcements) are not a service's to answer
            # on: a call sent there would reach every listener as a notice
            raise self.fail(field, f"{q!r} is a notify (broadcast) queue; a tool service "
                                   "answers on request and response queues")

    def approval(self) -> None:
        """The optional ``approval`` policy (toolmesh.approvals.policy)."""
        value = self.value.get("approval")
        if value is not None and value not in APPROVAL_VALUES:
            raise self.fail("approval", f"must be one of {', '.join(APPROVAL_VALUES)}, not "
                                        f"{json.dumps(value)}")

    def disabled(self) -> bool:
        """Whether the item is switched off (``"enabled": false``): then it needs no other
        field (it only hides an announced item of its key, or one of its own)."""
        enabled = self.value.get("enabled", True)
        if not isinstance(enabled, bool):
            raise self.fail("enabled", f"must be true or false, not {json.dumps(enabled)}")
        return not enabled


def _parse(type: str, key: str, raw: str) -> _Item:
    item = _Item(type, key, None)
    if not isinstance(raw, str):
        raise item.fail(None, f"the value must be JSON text, not {type_name(raw)}")
    try:
        item.value = loads(raw, what="the value")
    except JsonTextError as e:
        raise item.fail(None, str(e)) from None
    if not isinstance(item.value, dict):
        raise item.fail(None, f"the value must be a JSON object, not {type_name(item.value)}")
    return item


def type_name(value: Any) -> str:
    """The JSON name of a Python value's type, for error messages."""
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(type(value), "?")


def _tool_service(item: _Item) -> None:
    if item.disabled():
        return
    item.string("id")
    item.queue("request-queue")
    item.queue("response-queue")
    params = item.value.get("config-params", [])
    if not isinstance(params, list):
        raise item.fail("config-params", "must be an array of {name, required}")
    for i, p in enumerate(params):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str) or not p["name"]:
            raise item.fail(f"config-params[{i}]", "must be an object with a non-empty 'name'")
        if not isinstance(p.get("required", False), bool):
            raise item.fail(f"config-params[{i}].required", "must be true or false")


def _tool(item: _Item) -> None:
    if item.disabled():
        return
    tool_type = item.string("type")
    item.string("name")
    item.string("description")
    unavailable = not_available(tool_type)  # type: ignore[arg-type]
    if unavailable is not None:
        raise item.fail("type", unavailable)
    if tool_type not in TOOL_TYPES:
        raise item.fail("type", f"unknown tool type {tool_type!r}; known types: "
                                + ", ".join(TOOL_TYPES))
    for field in TOOL_TYPES[tool_type]:
        item.string(field)
    item.string_list("group")
    item.string_list("applicable-states")
    item.string("state", required=False)
    item.approval()
    arguments = item.value.get("arguments", [])
    if not isinstance(arguments, list):
        raise item.fail("arguments", "must be an array of {name, type, description}")
    seen: set[str] = set()
    for i, a in enumerate(arguments):
        where = f"arguments[{i}]"
        if not isinstance(a, dict):
            raise item.fail(where, "must be an object with name, type and description")
        name = a.get("name")
        if not isinstance(name, str) or not name:
            raise item.fail(f"{where}.name", "is required")
        if name in seen:
            raise item.fail(f"{where}.name", f"duplicate argument {name!r}")
        seen.add(name)
        problem = argument_problem(a)
        if problem is not None:
            raise item.fail(f"{where}.{problem[0]}", problem[1])


def _mcp(item: _Item, stdio_allow: StdioAllowList) -> None:
    transport = item.value.get("transport", "streamable-http")
    if transport not in MCP_TRANSPORTS:
        raise item.fail("transport", f"{transport!r} is not one of " + ", ".join(MCP_TRANSPORTS))
    if transport == "stdio":
        command = item.string("command")
        if not stdio_allow.allows(command):
            raise ConfigError(stdio_allow.refusal(item.where, command))
        args = item.value.get("args", [])
        if not (isinstance(args, list) and all(isinstance(s, str) for s in args)):
            raise item.fail("args", "must be a list of strings")
        env = item.value.get("env", {})
        if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
            raise item.fail("env", "must be an object of strings")
    else:
        url = item.string("url")
        if not url.startswith(("http://", "https://")):  # type: ignore[union-attr]
            raise item.fail("url", f"must be an http:// or https:// URL, not {mask_url(url)!r}")
    item.string("remote-name", required=False)
    if not isinstance(item.value.get("sampling", False), bool):
        raise item.fail("sampling", "must be true or false")
    if item.value.get("reach", "any") not in ("any", "public"):  # mcp/addresses.py
        raise item.fail("reach", "must be any or public (the gateway sets public on an item "
                                 "put by a token without admin)")
    protocol = item.value.get("protocol", "handshake")
    if protocol not in ("handshake", "auto"):
        raise item.fail("protocol", f"must be handshake or auto, not {json.dumps(protocol)}")
    item.approval()
    token = item.string("auth-token", required=False)
    problem = header_value_problem(token) if token is not None else None
    if problem is not None:
        raise item.fail("auth-token", problem)
    auth = item.value.get("auth")
    if auth is not None:
        try:
            OAuthSettings.parse(auth)
        except AuthSettingsError as e:
            raise ConfigError(f"{item.where}: {e}") from None
        if token:
            raise item.fail("auth", "(OAuth) and 'auth-token' (a static token) cannot both "
                                    "be set: keep one")
        if transport == "stdio":
            raise item.fail("auth", "is for servers reached over HTTP; a stdio server takes "
                                    "its credentials in 'env'")


def header_value_problem(value: str) -> str | None:
    """Why ``value`` cannot be sent in an HTTP header (as ``Authorization: Bearer <value>``),
    or ``None``. The HTTP client refuses anything but ASCII, and a control character (a line
    break above all) would end the header early; the value itself is not repeated (a secret).
    """
    if all(" " <= c <= "~" for c in value):
        return None
    if not all(c <= "~" for c in value):
        return ("holds a character that is not ASCII (or a lone surrogate like \\ud800); "
                "it is sent in an HTTP header, which takes printable ASCII only")
    return ("holds a control character (such as a line break); it is sent in an HTTP "
            "header, which takes printable ASCII only")


def _flow(item: _Item) -> None:
    # the key becomes part of queue names (request:tg:agent:KEY) on every broker
    key = item.where.split("/", 1)[1]
    if not valid_flow_id(key):
        raise item.fail(None, f"{key!r} cannot name a flow: {FLOW_ID_RULE}")
    item.string("description", required=False)


def _settings(item: _Item) -> None:
    # settings/workspace: the workspace's own settings (toolmesh.registry.merge)
    accept = item.value.get("accept-announcements", True)
    if not isinstance(accept, bool):
        raise item.fail("accept-announcements", f"must be true or false, not "
                                                f"{json.dumps(accept)}")
    # how the workspace's dialogs ask for tool calls (toolmesh.agent.loop)
    calling = item.value.get("tool-calling", "auto")
    if calling not in ("auto", "native", "json", "react"):
        raise item.fail("tool-calling", f"must be auto, native, json or react, not "
                                        f"{json.dumps(calling)}")


VALIDATORS: dict[str, Callable[[_Item], None]] = {
    "tool-service": _tool_service,
    "tool": _tool,
    "flow": _flow,
    "settings": _settings,
}


def validate(type: str, key: str, value: str, *,
             stdio_allow: StdioAllowList = DENY_ALL) -> None:
    """Raise :class:`ConfigError` if ``value`` is not a valid item of ``type``.

    ``stdio_allow``: the commands ``stdio`` MCP items may run (the default: none).
    """
    if type == "mcp":
        _mcp(_parse(type, key, value), stdio_allow)
        return
    check = VALIDATORS.get(type)
    if check is not None:
        check(_parse(type, key, value))
