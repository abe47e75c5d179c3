"""Who is calling: the gateway's own token, a scoped token, or anyone (no token set).

* the gateway's token (``--token``) is the admin: every capability in every workspace;
* a scoped token (``toolmesh token create``) has its capabilities in its workspaces only;
* with no gateway token set, a caller without a scoped token is ``local``: everything (the
  gateway then listens on loopback only, see :func:`~toolmesh.gateway.access.check_exposure`).
  A scoped token it presents still limits it, and one that is revoked or unknown is refused.

Comparisons take the same time whatever the token holds (see :mod:`toolmesh.config.tokens`).
Every token presented from a network address passes the failed-auth throttle first
(:mod:`toolmesh.gateway.throttle`): guessing is slowed wherever it is tried, REST or WebSocket,
and only a token found wrong is charged to its address.
"""

from __future__ import annotations

import hmac
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Protocol

from toolmesh.config.service import DEFAULT_WORKSPACE
from toolmesh.config.tokens import CAPABILITIES, looks_scoped
from toolmesh.gateway.throttle import AuthThrottle


@dataclass(frozen=True, kw_only=True, slots=True)
class Identity:
    """A caller the gateway let in, and what it may do."""

    #: ``admin``, ``local``, or the id of a scoped token (what the audit records)
    id: str
    capabilities: frozenset[str]
    #: the workspaces it may use, the first its default; ``None``: every one
    workspaces: tuple[str, ...] | None
    name: str = ""
    created: str = ""

    @property
    def scoped(self) -> bool:
        """Whether this is a scoped token (and so may be revoked)."""
        return self.workspaces is not None

    @property
    def default_workspace(self) -> str:
        """The workspace of requests that name none."""
        return self.workspaces[0] if self.workspaces else DEFAULT_WORKSPACE

    def reaches(self, workspace: str) -> bool:
        return self.workspaces is None or workspace in self.workspaces

    def may(self, capability: str) -> bool:
        return capability in self.capabilities


ADMIN = Identity(id="admin", capabilities=frozenset(CAPABILITIES), workspaces=None,
                 name="the gateway's token (--token)")
LOCAL = Identity(id="local", capabilities=frozenset(CAPABILITIES), workspaces=None,
                 name="no gateway token set: every local caller")


class Attempt:
    """One token presented from one address, as its lookup tells the throttle what it waits
    for (:mod:`toolmesh.gateway.throttle`); this base, for callers not throttled, does
    nothing."""

    def waiting_for_id(self) -> AbstractContextManager[object]:
        """Entered while the lookup waits for the table to be reloaded for an id it lacks."""
        return nullcontext()

    def waited(self) -> None:
        """Called once the lookup waited for the table, before the token is compared."""


class _Throttled(Attempt):
    def __init__(self, throttle: AuthThrottle, key: str | None) -> None:
        self._throttle = throttle
        self._key = key

    def waiting_for_id(self) -> AbstractContextManager[object]:
        return self._throttle.holding(self._key)

    def waited(self) -> None:
        self._throttle.recheck(self._key)


UNTHROTTLED = Attempt()


class TokenLookup(Protocol):
    """Where scoped tokens are checked (:class:`~toolmesh.gateway.tokens.TokenRegistry`)."""

    async def identify(self, token: str, *, attempt: Attempt = UNTHROTTLED) -> Identity | None:
        """The identity of a scoped token, ``None`` if it is not (or no longer) valid;
        ``attempt`` hears of every wait."""
        ...

    async def current(self, identity: Identity) -> Identity | None:
        """A scoped identity as it stands now, ``None`` once its token is revoked."""
        ...


class Auth:
    """Checks tokens: exactly the gateway's token is :data:`ADMIN`, scoped tokens are looked
    up in ``tokens``; without a gateway token everyone else is :data:`LOCAL`. ``throttle``:
    wrong tokens per client address (none: not throttled)."""

    def __init__(self, token: str | None, tokens: TokenLookup | None = None, *,
                 throttle: AuthThrottle | None = None) -> None:
        self._token = token or None
        self._tokens = tokens
        self.throttle = throttle

    @property
    def required(self) -> bool:
        return self._token is not None

    def accepts(self, token: str | None) -> bool:
        """Whether ``token`` is the gateway's own (or none is set)."""
        if self._token is None:
            return True
        # constant-time comparison: the token is a secret. surrogateescape: a header that was
        # not UTF-8 reaches us with escaped bytes; it is simply not the token.
        return token is not None and hmac.compare_digest(
            token.encode("utf-8", "surrogateescape"),
            self._token.encode("utf-8", "surrogateescape"))

    async def identify(self, token: str | None, *, peer: str | None = None) -> Identity | None:
        """Who presents ``token`` from address ``peer``; ``None``: refused.
        :class:`~toolmesh.gateway.throttle.Throttled` when ``peer`` sent too many wrong ones."""
        if not token or self.throttle is None:
            return await self._check(token)
        key = self.throttle.check(peer)  # a throttled address: refused before any check
        # a token that could not be checked (the table would not load) costs nothing, nor
        # does a right one; a check in progress holds nothing but for an unknown id
        identity = await self._check(token, attempt=_Throttled(self.throttle, key))
        if identity is None:
            self.throttle.failed(key)
        return identity

    async def _check(self, token: str | None, *,
                     attempt: Attempt = UNTHROTTLED) -> Identity | None:
        if self._token is not None and token and self.accepts(token):
            return ADMIN
        if token and looks_scoped(token) and self._tokens is not None:
            return await self._tokens.identify(token, attempt=attempt)
        return None if self._token is not None else LOCAL

    async def current(self, identity: Identity) -> Identity | None:
        """``identity`` as it stands now (a scoped token may have been revoked since it was
        checked: ``None``)."""
        if not identity.scoped or self._tokens is None:
            return identity
        return await self._tokens.current(identity)

    async def identify_header(self, header: str | None, *,
                              peer: str | None = None) -> Identity | None:
        """Who sends ``Authorization: Bearer <token>`` (or no such header) from ``peer``."""
        scheme, _, token = (header or "").partition(" ")
        return await self.identify(token.strip() if scheme.lower() == "bearer" else None,
                                   peer=peer)
