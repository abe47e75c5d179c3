"""Scoped gateway tokens: what each may do, what one looks like, how it is checked.

Besides the gateway's own token (``--token``: the admin, every capability in every
workspace), the operator issues tokens bound to workspaces and capabilities
(``toolmesh token create``). A token reads ``tmk_<id>_<secret>``: ``id`` (12 hex digits)
names it in lists and in the audit, ``secret`` is 32 random bytes. The config store keeps the
token's SHA-256 digest, never the token, which is shown once, when it is made. A digest of a
random 256-bit secret needs no slow hash: nobody can guess its way back.

Checking a token (:func:`matches`): find the stored token by the id in it, then compare
digests in constant time, so how long a check takes says nothing about the secret.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Any, Literal, get_args

from toolmesh.config.errors import ConfigError
from toolmesh.config.store.base import StoredToken, check_name

Capability = Literal["config:read", "config:write", "agent", "approve", "tools:invoke",
                     "metrics:read", "admin"]

#: every capability, in the order lists show them
CAPABILITIES: tuple[Capability, ...] = get_args(Capability)

#: what each capability allows (for help texts and errors)
CAPABILITY_HELP: dict[Capability, str] = {
    "config:read": "read config items (get, list, getvalues, config, history) and flows",
    "config:write": "put and delete config items (not secrets or stdio MCP items)",
    "agent": "run agent dialogs, list the agent's tools, prompt and text-completion",
    "approve": "answer the approval requests (and MCP servers' questions) of dialogs",
    "tools:invoke": "call MCP tools (mcp-tool) and tool services (tool-service) directly",
    "metrics:read": "scrape the gateway's /metrics (counts and tool names of every workspace)",
    "admin": "write secrets and stdio MCP items; with every workspace: manage tokens",
}

PREFIX = "tmk_"
_ID_DIGITS = 12
_TOKEN = re.compile(rf"{PREFIX}([0-9a-f]{{{_ID_DIGITS}}})_([A-Za-z0-9_-]{{20,100}})")
#: how long a token's name may be
MAX_NAME = 200
#: the most workspaces one token may name
MAX_WORKSPACES = 100


def digest(token: str) -> str:
    """The hex SHA-256 of ``token`` (what the store keeps)."""
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def mint() -> tuple[str, str]:
    """A new ``(id, token)``."""
    id = secrets.token_hex(_ID_DIGITS // 2)
    return id, f"{PREFIX}{id}_{secrets.token_urlsafe(32)}"


def token_id(token: Any) -> str | None:
    """The id in ``token`` if it has the form of a scoped token, else ``None``."""
    if not isinstance(token, str):
        return None
    match = _TOKEN.fullmatch(token)
    return match.group(1) if match else None


def looks_scoped(token: Any) -> bool:
    """Whether ``token`` claims to be a scoped token (starts with the prefix)."""
    return isinstance(token, str) and token.startswith(PREFIX)


#: compared against when no token has the id, so a miss costs what a hit does
_NO_DIGEST = digest(PREFIX)


def matches(token: str, stored: StoredToken | None) -> bool:
    """Whether ``token`` is ``stored`` (constant time in the secret)."""
    expected = stored.digest if stored is not None else _NO_DIGEST
    return hmac.compare_digest(digest(token).encode(), expected.encode()) and stored is not None


def _names(value: Any, what: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise ConfigError(f"a token needs '{what}': a non-empty list of names")
    out: list[str] = []
    for name in value:
        if not isinstance(name, str):
            raise ConfigError(f"'{what}' must hold strings, not {type(name).__name__}")
        check_name(what, name.strip())
        if name.strip() not in out:
            out.append(name.strip())
    return out


def parse_scope(request: dict[str, Any]) -> tuple[tuple[str, ...], tuple[Capability, ...], str]:
    """``(workspaces, capabilities, name)`` of a ``token-create`` request, validated."""
    workspaces = _names(request.get("workspaces"), "workspaces")
    if len(workspaces) > MAX_WORKSPACES:
        raise ConfigError(f"a token may name at most {MAX_WORKSPACES} workspaces")
    if "*" in workspaces:
        raise ConfigError("a token names its workspaces one by one ('*' is not a workspace); "
                          "the gateway's own --token is the one for every workspace")
    capabilities = _names(request.get("capabilities"), "capabilities")
    unknown = [c for c in capabilities if c not in CAPABILITIES]
    if unknown:
        raise ConfigError(f"unknown capabilit{'y' if len(unknown) == 1 else 'ies'} "
                          f"{', '.join(map(repr, unknown))}; capabilities: "
                          f"{', '.join(CAPABILITIES)}")
    name = request.get("name") or ""
    if not isinstance(name, str) or len(name) > MAX_NAME:
        raise ConfigError(f"a token's 'name' must be a string of at most {MAX_NAME} characters")
    ordered = tuple(c for c in CAPABILITIES if c in capabilities)
    return tuple(workspaces), ordered, name


def describe(token: StoredToken, *, with_digest: bool = False) -> dict[str, Any]:
    """A token as lists show it: never the token, the digest only for gateways."""
    out: dict[str, Any] = {"id": token.id, "name": token.name,
                           "workspaces": list(token.workspaces),
                           "capabilities": list(token.capabilities), "created": token.created}
    if with_digest:
        out["digest"] = token.digest
    return out


def from_wire(entry: Any) -> StoredToken | None:
    """A token from a ``token-table`` answer; ``None`` if the entry is not one."""
    if not isinstance(entry, dict):
        return None
    try:
        return StoredToken(id=str(entry["id"]), digest=str(entry["digest"]),
                           workspaces=tuple(str(w) for w in entry["workspaces"]),
                           capabilities=tuple(str(c) for c in entry["capabilities"]),
                           name=str(entry.get("name") or ""),
                           created=str(entry.get("created") or ""))
    except (KeyError, TypeError):
        return None
