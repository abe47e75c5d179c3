"""The ``auth`` of an ``mcp`` item: how toolmesh signs in to a server that wants OAuth
(:mod:`toolmesh.mcp_oauth` does it; read here, where the config service checks items too).

    "auth": {"type": "oauth",
             "per": "user" | "workspace",        # whose grant a call uses (default: user)
             "client-id": "...", "client-secret": "...",   # a pre-registered client
             "scopes": "a b" | ["a", "b"],       # asked for beyond what the server names
             "grant": "authorization-code" | "client-credentials",   # the latter: workspace
             "resource": true | false,           # send RFC 8707 resource (default: true)
             "authorization-server": "https://login.example/tenant/v2.0",  # when the server
                                                  # publishes no RFC 9728 metadata
             "assume-pkce": false}               # the AS does PKCE S256 but does not say so

``per: user``: each toolmesh identity has its own grant, made when that person signs in;
``per: workspace``: one grant every caller of the workspace uses, made by an admin (with
``grant: client-credentials``, made by toolmesh itself, machine to machine).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Per = Literal["user", "workspace"]
Grant = Literal["authorization-code", "client-credentials"]
PERS = ("user", "workspace")
GRANTS = ("authorization-code", "client-credentials")
FIELDS = frozenset({"type", "per", "client-id", "client-secret", "scopes", "grant",
                    "resource", "authorization-server", "assume-pkce"})


class AuthSettingsError(ValueError):
    """The ``auth`` of an item is not usable; the message names the field."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OAuthSettings:
    """An item's OAuth settings, checked."""

    per: Per = "user"
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    #: asked for beyond what the server's challenge or metadata names (space-separated)
    scope: str | None = None
    grant: Grant = "authorization-code"
    #: whether the RFC 8707 ``resource`` parameter is sent (a provider that refuses it:
    #: Entra ID's v2 endpoints)
    send_resource: bool = True
    #: the issuer to use when the server publishes no protected-resource metadata
    authorization_server: str | None = None
    #: the authorization server does PKCE with S256 though its metadata does not list it
    assume_pkce: bool = False

    @classmethod
    def parse(cls, value: Any) -> OAuthSettings:
        """The settings ``value`` (an item's ``auth``) gives; :class:`AuthSettingsError`."""
        if not isinstance(value, Mapping):
            raise AuthSettingsError("'auth' must be an object such as "
                                    '{"type": "oauth", "per": "user"}')
        if value.get("type") != "oauth":
            raise AuthSettingsError(f"'auth.type' must be \"oauth\", not {value.get('type')!r}"
                                    " (a static token goes in 'auth-token')")
        unknown = sorted(set(value) - FIELDS)
        if unknown:
            raise AuthSettingsError(f"'auth' has unknown field(s) {', '.join(unknown)}; its "
                                    f"fields: {', '.join(sorted(FIELDS))}")
        per = value.get("per", "user")
        if per not in PERS:
            raise AuthSettingsError(f"'auth.per' must be \"user\" or \"workspace\", not {per!r}")
        grant = value.get("grant", "authorization-code")
        if grant not in GRANTS:
            raise AuthSettingsError(f"'auth.grant' must be one of {', '.join(GRANTS)}, not "
                                    f"{grant!r}")
        for name in ("client-id", "client-secret", "authorization-server"):
            if value.get(name) is not None and not (isinstance(value[name], str)
                                                    and value[name].strip()):
                raise AuthSettingsError(f"'auth.{name}' must be a non-empty string")
        for name in ("resource", "assume-pkce"):
            if not isinstance(value.get(name, False), bool):
                raise AuthSettingsError(f"'auth.{name}' must be true or false")
        server = value.get("authorization-server")
        if server is not None and not server.startswith(("https://", "http://")):
            raise AuthSettingsError("'auth.authorization-server' must be an http(s) URL")
        if grant == "client-credentials":
            if per != "workspace":
                raise AuthSettingsError("'auth.grant' \"client-credentials\" acts as the "
                                        "workspace, not a person: it needs \"per\": "
                                        "\"workspace\"")
            if not (value.get("client-id") and value.get("client-secret")):
                raise AuthSettingsError("'auth.grant' \"client-credentials\" needs the "
                                        "client's 'client-id' and 'client-secret'")
        if value.get("client-secret") and not value.get("client-id"):
            raise AuthSettingsError("'auth.client-secret' needs 'auth.client-id'")
        return cls(per=per, client_id=value.get("client-id"),
                   client_secret=value.get("client-secret"), scope=_scope(value.get("scopes")),
                   grant=grant, send_resource=value.get("resource", True),
                   authorization_server=server, assume_pkce=value.get("assume-pkce", False))

    @property
    def digest(self) -> str:
        """Everything here (the secret too) as a digest: a change makes a new session."""
        material = json.dumps([self.per, self.client_id, self.client_secret, self.scope,
                               self.grant, self.send_resource, self.authorization_server,
                               self.assume_pkce])
        return hashlib.sha256(material.encode()).hexdigest()


def _scope(value: Any) -> str | None:
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, str):
        return " ".join(value.split()) or None
    if isinstance(value, list) and all(isinstance(s, str) and s.strip() for s in value):
        return " ".join(s.strip() for s in value)
    raise AuthSettingsError("'auth.scopes' must be a string of space-separated scopes or a "
                            "list of strings")


def principal_of(settings: OAuthSettings, actor: str | None) -> str | None:
    """Whose grant a call by ``actor`` uses: ``user:<actor>``, ``workspace``, or ``None``
    when the item is per user and the call has no identity (a bus caller that sent none)."""
    if settings.per == "workspace":
        return "workspace"
    return f"user:{actor}" if actor else None
