"""Logins to MCP servers: started, finished, kept, used, refreshed, forgotten.

A login is made in two halves, which may run in different processes: :meth:`Logins.start`
discovers where to sign in (:mod:`.discovery`), picks the client (:mod:`.client_identity`),
keeps a pending login under a fresh ``state`` and returns the authorization URL (PKCE S256,
RFC 8707 ``resource``); :meth:`Logins.finish` takes the pending login of the callback's
``state`` — once, only for the identity that started it — checks ``iss`` (RFC 9207),
exchanges the code and keeps the grant. Whoever waits for that login (a call paused for it)
is told through :meth:`completed`, which the mcp-tool service also calls when another
replica announces a login it finished.

Grants are kept per ``(workspace, principal, resource)`` in the grant store, sealed; an
access token is refreshed when it has expired or a server refuses it, and the refresh token
the server rotates in is kept. A grant that cannot be refreshed is forgotten: the next call
asks the person to sign in again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx2
from mcp.client.auth.oauth2 import PKCEParameters

from toolmesh.mcp_oauth import tokens as token_endpoint
from toolmesh.mcp_oauth.client_identity import client_for
from toolmesh.mcp_oauth.discovery import canonical_resource, discover
from toolmesh.mcp_oauth.errors import LoginDeclined, LoginRefused, LoginRequired, OAuthError
from toolmesh.mcp_oauth.grants.store import GrantStore, StoredGrant, StoredPending
from toolmesh.schema.mcp_auth import OAuthSettings
from toolmesh.mcp_oauth.target import LoginTarget
from toolmesh.mcp_oauth.tokens import Client, Tokens

log = logging.getLogger("toolmesh.mcp_oauth")

#: seconds a started login may be finished in
LOGIN_TTL = 600.0
#: an access token this close to its expiry is refreshed before use
EXPIRY_MARGIN = 30.0
CALLBACK_PATH = "/api/v1/mcp-oauth/callback"
DOCUMENT_PATH = "/oauth/client-metadata.json"

HttpFactory = Callable[[LoginTarget], AbstractAsyncContextManager[httpx2.AsyncClient]]
Announce = Callable[[str, str, str], None]
#: ``(workspace, principal, resource, at)``: a login finished at ``at`` (Unix seconds)
Completed = Callable[[str, str, str, float], None]


@dataclass(frozen=True, kw_only=True)
class Started:
    """A login begun: where to send the person, and until when it can be finished."""

    url: str
    state: str
    expires_at: float
    item: str
    host: str
    issuer: str


@dataclass(frozen=True, kw_only=True)
class Finished:
    """A login made."""

    workspace: str
    principal: str
    item: str
    resource: str
    issuer: str
    scope: str | None


class Logins:
    """Every login of one mcp-tool service (module docstring).

    ``http``: opens the HTTP client to reach a target's servers with (the service's, which
    checks addresses); ``public_url``: where people's browsers reach the gateway (its
    callback, and its client metadata document when it is HTTPS); ``announce``: told
    ``(workspace, principal, resource)`` of each login finished here; ``on_completed``: of
    each login finished here or announced by another replica."""

    def __init__(self, store: GrantStore, *, http: HttpFactory, public_url: str | None = None,
                 login_ttl: float = LOGIN_TTL, announce: Announce | None = None,
                 on_completed: Completed | None = None) -> None:
        self.store = store
        self._http = http
        self.public_url = public_url.rstrip("/") if public_url else None
        self.login_ttl = login_ttl
        self._announce = announce
        self._on_completed = on_completed
        self._locks: defaultdict[tuple[str, str, str], asyncio.Lock] = defaultdict(asyncio.Lock)
        self._waiting: defaultdict[tuple[str, str, str], list[asyncio.Future[None]]] = \
            defaultdict(list)

    @property
    def callback_url(self) -> str | None:
        """The gateway's callback, where the browser comes back with the code."""
        return self.public_url + CALLBACK_PATH if self.public_url else None

    @property
    def document_url(self) -> str | None:
        """The gateway's Client ID Metadata Document, when it has a public HTTPS address."""
        if self.public_url and self.public_url.startswith("https://"):
            return self.public_url + DOCUMENT_PATH
        return None

    # -- using a grant ------------------------------------------------------------------

    async def access_token(self, target: LoginTarget, principal: str) -> str:
        """A valid access token of ``principal`` for ``target``'s server (refreshed when it
        has expired); :class:`LoginRequired` when there is none to be had without a person."""
        key = (target.workspace, principal, target.resource)
        grant = await self.store.get(*key)
        if grant is not None and not _expired(grant):
            return _secret(grant)["access_token"]
        async with self._locks[key]:
            grant = await self.store.get(*key)  # another task may have refreshed it
            if grant is not None and not _expired(grant):
                return _secret(grant)["access_token"]
            if target.settings.grant == "client-credentials":
                # none yet, or expired: a new one (one for all who waited); the client's
                # credentials are its refresh
                return await self._machine(target)
            if grant is None:
                raise self._required(target, principal)
            return await self._refresh(target, grant)

    async def after_refusal(self, target: LoginTarget, principal: str,
                            token: str) -> str | None:
        """The server refused ``token``: a new one (refreshed once), or ``None`` when there
        is none to be had (the grant is then forgotten)."""
        key = (target.workspace, principal, target.resource)
        async with self._locks[key]:
            grant = await self.store.get(*key)
            if grant is None:
                return None
            current = _secret(grant)["access_token"]
            if current != token:
                return current  # refreshed meanwhile
            if target.settings.grant == "client-credentials":
                await self.store.delete(*key)
                try:
                    return await self._machine(target)
                except OAuthError:
                    return None
            try:
                return await self._refresh(target, grant)
            except OAuthError:
                return None

    async def _refresh(self, target: LoginTarget, grant: StoredGrant) -> str:
        secret = _secret(grant)
        key = (grant.workspace, grant.principal, grant.resource)
        if not secret.get("refresh_token"):
            await self.store.delete(*key)
            raise self._required(target, grant.principal, "the sign-in expired")
        try:
            async with self._http(target) as http:
                fresh = await token_endpoint.refresh(
                    http, token_endpoint=secret["token_endpoint"],
                    client=Client.from_json(secret["client"]),
                    refresh_token=secret["refresh_token"], resource=secret.get("resource"),
                    scope=grant.scope)
        except LoginRequired as e:
            await self.store.delete(*key)
            log.info("the grant of %s for %s could not be refreshed (%s): forgotten",
                     grant.principal, grant.resource, e.message)
            raise self._required(target, grant.principal, "the sign-in expired") from None
        await self.store.put(_grant(grant.workspace, grant.principal, grant.resource,
                                    grant.issuer, fresh, {**secret}))
        log.info("refreshed the grant of %s for %s", grant.principal, grant.resource)
        return fresh.access_token

    async def _machine(self, target: LoginTarget) -> str:
        """A client-credentials grant of the workspace, made now."""
        async with self._http(target) as http:
            found = await discover(http, server_url=target.url, settings=target.settings)
            client = Client(client_id=target.settings.client_id or "",
                            client_secret=target.settings.client_secret,
                            auth_method="client_secret_basic")
            fresh = await token_endpoint.client_credentials(
                http, token_endpoint=str(found.metadata.token_endpoint), client=client,
                scope=found.scope, resource=found.send_resource)
        await self.store.put(_grant(target.workspace, "workspace", target.resource,
                                    found.issuer, fresh,
                                    _grant_secret(target, found.send_resource, client,
                                                  str(found.metadata.token_endpoint),
                                                  found.metadata)))
        return fresh.access_token

    def _required(self, target: LoginTarget, principal: str,
                  why: str = "no sign-in yet") -> LoginRequired:
        who = "the workspace" if principal == "workspace" else "you"
        how = (f"`toolmesh mcp login {target.item}`" if principal != "workspace" else
               f"an admin running `toolmesh mcp login {target.item}`")
        return LoginRequired(f"MCP server {target.host} (item {target.item!r}) needs {who} to "
                             f"sign in ({why}): sign in with {how}, or the Workbench's "
                             "Connect button", item=target.item)

    # -- making a grant -------------------------------------------------------------------

    async def start(self, target: LoginTarget, principal: str, *, by: str,
                    redirect_uri: str | None = None, more_scope: str | None = None,
                    challenge: httpx2.Response | None = None) -> Started:
        """Begin a login of ``principal`` (started by the identity ``by``, the only one that
        may finish it) for ``target``'s server."""
        if target.settings.grant == "client-credentials":
            raise OAuthError(f"item {target.item!r} signs in with the client's credentials: "
                             "no person signs in for it")
        redirect_uri = redirect_uri or self.callback_url
        if redirect_uri is None:
            raise OAuthError("toolmesh does not know its public address, so a browser cannot "
                             "come back to it: start the mcp-tool service with --public-url "
                             "(`toolmesh serve` sets it), or sign in with `toolmesh mcp login`")
        async with self._http(target) as http:
            found = await discover(http, server_url=target.url, settings=target.settings,
                                   challenge=challenge, more_scope=more_scope)
            client = await client_for(http, self.store, metadata=found.metadata,
                                      settings=target.settings, redirect_uri=redirect_uri,
                                      scope=found.scope, document_url=self.document_url)
        pkce = PKCEParameters.generate()
        state = secrets.token_urlsafe(32)
        params = {"response_type": "code", "client_id": client.client_id,
                  "redirect_uri": redirect_uri, "state": state,
                  "code_challenge": pkce.code_challenge, "code_challenge_method": "S256"}
        if found.send_resource is not None:
            params["resource"] = found.send_resource
        if found.scope:
            params["scope"] = found.scope
        endpoint = str(found.metadata.authorization_endpoint)
        url = f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(params)}"
        expires = time.time() + self.login_ttl
        pending = {"by": by, "item": target.item, "url": target.url,
                   "redirect_uri": redirect_uri, "verifier": pkce.code_verifier,
                   "scope": found.scope, "issuer": found.issuer,
                   "iss_required": bool(
                       found.metadata.authorization_response_iss_parameter_supported),
                   "grant": _grant_secret(target, found.send_resource, client,
                                          str(found.metadata.token_endpoint), found.metadata)}
        await self.store.put_pending(StoredPending(
            state=state, workspace=target.workspace, principal=principal, expires_at=expires,
            secret=json.dumps(pending)))
        log.info("login of %s to %s (item %r) started by %s", principal, target.host,
                 target.item, by)
        return Started(url=url, state=state, expires_at=expires, item=target.item,
                       host=target.host, issuer=found.issuer)

    async def finish(self, *, state: str, by: str, code: str | None = None,
                     iss: str | None = None, error: str | None = None) -> Finished:
        """Finish the login of ``state`` with the callback's ``code`` (or ``error``), for the
        identity ``by``. :class:`LoginRefused` when the state is no login of theirs (or no
        longer), or the answer names another issuer; :class:`LoginDeclined` when the person
        said no at the authorization server."""
        if not isinstance(state, str) or not state:
            raise LoginRefused("the callback carries no 'state': it is not the answer to a "
                               "login toolmesh started")
        pending = await self.store.take_pending(state, now=time.time())
        if pending is None:
            raise LoginRefused("no login is waiting for this 'state': it was finished "
                               "already, it expired, or it was never started here; start "
                               "the login again")
        data = json.loads(pending.secret)
        if data["by"] != by:
            # not the starter's: put it back for them (a stranger must not spend it)
            await self.store.put_pending(pending)
            raise LoginRefused("this login was started by another identity: only the one "
                               "that started it may finish it")
        host = _host(data["url"])
        if error:
            declined = LoginDeclined(f"the sign-in to {host} was not given ({error[:100]})")
            # a call waiting for this sign-in (here) ends with that, not at its deadline
            self.declined(pending.workspace, pending.principal, _canonical(data["url"]),
                          declined.message)
            raise declined
        if not code:
            raise LoginRefused("the callback carries no 'code'")
        # RFC 9207: the answer must come from the issuer the login went to
        if iss is not None and iss != data["issuer"]:
            raise LoginRefused(f"the sign-in answer says it comes from {iss[:200]!r}, but the "
                               f"login went to {data['issuer']!r}: refused (RFC 9207; a mix-up "
                               "of authorization servers)")
        if iss is None and data["iss_required"]:
            raise LoginRefused(f"the sign-in answer names no issuer though {data['issuer']} "
                               "says it always does: refused (RFC 9207)")
        secret = data["grant"]
        target = LoginTarget(workspace=pending.workspace, item=data["item"], url=data["url"],
                             settings=OAuthSettings(), reach=secret.get("reach", "any"))
        async with self._http(target) as http:
            fresh = await token_endpoint.exchange_code(
                http, token_endpoint=secret["token_endpoint"],
                client=Client.from_json(secret["client"]), code=code,
                verifier=data["verifier"], redirect_uri=data["redirect_uri"],
                resource=secret.get("resource"))
        resource = _canonical(data["url"])
        await self.store.put(_grant(pending.workspace, pending.principal, resource,
                                    data["issuer"], fresh, secret))
        log.info("login of %s to %s (item %r) finished", pending.principal, host, data["item"])
        self.completed(pending.workspace, pending.principal, resource)
        if self._announce is not None:
            self._announce(pending.workspace, pending.principal, resource)
        return Finished(workspace=pending.workspace, principal=pending.principal,
                        item=data["item"], resource=resource, issuer=data["issuer"],
                        scope=fresh.scope)

    # -- waiting for a login --------------------------------------------------------------

    def wait(self, workspace: str, principal: str, resource: str) -> asyncio.Future[None]:
        """A future set when a login of ``principal`` for ``resource`` finishes (here or,
        announced, in another replica)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting = self._waiting[(workspace, principal, resource)]
        waiting.append(future)
        future.add_done_callback(lambda f: _discard(self._waiting, (workspace, principal,
                                                                     resource), f))
        return future

    def completed(self, workspace: str, principal: str, resource: str,
                  at: float | None = None) -> None:
        """A login of ``principal`` for ``resource`` finished (at ``at``, Unix seconds;
        default: now): wake whoever waits for it."""
        if self._on_completed is not None:
            self._on_completed(workspace, principal, resource,
                               time.time() if at is None else at)
        for future in list(self._waiting.get((workspace, principal, resource), ())):
            if not future.done():
                future.set_result(None)

    def declined(self, workspace: str, principal: str, resource: str, why: str) -> None:
        """The person said no at the authorization server: whoever waits for their sign-in
        to ``resource`` gets :class:`LoginDeclined`."""
        for future in list(self._waiting.get((workspace, principal, resource), ())):
            if not future.done():
                future.set_exception(LoginDeclined(why))

    # -- listing and forgetting -----------------------------------------------------------

    async def list(self, workspace: str, principals: list[str]) -> list[dict[str, Any]]:
        """The grants of ``principals`` in ``workspace``, without any secret."""
        rows: list[dict[str, Any]] = []
        for principal in principals:
            for grant in await self.store.list(workspace, principal):
                rows.append({"resource": grant.resource, "issuer": grant.issuer,
                             "per": "workspace" if principal == "workspace" else "user",
                             "scope": grant.scope, "expires": grant.expires_at,
                             "obtained": grant.obtained})
        return rows

    async def logout(self, target: LoginTarget, principal: str) -> bool:
        """Forget ``principal``'s grant for ``target``'s server, and ask its authorization
        server to revoke the refresh token (RFC 7009, when it has a revocation endpoint;
        best effort: forgotten here whatever it answers)."""
        key = (target.workspace, principal, target.resource)
        grant = await self.store.get(*key)
        removed = await self.store.delete(*key) > 0
        if grant is not None:
            await self._revoke(target, _secret(grant))
        return removed

    async def _revoke(self, target: LoginTarget, secret: dict[str, Any]) -> None:
        endpoint = secret.get("revocation_endpoint")
        token = secret.get("refresh_token") or secret.get("access_token")
        if not endpoint or not token:
            return
        client = Client.from_json(secret["client"])
        data = {"token": token, "client_id": client.client_id}
        if client.client_secret:
            data["client_secret"] = client.client_secret
        try:
            async with self._http(target) as http:
                response = await http.post(endpoint, data=data)
                await response.aread()
        except httpx2.HTTPError as e:
            log.info("could not revoke a grant at %s: %s", endpoint, type(e).__name__)


def _grant_secret(target: LoginTarget, resource: str | None, client: Client,
                  token_url: str, metadata: Any) -> dict[str, Any]:
    revocation = getattr(metadata, "revocation_endpoint", None)
    return {"resource": resource, "client": client.to_json(), "token_endpoint": token_url,
            "revocation_endpoint": str(revocation) if revocation else None,
            "reach": target.reach}


def _grant(workspace: str, principal: str, resource: str, issuer: str, tokens: Tokens,
           secret: dict[str, Any]) -> StoredGrant:
    secret = {**secret, "access_token": tokens.access_token,
              "refresh_token": tokens.refresh_token}
    return StoredGrant(workspace=workspace, principal=principal, resource=resource,
                       issuer=issuer, scope=tokens.scope, expires_at=tokens.expires_at,
                       obtained=time.time(), secret=json.dumps(secret))


def _secret(grant: StoredGrant) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(grant.secret)
    return value


def _expired(grant: StoredGrant) -> bool:
    return grant.expires_at is not None and grant.expires_at - EXPIRY_MARGIN <= time.time()


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).hostname or url


def _canonical(url: str) -> str:
    return canonical_resource(url)


def _discard(waiting: dict[Any, list[asyncio.Future[None]]], key: Any,
             future: asyncio.Future[None]) -> None:
    futures = waiting.get(key)
    if futures is not None and future in futures:
        futures.remove(future)
        if not futures:
            del waiting[key]

