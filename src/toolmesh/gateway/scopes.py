"""What each gateway request needs: the capability, and whether it reaches one workspace.

One table for REST and WebSocket alike (docs/security.md shows it):

=========================================  ==========================================
request                                    needs
=========================================  ==========================================
config get, list, getvalues, config,       ``config:read`` in the workspace
history; flow (list-flows, get-flow)
config put, delete                         ``config:write`` in the workspace
config put of a secret or a stdio item     ``config:write`` and ``admin`` in the workspace
agent, agent-tools, agent-services,        ``agent`` in the workspace
dialogs, prompt, text-completion
prompt render of a draft ``template``      ``config:write`` in the workspace
approvals (list, watch, approve, deny,     ``approve`` in the workspace
  answer)
mcp-tool, tool-service                     ``tools:invoke`` in the workspace
token (create, list, revoke)               ``admin`` (within its own scope, see
                                           :mod:`toolmesh.gateway.tokens`)
config getvalues-all-ws, list-workspaces,  ``admin`` in every workspace (the gateway's
history of every workspace                 own token, or no token set)
iam whoami, list-my-workspaces             any caller
config token-*                             refused for everyone (use ``token``)
any other service or operation             ``admin`` in every workspace
=========================================  ==========================================

A put "carries a secret" when a secret slot of an item (an ``mcp`` item's ``auth-token`` or
``env``, a tool's secret-named config-param) or a URL's password or secret parameter holds
something other than ``***`` (sending ``***`` back keeps the stored secret: that is not
writing one). A prompt request carrying a ``template`` (a draft to render) runs Jinja text the
caller wrote: only who may write a template may do that, so it needs ``config:write`` rather
than ``agent`` (rendering a stored template by ``id`` is a prompt request like any other).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolmesh.config.tokens import Capability
from toolmesh.schema.json_text import loads
from toolmesh.secrets.fields import MASK, get_path, secret_slots, walk_strings
from toolmesh.urls import mask_urls_in


@dataclass(frozen=True, kw_only=True, slots=True)
class Need:
    """What one request needs."""

    #: ``None``: any authenticated caller
    capability: Capability | None
    #: a capability needed besides (a put of a secret: ``config:write`` too)
    also: Capability | None = None
    #: how messages name the request, e.g. ``config put``
    what: str
    #: needs every workspace (admin-wide operations)
    everywhere: bool = False
    #: whether the request's workspace must be one of the caller's
    in_workspace: bool = True
    #: why the request is never forwarded for a client (``None``: it may be)
    refused: str | None = None


CONFIG_READS = frozenset({"get", "list", "getvalues", "config", "history"})
CONFIG_WRITES = frozenset({"put", "delete"})
#: config operations that read or list every workspace
CONFIG_EVERYWHERE = frozenset({"getvalues-all-ws", "list-workspaces"})
SERVICE_NEEDS: dict[str, Capability] = {
    "flow": "config:read", "librarian": "config:read",
    "agent": "agent", "agent-tools": "agent", "agent-services": "agent", "dialogs": "agent",
    "approvals": "approve",
    "prompt": "agent",
    "text-completion": "agent",
    "mcp-tool": "tools:invoke", "tool-service": "tools:invoke",
}


def need(service: str, request: dict[str, Any]) -> Need:
    """What ``request`` to ``service`` needs (see the module docstring)."""
    operation = request.get("operation")
    op = operation if isinstance(operation, str) else repr(operation)
    if service == "config":
        return _config_need(op, request)
    if service == "prompt" and request.get("template") is not None:
        # any prompt request with a template, whatever its operation: the prompt service
        # reads one only to render it, and a caller must not find a way round this rule
        return Need(capability="config:write", what="prompt render of a draft template")
    if service in SERVICE_NEEDS:
        return Need(capability=SERVICE_NEEDS[service], what=service)
    if service == "token":
        return Need(capability="admin", what=f"token {op}", in_workspace=False)
    if service == "iam":
        if op == "list-workspaces":
            return Need(capability="admin", what="iam list-workspaces", everywhere=True)
        return Need(capability=None, what=f"iam {op}", in_workspace=False)
    return Need(capability="admin", what=service, everywhere=True)


def _config_need(op: str, request: dict[str, Any]) -> Need:
    what = f"config {op}"
    if op.startswith("token-"):
        return Need(capability="admin", what=what, everywhere=True, refused=(
            f"{what} is not served here: manage tokens with the 'token' service "
            "(toolmesh token create|list|revoke)"))
    if op == "history" and request.get("all-workspaces") is True:
        return Need(capability="admin", what="config history of every workspace",
                    everywhere=True)
    if op in CONFIG_READS:
        return Need(capability="config:read", what=what)
    if op == "put":
        carried = carries(request.get("values"))
        if carried is not None:
            return Need(capability="admin", also="config:write",
                        what=f"config put of {carried}")
        return Need(capability="config:write", what=what)
    if op in CONFIG_WRITES:
        return Need(capability="config:write", what=what)
    return Need(capability="admin", what=what, everywhere=True)


def carries(values: Any) -> str | None:
    """What in a put's ``values`` needs ``admin`` (``"a secret (mcp/x)"``...), or ``None``."""
    if not isinstance(values, list):
        return None  # the config service refuses it
    for entry in values:
        if not isinstance(entry, dict):
            continue
        type, key, text = entry.get("type"), entry.get("key"), entry.get("value")
        if not (isinstance(type, str) and isinstance(text, str)):
            continue  # refused by the config service
        where = f"{type}/{key}"
        try:
            value = loads(text, what="the value")
        except (TypeError, ValueError):
            if mask_urls_in(text) != text:
                return f"a secret ({where}: a URL's credentials)"
            continue
        if type == "mcp" and isinstance(value, dict) and value.get("transport") == "stdio":
            return f"a stdio MCP item ({where} runs a command)"
        for slot in secret_slots(type, value):
            if get_path(value, slot.path) != MASK:
                return f"a secret ({where}: {slot.label})"
        for _, s in walk_strings(value):
            if mask_urls_in(s) != s:
                return f"a secret ({where}: a URL's credentials)"
    return None
