"""A config store that keeps secrets encrypted in the store it wraps.

:class:`SealedStore` is a :class:`~toolmesh.config.store.base.ConfigStore` around another one
(SQLite or PostgreSQL alike): on the way in, every secret slot of a value (see
:mod:`toolmesh.secrets.fields`) is replaced by ``enc:v1:<Fernet token>``; on the way out it
is decrypted, so the config service and everything on the bus see the real values and only
the database holds ciphertext. With no key it passes values through, and says at open if the
store holds encrypted values it cannot read.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from toolmesh.config.store.base import (
    SYSTEM_ACTOR,
    AuditEntry,
    ConfigStore,
    Item,
    Key,
    StoredToken,
)
from toolmesh.schema.json_text import loads
from toolmesh.secrets.crypto import (
    KEY_ENV,
    PREFIX,
    SecretBox,
    SecretKeyError,
    is_sealed,
)
from toolmesh.secrets.fields import get_path, secret_slots, set_path, walk_strings
from toolmesh.urls import mask_urls_in

log = logging.getLogger("toolmesh.secrets")


def _parse(text: str) -> Any:
    try:
        # too deep to decode safely: handled as one string, like text that is not JSON
        return loads(text, what="the value")
    except (TypeError, ValueError):
        return None


def seal_value(type: str, text: str, box: SecretBox) -> str:
    """``text`` with each secret encrypted (already encrypted ones are left alone)."""
    value = _parse(text)
    if not isinstance(value, (dict, list)):
        # not a JSON container: the whole value is one string; encrypt it if it has a secret
        if is_sealed(text) or mask_urls_in(text) == text:
            return text
        return box.seal(text)
    changed = False
    for slot in secret_slots(type, value):
        v = get_path(value, slot.path)
        if not (isinstance(v, str) and is_sealed(v)):
            set_path(value, slot.path, box.seal(json.dumps(v)))
            changed = True
    for path, s in list(walk_strings(value)):
        if not is_sealed(s) and mask_urls_in(s) != s:
            set_path(value, path, box.seal(json.dumps(s)))
            changed = True
    return json.dumps(value, ensure_ascii=False) if changed else text


def open_value(text: str, box: SecretBox) -> str:
    """``text`` with every encrypted secret decrypted; :class:`SecretKeyError` if one
    cannot be."""
    if PREFIX not in text:
        return text
    if is_sealed(text):
        return box.open(text)
    value = _parse(text)
    if not isinstance(value, (dict, list)):
        return text
    for path, s in list(walk_strings(value)):
        if is_sealed(s):
            set_path(value, path, json.loads(box.open(s)))
    return json.dumps(value, ensure_ascii=False)


class SealedStore:
    """Encrypts secrets on put and decrypts them on read (see the module docstring)."""

    def __init__(self, inner: ConfigStore, box: SecretBox | None) -> None:
        self.inner = inner
        self.box = box
        self._unreadable: set[tuple[str, str, str]] = set()

    def __repr__(self) -> str:
        return f"SealedStore({self.inner!r}, {'encrypting' if self.box else 'no key'})"

    # --- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        """Open the wrapped store, then :meth:`survey` it."""
        await self.inner.open()
        await self.survey()

    async def close(self) -> None:
        await self.inner.close()

    async def survey(self) -> None:
        """With a key: encrypt the secrets still stored in clear (from before the key was
        set). Without one: say if there are encrypted values nobody can read."""
        sealed = 0
        for workspace in await self.inner.workspaces():
            dump = await self.inner.dump(workspace)
            if self.box is None:
                sealed += sum(PREFIX in v for items in dump.values() for v in items.values())
                continue
            clear = [(t, k, s) for t, items in dump.items() for k, v in items.items()
                     if (s := seal_value(t, v, self.box)) != v]
            if clear:
                await self.inner.put(workspace, clear)
                log.info("encrypted the secrets of %d config item(s) of workspace %r at rest",
                         len(clear), workspace)
        if sealed:
            log.warning("the config store holds %d item(s) with encrypted secrets, but %s is "
                        "not set: they are served still encrypted and will not work; start "
                        "the config service with the key they were encrypted with", sealed,
                        KEY_ENV)

    # --- reads ---------------------------------------------------------------------------

    def _open(self, workspace: str, type: str, key: str, text: str) -> str:
        if self.box is None or PREFIX not in text:
            return text
        try:
            return open_value(text, self.box)
        except SecretKeyError as e:
            if (workspace, type, key) not in self._unreadable:
                self._unreadable.add((workspace, type, key))
                log.error("config item %s/%s of workspace %r: %s", type, key, workspace,
                          e.message)
            return text

    async def version(self) -> int:
        return await self.inner.version()

    async def get(self, workspace: str, keys: Sequence[Key]) -> list[str | None]:
        values = await self.inner.get(workspace, keys)
        return [None if v is None else self._open(workspace, t, k, v)
                for (t, k), v in zip(keys, values)]

    async def keys(self, workspace: str, type: str) -> list[str]:
        return await self.inner.keys(workspace, type)

    async def values(self, workspace: str, type: str) -> dict[str, str]:
        values = await self.inner.values(workspace, type)
        return {k: self._open(workspace, type, k, v) for k, v in values.items()}

    async def dump(self, workspace: str) -> dict[str, dict[str, str]]:
        dump = await self.inner.dump(workspace)
        return {t: {k: self._open(workspace, t, k, v) for k, v in items.items()}
                for t, items in dump.items()}

    async def workspaces(self) -> list[str]:
        return await self.inner.workspaces()

    # --- writes --------------------------------------------------------------------------

    async def put(self, workspace: str, values: Sequence[Item], *,
                  request_id: str | None = None, actor: str = SYSTEM_ACTOR) -> int:
        if self.box is not None:
            box = self.box
            values = [(t, k, v if not isinstance(v, str) else seal_value(t, v, box))
                      for t, k, v in values]
        # the request id and actor go through untouched: the inner store records them with
        # the write
        return await self.inner.put(workspace, values, request_id=request_id, actor=actor)

    async def delete(self, workspace: str, keys: Sequence[Key], *,
                     request_id: str | None = None, actor: str = SYSTEM_ACTOR) -> int:
        return await self.inner.delete(workspace, keys, request_id=request_id, actor=actor)

    # --- audit and tokens: nothing secret to seal (tokens are stored as digests) ------------

    async def history(self, *, workspace: str | None = None, type: str | None = None,
                      key: str | None = None, limit: int = 20) -> list[AuditEntry]:
        return await self.inner.history(workspace=workspace, type=type, key=key, limit=limit)

    async def tokens(self) -> list[StoredToken]:
        return await self.inner.tokens()

    async def add_token(self, token: StoredToken, *, actor: str) -> StoredToken:
        return await self.inner.add_token(token, actor=actor)

    async def remove_token(self, id: str, *, actor: str) -> bool:
        return await self.inner.remove_token(id, actor=actor)
