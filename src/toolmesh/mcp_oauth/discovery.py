"""Where to sign in for an MCP server: its protected-resource metadata (RFC 9728), then its
authorization server's metadata (RFC 8414, or OpenID Connect discovery), checked.

The discovery URLs, the metadata models and the checks of the issuer come from the MCP SDK's
client auth (``mcp.client.auth.utils``); what is added here is what toolmesh refuses on top:

* an authorization server that does not list PKCE ``S256`` (``code_challenge_methods_
  supported``), unless the item says ``assume-pkce``: MCP's authorization spec tells clients
  to refuse it, and a login without PKCE could be finished by whoever sees the code;
* protected-resource metadata whose ``resource`` is not the server itself (or a parent of its
  URL): a server may not send toolmesh to get tokens for another resource (RFC 9728 §3.3).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import httpx2
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_oauth_metadata_request,
    extract_resource_metadata_from_www_auth,
    extract_scope_from_www_auth,
    get_client_metadata_scopes,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    issuers_match,
    union_scopes,
)
from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url

from toolmesh.mcp_oauth.errors import LoginRefused, OAuthError
from toolmesh.schema.mcp_auth import OAuthSettings
from toolmesh.urls import mask_url

log = logging.getLogger("toolmesh.mcp_oauth")

#: what an unauthenticated probe sends: a JSON-RPC ping (a protected server answers 401
#: before it reads it)
PROBE = {"jsonrpc": "2.0", "id": 0, "method": "ping"}
PROBE_HEADERS = {"Accept": "application/json, text/event-stream",
                 "Content-Type": "application/json"}


@dataclass(frozen=True, kw_only=True)
class Discovered:
    """Where and how to sign in for one server."""

    #: the server's canonical URL (RFC 8707): what grants are kept under
    resource: str
    #: the ``resource`` sent to the authorization server (the metadata's, when it is the
    #: server or a parent of it); ``None`` when the item says not to send one
    send_resource: str | None
    issuer: str
    metadata: OAuthMetadata
    protected: ProtectedResourceMetadata | None
    #: the scopes to ask for (the challenge's, else the metadata's, plus the item's)
    scope: str | None


def canonical_resource(server_url: str) -> str:
    """The server's canonical resource URL (lower-case scheme and host, no fragment)."""
    return resource_url_from_server_url(server_url)


async def discover(http: httpx2.AsyncClient, *, server_url: str, settings: OAuthSettings,
                   challenge: httpx2.Response | None = None,
                   more_scope: str | None = None) -> Discovered:
    """Discover where to sign in for the MCP server at ``server_url``.

    ``challenge``: the server's 401/403 answer, when there is one (its ``WWW-Authenticate``
    names the metadata and scopes); without one an unauthenticated probe is sent to get it.
    ``more_scope``: scopes a step-up asks for beyond the usual ones."""
    where = mask_url(server_url)
    if challenge is None:
        challenge = await _probe(http, server_url)
    protected = await _protected_resource(http, server_url, challenge)
    resource = canonical_resource(server_url)
    send: str | None = resource
    if protected is not None:
        named = str(protected.resource)
        if not check_resource_allowed(requested_resource=resource, configured_resource=named):
            raise LoginRefused(f"the MCP server at {where} says its tokens are for {named!r}, "
                               f"which is not the server itself ({resource!r}): toolmesh does "
                               "not fetch tokens for another resource. Ask the server's "
                               "operator to fix its /.well-known/oauth-protected-resource")
        send = named
        issuer_url: str | None = str(protected.authorization_servers[0])
    else:
        issuer_url = settings.authorization_server
        if issuer_url is None:
            log.info("the MCP server at %s publishes no protected-resource metadata; its "
                     "own origin is taken as its authorization server", where)
    metadata = await _authorization_server(http, issuer_url, server_url)
    if not (settings.assume_pkce
            or "S256" in (metadata.code_challenge_methods_supported or ())):
        raise LoginRefused(
            f"the authorization server {metadata.issuer} does not list PKCE with S256 "
            f"(code_challenge_methods_supported: "
            f"{metadata.code_challenge_methods_supported or 'none'}): toolmesh does not sign "
            "in without it. If the provider does S256 but its metadata does not say so, set "
            "\"assume-pkce\": true in the item's auth")
    grant_types = (["client_credentials"] if settings.grant == "client-credentials"
                   else ["authorization_code", "refresh_token"])
    scope = get_client_metadata_scopes(extract_scope_from_www_auth(challenge)
                                       if challenge is not None else None,
                                       protected, metadata, grant_types)
    scope = union_scopes(union_scopes(scope, settings.scope), more_scope)
    return Discovered(resource=resource, send_resource=send if settings.send_resource else None,
                      issuer=str(metadata.issuer), metadata=metadata, protected=protected,
                      scope=scope)


async def _probe(http: httpx2.AsyncClient, server_url: str) -> httpx2.Response | None:
    try:
        response = await http.post(server_url, json=PROBE, headers=PROBE_HEADERS)
        await response.aread()
    except httpx2.HTTPError as e:
        raise OAuthError(f"cannot reach the MCP server at {mask_url(server_url)} to learn "
                         f"where to sign in: {type(e).__name__}") from None
    return response if response.status_code in (401, 403) else None


async def _protected_resource(http: httpx2.AsyncClient, server_url: str,
                              challenge: httpx2.Response | None
                              ) -> ProtectedResourceMetadata | None:
    named = extract_resource_metadata_from_www_auth(challenge) if challenge is not None else None
    for url in build_protected_resource_metadata_discovery_urls(named, server_url):
        response = await _get(http, url)
        if response is None:
            continue
        found = await handle_protected_resource_response(response)
        if found is not None:
            return found
    return None


async def _authorization_server(http: httpx2.AsyncClient, issuer_url: str | None,
                                server_url: str) -> OAuthMetadata:
    expected = issuer_url or _origin(server_url)
    for url in build_oauth_authorization_server_metadata_discovery_urls(issuer_url, server_url):
        response = await _get(http, url)
        if response is None:
            continue
        ok, metadata = await handle_auth_metadata_response(response)
        if not ok:
            break
        if metadata is None:
            continue
        # RFC 8414 §3.3: the document must be the issuer's own
        if not issuers_match(str(metadata.issuer), expected):
            raise LoginRefused(f"the authorization server metadata at {url} names the issuer "
                               f"{metadata.issuer}, not {expected}: refused (RFC 8414 §3.3)")
        return metadata
    raise OAuthError(f"found no authorization server metadata for {expected} (RFC 8414 or "
                     "OpenID Connect discovery); if the provider publishes none, it cannot "
                     "be used without it")


async def _get(http: httpx2.AsyncClient, url: str) -> httpx2.Response | None:
    try:
        request = create_oauth_metadata_request(url)
        response = await http.send(request)
        await response.aread()
        return response
    except httpx2.HTTPError as e:
        log.info("metadata at %s could not be read: %s", mask_url(url), type(e).__name__)
        return None


def _origin(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def metadata_json(metadata: OAuthMetadata) -> dict[str, Any]:
    """``metadata`` as JSON (kept with a login, to refresh without discovering again)."""
    return metadata.model_dump(mode="json", exclude_none=True)
