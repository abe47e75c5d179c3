"""``McpServer``: one ``mcp/<id>`` config item as a typed, immutable object.

The item names the server side of an MCP tool::

    {"url": "http://host:port/mcp", "remote-name": "get_weather", "auth-token": "...",
     "transport": "streamable-http" | "sse" | "stdio",
     "command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"},   # stdio only
     "sampling": false,   # true: the server may ask the deployment's LLM (mcp/sampling.py)
     "auth": {"type": "oauth", "per": "user"},   # sign in with OAuth (schema/mcp_auth.py)
     "reach": "public"}   # set by the gateway on items put without admin (mcp/addresses.py)

The auth token and the values of ``env`` (where API keys usually live) are secrets: they never
appear in ``repr``/``str``, and :attr:`McpServer.connection_key` is a digest, not a tuple that
would carry them into a log line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from toolmesh.config.errors import ConfigError
from toolmesh.config.service import DEFAULT_WORKSPACE
from toolmesh.config.validation import header_value_problem
from toolmesh.mcp.addresses import REACH_FIELD, REACHES, Reach
from toolmesh.schema.mcp_auth import AuthSettingsError, OAuthSettings
from toolmesh.schema.json_object import json_object
from toolmesh.urls import mask_url

Transport = Literal["streamable-http", "sse", "stdio"]
TRANSPORTS: tuple[str, ...] = get_args(Transport)
MASK = "***"
#: how a session agrees on the MCP revision (McpServer.protocol)
PROTOCOLS = ("handshake", "auto")


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServer:
    """How to reach one MCP tool: the server (by URL or by command) and the tool's name there."""

    id: str
    url: str | None = None
    remote_name: str = ""
    auth_token: str | None = field(default=None, repr=False)
    transport: Transport = "streamable-http"
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)
    #: whether the server may ask for ``sampling/createMessage`` (answered by our LLM)
    sampling: bool = False
    #: how the MCP revision is agreed: ``handshake`` (``initialize``: 2025-11-25 at most, the
    #: default) or ``auto`` (``server/discover`` first: 2026-07-28 with a server that speaks
    #: it — a server's questions then come as ``InputRequiredResult`` retries — else the
    #: handshake)
    protocol: str = "handshake"
    #: the config workspace of the item: sessions are never shared across workspaces (a
    #: server may keep state per session or per process, which must not pass between tenants)
    workspace: str = DEFAULT_WORKSPACE
    #: which addresses the server may be reached at (mcp/addresses.py): ``public`` for an
    #: item a token without ``admin`` put, ``any`` otherwise
    reach: Reach = "any"
    #: how to sign in when the server wants OAuth (``auth``); ``None``: it does not
    oauth: OAuthSettings | None = None
    #: whose grant the session uses (``user:<identity>`` or ``workspace``): set per call for
    #: an item with ``oauth`` (:meth:`for_principal`), never from config
    principal: str | None = None
    #: :attr:`connection_key`, worked out once (every call looks its session up by it)
    _key: str = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not self.remote_name:
            # default: the tool is named like the item
            object.__setattr__(self, "remote_name", self.id)
        if self.transport not in TRANSPORTS:
            raise ConfigError(f"mcp/{self.id}: transport {self.transport!r} is not one of "
                              + ", ".join(TRANSPORTS))
        if self.transport == "stdio":
            if not self.command:
                raise ConfigError(f"mcp/{self.id}: a stdio MCP server needs 'command'")
        elif not self.url or not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"mcp/{self.id}: needs an http:// or https:// 'url', "
                              f"not {mask_url(self.url or '')!r}")
        # sampling too: the client declares it in the handshake, so a change needs a new session
        material = json.dumps([self.transport, self.url, self.auth_token, self.command,
                               list(self.args), sorted(self.env.items()), self.sampling,
                               self.workspace, self.protocol, self.reach,
                               self.oauth.digest if self.oauth else None, self.principal])
        object.__setattr__(self, "_key", hashlib.sha256(material.encode()).hexdigest())

    @classmethod
    def from_config(cls, id: str, value: Mapping[str, Any] | str, *,
                    workspace: str = DEFAULT_WORKSPACE) -> McpServer:
        """Build from the value of config item ``mcp/<id>`` (a JSON object, or its text) of
        ``workspace``."""
        try:
            # an object is checked as well as text: a lone surrogate would fail only later,
            # in the HTTP header or the child's environment it is sent in
            value = json_object(dict(value) if isinstance(value, Mapping) else value,
                                name="the value", empty_ok=False)
        except ValueError as e:
            raise ConfigError(f"mcp/{id}: {e}") from None
        args = value.get("args") or []
        env = value.get("env") or {}
        if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
            raise ConfigError(f"mcp/{id}: 'args' must be a list of strings")
        if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
            raise ConfigError(f"mcp/{id}: 'env' must be an object of strings")
        for name in ("url", "remote-name", "auth-token", "transport", "command"):
            if value.get(name) is not None and not isinstance(value[name], str):
                raise ConfigError(f"mcp/{id}: {name!r} must be a string")
        if not isinstance(value.get("sampling", False), bool):
            raise ConfigError(f"mcp/{id}: 'sampling' must be true or false")
        if value.get(REACH_FIELD, "any") not in REACHES:
            raise ConfigError(f"mcp/{id}: {REACH_FIELD!r} must be one of {', '.join(REACHES)}")
        if value.get("protocol", "handshake") not in PROTOCOLS:
            raise ConfigError(f"mcp/{id}: 'protocol' must be one of {', '.join(PROTOCOLS)}")
        problem = header_value_problem(value["auth-token"]) if value.get("auth-token") else None
        if problem is not None:
            raise ConfigError(f"mcp/{id}: 'auth-token' {problem}")
        oauth = None
        if value.get("auth") is not None:
            try:
                oauth = OAuthSettings.parse(value["auth"])
            except AuthSettingsError as e:
                raise ConfigError(f"mcp/{id}: {e}") from None
            if value.get("auth-token"):
                raise ConfigError(f"mcp/{id}: 'auth' (OAuth) and 'auth-token' (a static token) "
                                  "cannot both be set: keep one")
            if (value.get("transport") or "streamable-http") == "stdio":
                raise ConfigError(f"mcp/{id}: 'auth' is for servers reached over HTTP; a stdio "
                                  "server takes its credentials in 'env'")
        return cls(id=id, url=value.get("url") or None,
                   remote_name=value.get("remote-name") or id,
                   auth_token=value.get("auth-token") or None,
                   transport=value.get("transport") or "streamable-http",
                   command=value.get("command") or None, args=tuple(args),
                   env=dict(env), sampling=value.get("sampling", False), workspace=workspace,
                   protocol=value.get("protocol") or "handshake",
                   reach=value.get(REACH_FIELD) or "any", oauth=oauth)

    @property
    def where(self) -> str:
        """Where the server is, safe to show: the masked URL, or the command line."""
        if self.transport == "stdio":
            return " ".join([self.command or "", *self.args])
        return mask_url(self.url or "")

    @property
    def connection_key(self) -> str:
        """A digest of everything that shapes the connection (not ``remote_name``): when it
        changes, an open session to the old settings must not be reused."""
        return self._key

    @property
    def slot(self) -> tuple[str, str, str]:
        """``(workspace, id, principal)``: what names this item's session among every
        workspace's (an item signed in per user has one session per person)."""
        return self.workspace, self.id, self.principal or ""

    def for_principal(self, principal: str) -> McpServer:
        """This item as ``principal`` reaches it: its own session, with its own grant."""
        return dataclasses.replace(self, principal=principal)

    def __repr__(self) -> str:
        parts = [f"id={self.id!r}", f"transport={self.transport!r}"]
        if self.workspace != DEFAULT_WORKSPACE:
            parts.insert(1, f"workspace={self.workspace!r}")
        if self.transport == "stdio":
            parts.append(f"command={self.command!r}")
            if self.args:
                parts.append(f"args={list(self.args)!r}")
            if self.env:
                parts.append("env={" + ", ".join(f"{k!r}: {MASK!r}" for k in self.env) + "}")
        else:
            parts.append(f"url={mask_url(self.url or '')!r}")
        parts.append(f"remote_name={self.remote_name!r}")
        parts.append(f"auth_token={MASK!r}" if self.auth_token else "auth_token=None")
        if self.oauth is not None:
            parts.append(f"oauth={self.oauth.per!r}")
        if self.principal is not None:
            parts.append(f"principal={self.principal!r}")
        if self.sampling:
            parts.append("sampling=True")
        if self.reach != "any":
            parts.append(f"reach={self.reach!r}")
        return f"McpServer({', '.join(parts)})"

    __str__ = __repr__
