"""Grants kept in this process only: gone when it stops (the embedded default keeps them in
SQLite instead; tests and one-off runs use this)."""

from __future__ import annotations

from toolmesh.mcp_oauth.grants.store import StoredGrant, StoredPending

#: pending logins kept at most: a flood of started logins cannot grow memory without bound
MAX_PENDING = 10_000


class MemoryGrants:
    """A :class:`~toolmesh.mcp_oauth.grants.store.GrantStore` in a dict.

    ``max_pending``: the most pending logins kept (the soonest to expire go first)."""

    def __init__(self, *, max_pending: int = MAX_PENDING) -> None:
        self.max_pending = max_pending
        self._grants: dict[tuple[str, str, str], StoredGrant] = {}
        self._pending: dict[str, StoredPending] = {}
        self._clients: dict[tuple[str, str], str] = {}

    def __repr__(self) -> str:
        return "MemoryGrants()"

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def get(self, workspace: str, principal: str, resource: str) -> StoredGrant | None:
        return self._grants.get((workspace, principal, resource))

    async def put(self, grant: StoredGrant) -> None:
        self._grants[(grant.workspace, grant.principal, grant.resource)] = grant

    async def delete(self, workspace: str, principal: str, resource: str | None = None) -> int:
        gone = [k for k in self._grants
                if k[0] == workspace and k[1] == principal and resource in (None, k[2])]
        for k in gone:
            del self._grants[k]
        return len(gone)

    async def list(self, workspace: str, principal: str | None = None) -> list[StoredGrant]:
        return sorted((g for (w, p, _), g in self._grants.items()
                       if w == workspace and principal in (None, p)),
                      key=lambda g: (g.resource, g.principal))

    async def put_pending(self, login: StoredPending) -> None:
        # a login that replaces one of the same state takes no room of another's
        if login.state not in self._pending and len(self._pending) >= self.max_pending:
            oldest = min(self._pending.values(), key=lambda p: p.expires_at)
            del self._pending[oldest.state]
        self._pending[login.state] = login

    async def take_pending(self, state: str, *, now: float) -> StoredPending | None:
        login = self._pending.pop(state, None)
        if login is None or login.expires_at < now:
            return None
        return login

    async def get_client(self, issuer: str, redirect_uri: str) -> str | None:
        return self._clients.get((issuer, redirect_uri))

    async def put_client(self, issuer: str, redirect_uri: str, secret: str) -> None:
        self._clients[(issuer, redirect_uri)] = secret
