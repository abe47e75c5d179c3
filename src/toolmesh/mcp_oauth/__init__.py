"""Signing in to MCP servers with OAuth 2.1, per person or per workspace (docs/mcp-oauth.md).

    from toolmesh.mcp_oauth import Logins, open_grants

    logins = Logins(await open_grants("memory"), http=..., public_url="https://tm.example")
    started = await logins.start(target, "user:alice", by="alice")   # started.url: sign in
    await logins.finish(state=..., code=..., iss=..., by="alice")     # the callback
    token = await logins.access_token(target, "user:alice")           # refreshed as needed

The mcp-tool service (:mod:`toolmesh.mcp.signin`) is its one user: the sessions of an item
with ``auth`` carry :class:`BearerAuth`, and a call with no grant asks its person to sign in.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolmesh.mcp_oauth.bearer import BearerAuth
    from toolmesh.mcp_oauth.errors import (
        GrantStoreError,
        LoginDeclined,
        LoginRefused,
        LoginRequired,
        OAuthError,
    )
    from toolmesh.mcp_oauth.grants import GrantStore, open_grants
    from toolmesh.mcp_oauth.logins import (
        CALLBACK_PATH,
        DOCUMENT_PATH,
        Finished,
        Logins,
        Started,
    )
    from toolmesh.schema.mcp_auth import OAuthSettings, principal_of
    from toolmesh.mcp_oauth.target import LoginTarget

#: where each public name lives; loaded at first use, so that reading an item's ``auth``
#: (mcp/config.py, on every config put) does not load the MCP SDK's client auth
_HOMES = {
    "BearerAuth": "bearer", "GrantStoreError": "errors", "LoginDeclined": "errors",
    "LoginRefused": "errors", "LoginRequired": "errors", "OAuthError": "errors",
    "GrantStore": "grants", "open_grants": "grants", "CALLBACK_PATH": "logins",
    "DOCUMENT_PATH": "logins", "Finished": "logins", "Logins": "logins", "Started": "logins",
    "LoginTarget": "target",
}

#: an item's ``auth`` is read where config is (toolmesh.schema.mcp_auth): re-exported here
_ELSEWHERE = {"OAuthSettings": "toolmesh.schema.mcp_auth",
              "principal_of": "toolmesh.schema.mcp_auth"}

__all__ = sorted([*_HOMES, *_ELSEWHERE])


def __getattr__(name: str) -> Any:
    if name in _ELSEWHERE:
        return getattr(importlib.import_module(_ELSEWHERE[name]), name)
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
