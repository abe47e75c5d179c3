"""Which client toolmesh is at an authorization server, in the order MCP's authorization spec
gives (2025-11-25):

1. a **pre-registered** client: the item's ``client-id`` (and ``client-secret``);
2. a **Client ID Metadata Document**: when the server says
   ``client_id_metadata_document_supported`` and toolmesh has a public HTTPS address, the
   client id is the URL of the document the gateway serves (``/oauth/client-metadata.json``:
   :mod:`toolmesh.mcp_oauth.client_document`);
3. **dynamic client registration** (RFC 7591) at its ``registration_endpoint``, made once per
   server and redirect URI and kept (sealed) in the grant store.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import httpx2
from mcp.client.auth.utils import (
    create_client_registration_request,
    handle_registration_response,
    should_use_client_metadata_url,
)
from mcp.client.auth.exceptions import OAuthRegistrationError
from mcp.client.auth.oauth2 import check_registration_usable
from mcp.shared.auth import OAuthClientMetadata, OAuthMetadata

from toolmesh import __version__
from toolmesh.mcp_oauth.errors import OAuthError
from toolmesh.mcp_oauth.grants.store import GrantStore
from toolmesh.schema.mcp_auth import OAuthSettings
from toolmesh.mcp_oauth.tokens import Client

CLIENT_NAME = "toolmesh"


def is_loopback_redirect(uri: str) -> bool:
    """Whether ``uri`` is an ``http`` loopback address (a native app's, RFC 8252 §7.3)."""
    parts = urlsplit(uri)
    return parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1")


def registration_metadata(redirect_uri: str, scope: str | None) -> OAuthClientMetadata:
    """What toolmesh registers: a public native client for a loopback redirect (PKCE is its
    proof), a confidential web client otherwise."""
    native = is_loopback_redirect(redirect_uri)
    return OAuthClientMetadata(
        redirect_uris=[redirect_uri], client_name=CLIENT_NAME, software_id="toolmesh",
        software_version=__version__, scope=scope,
        grant_types=["authorization_code", "refresh_token"], response_types=["code"],
        token_endpoint_auth_method="none" if native else "client_secret_basic",
        application_type="native" if native else "web")


async def client_for(http: httpx2.AsyncClient, store: GrantStore, *, metadata: OAuthMetadata,
                     settings: OAuthSettings, redirect_uri: str, scope: str | None,
                     document_url: str | None) -> Client:
    """The client to sign in with at the server ``metadata`` describes (module docstring)."""
    if settings.client_id:
        method = ("none" if not settings.client_secret else
                  "client_secret_post" if "client_secret_basic" not in
                  (metadata.token_endpoint_auth_methods_supported or ["client_secret_basic"])
                  else "client_secret_basic")
        return Client(client_id=settings.client_id, client_secret=settings.client_secret,
                      auth_method=method)
    if should_use_client_metadata_url(metadata, document_url):
        assert document_url is not None
        return Client(client_id=document_url)
    issuer = str(metadata.issuer)
    kept = await store.get_client(issuer, redirect_uri)
    if kept is not None:
        return Client.from_json(json.loads(kept))
    if metadata.registration_endpoint is None:
        raise OAuthError(f"the authorization server {issuer} offers no dynamic client "
                         "registration, and toolmesh has no Client ID Metadata Document it "
                         "accepts: register toolmesh as a client there (redirect URI "
                         f"{redirect_uri}) and put its id in the item's auth.client-id")
    request = create_client_registration_request(
        metadata, registration_metadata(redirect_uri, scope), issuer)
    try:
        response = await http.send(request)
        info = await handle_registration_response(response)
        check_registration_usable(info)
    except OAuthRegistrationError as e:
        raise OAuthError(f"registering toolmesh as a client of {issuer} failed: {e}") from None
    except httpx2.HTTPError as e:
        raise OAuthError(f"registering toolmesh as a client of {issuer} failed: "
                         f"{type(e).__name__}") from None
    client = Client(client_id=info.client_id, client_secret=info.client_secret,
                    auth_method=info.token_endpoint_auth_method or
                    ("client_secret_basic" if info.client_secret else "none"))
    await store.put_client(issuer, redirect_uri, json.dumps(client.to_json()))
    return client
