"""Grants encrypted at rest: a store wrapped so that every ``secret`` it keeps is sealed with
the deployment's key (:class:`~toolmesh.secrets.crypto.SecretBox`, Fernet) on the way in and
opened on the way out. The wrapped store, and its database, see ciphertext only."""

from __future__ import annotations

import dataclasses
import logging
from typing import TypeVar

from toolmesh.mcp_oauth.grants.store import GrantStore, StoredGrant, StoredPending
from toolmesh.secrets.crypto import SecretBox, SecretKeyError

log = logging.getLogger("toolmesh.mcp_oauth")

T = TypeVar("T", StoredGrant, StoredPending)


class SealedGrants:
    """A :class:`GrantStore` around another, with every secret encrypted by ``box``.

    A secret that no key opens (the key was changed without keeping the old one) reads as no
    grant at all, and is said once in the log: the person signs in again, nothing fails."""

    def __init__(self, inner: GrantStore, box: SecretBox) -> None:
        self.inner = inner
        self._box = box

    def __repr__(self) -> str:
        return f"SealedGrants({self.inner!r})"

    def _seal(self, value: T) -> T:
        return dataclasses.replace(value, secret=self._box.seal(value.secret))

    def _open(self, value: T | None) -> T | None:
        if value is None:
            return None
        try:
            return dataclasses.replace(value, secret=self._box.open(value.secret))
        except SecretKeyError as e:
            log.error("a stored MCP login cannot be read: %s; it is ignored", e.message)
            return None

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def get(self, workspace: str, principal: str, resource: str) -> StoredGrant | None:
        return self._open(await self.inner.get(workspace, principal, resource))

    async def put(self, grant: StoredGrant) -> None:
        await self.inner.put(self._seal(grant))

    async def delete(self, workspace: str, principal: str, resource: str | None = None) -> int:
        return await self.inner.delete(workspace, principal, resource)

    async def list(self, workspace: str, principal: str | None = None) -> list[StoredGrant]:
        # listing shows no secret: the sealed text is passed on unopened
        return await self.inner.list(workspace, principal)

    async def put_pending(self, login: StoredPending) -> None:
        await self.inner.put_pending(self._seal(login))

    async def take_pending(self, state: str, *, now: float) -> StoredPending | None:
        return self._open(await self.inner.take_pending(state, now=now))

    async def get_client(self, issuer: str, redirect_uri: str) -> str | None:
        sealed = await self.inner.get_client(issuer, redirect_uri)
        if sealed is None:
            return None
        try:
            return self._box.open(sealed)
        except SecretKeyError:
            return None  # registered anew

    async def put_client(self, issuer: str, redirect_uri: str, secret: str) -> None:
        await self.inner.put_client(issuer, redirect_uri, self._box.seal(secret))
