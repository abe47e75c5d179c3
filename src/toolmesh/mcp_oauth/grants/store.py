"""The seam of the grant store: what a login keeps, and the interface every store offers.

A store keeps three things, each with its secrets in one opaque text (``secret``) that the
store never reads — :class:`~toolmesh.mcp_oauth.grants.sealed.SealedGrants` encrypts it on
the way in, so the database holds ciphertext only:

* **grants**, one per ``(workspace, principal, resource)``: the tokens a person (or a
  workspace) was given for one MCP server. ``principal`` is ``user:<toolmesh identity>`` or
  ``workspace``; ``resource`` the server's canonical URL (RFC 8707). The issuer, scope and
  expiry are kept in clear beside the secret, so grants can be listed without opening them;
* **pending logins**, one per ``state``: a login started and not finished yet (the PKCE
  verifier, who started it, where to). Taken once: a second callback with the same state
  finds nothing;
* **clients**: what dynamic client registration gave, per ``(issuer, redirect URI)``, so a
  registration is made once, not at every login.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, kw_only=True)
class StoredGrant:
    """One grant as the store keeps it."""

    workspace: str
    principal: str
    resource: str
    issuer: str
    #: the scope granted (space-separated), as the token response said
    scope: str | None
    #: when the access token expires (Unix seconds); ``None``: not said
    expires_at: float | None
    #: when the grant was made or last refreshed (Unix seconds)
    obtained: float
    #: the tokens and client credentials, as JSON text (sealed in a :class:`SealedGrants`)
    secret: str


@dataclass(frozen=True, kw_only=True)
class StoredPending:
    """A login started and not finished."""

    state: str
    workspace: str
    principal: str
    #: after this (Unix seconds) the login cannot be finished
    expires_at: float
    #: the verifier, endpoints and client of the login, as JSON text (sealed)
    secret: str


class GrantStore(Protocol):
    """Where grants, pending logins and client registrations are kept."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def get(self, workspace: str, principal: str, resource: str) -> StoredGrant | None:
        """The grant of ``principal`` for ``resource`` in ``workspace``, if any."""
        ...

    async def put(self, grant: StoredGrant) -> None:
        """Keep ``grant``, replacing the one of the same workspace, principal and resource."""
        ...

    async def delete(self, workspace: str, principal: str, resource: str | None = None) -> int:
        """Forget ``principal``'s grant for ``resource`` (every one of theirs in
        ``workspace`` when ``None``); how many were forgotten."""
        ...

    async def list(self, workspace: str, principal: str | None = None) -> list[StoredGrant]:
        """The grants of ``workspace`` (of ``principal`` only, when given), by resource."""
        ...

    async def put_pending(self, login: StoredPending) -> None:
        """Keep a login started; expired ones may be dropped at any time."""
        ...

    async def take_pending(self, state: str, *, now: float) -> StoredPending | None:
        """The login of ``state``, removed (once only); ``None`` when there is none or it
        expired before ``now``."""
        ...

    async def get_client(self, issuer: str, redirect_uri: str) -> str | None:
        """A registration kept for ``issuer`` and ``redirect_uri`` (JSON text, sealed)."""
        ...

    async def put_client(self, issuer: str, redirect_uri: str, secret: str) -> None:
        """Keep a registration (replacing one of the same issuer and redirect URI)."""
        ...
