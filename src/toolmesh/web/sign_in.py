"""The gateway's pages of MCP sign-ins (docs/mcp-oauth.md), served whether or not the
Workbench is:

* ``GET /api/v1/mcp-oauth/callback``: where an authorization server sends the browser back.
  The page (and its script, ``/api/v1/mcp-oauth/callback.js``) holds no secret; its script
  posts the code to the mcp-tool service as the person's own toolmesh identity (their
  Workbench token, or one they type), and the service keeps the sign-in only for the identity
  that started it;
* ``GET /oauth/client-metadata.json``: toolmesh's Client ID Metadata Document, the client id
  an authorization server that supports them uses instead of a registration. Its
  ``client_id`` is its own URL, so it is served only where the gateway knows its public HTTPS
  address (``--public-url``).
"""

from __future__ import annotations

from aiohttp import web

from toolmesh import __version__
from toolmesh.web.routes import FILES, PAGE_HEADERS

CALLBACK_PATH = "/api/v1/mcp-oauth/callback"
SCRIPT_PATH = "/api/v1/mcp-oauth/callback.js"
DOCUMENT_PATH = "/oauth/client-metadata.json"
PATHS = frozenset({CALLBACK_PATH, SCRIPT_PATH, DOCUMENT_PATH})
#: RFC 8252 §7.3: a native client's loopback redirect may use any port (`toolmesh mcp login`)
LOOPBACK_REDIRECT = "http://127.0.0.1/callback"


def _file(name: str) -> web.Response:
    found = FILES[name]
    return web.Response(body=found.body, content_type=found.content_type,
                        headers={**PAGE_HEADERS, "ETag": found.etag})


def client_document(public_url: str) -> dict[str, object]:
    """The Client ID Metadata Document of a gateway at ``public_url``."""
    base = public_url.rstrip("/")
    return {"client_id": base + DOCUMENT_PATH, "client_name": "toolmesh",
            "client_uri": base + "/", "software_id": "toolmesh",
            "software_version": __version__,
            "redirect_uris": [base + CALLBACK_PATH, LOOPBACK_REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"], "token_endpoint_auth_method": "none"}


def add_sign_in_pages(app: web.Application, *, public_url: str | None) -> None:
    """Serve the callback page, its script, and (with an HTTPS ``public_url``) the client
    metadata document."""

    async def callback(request: web.Request) -> web.Response:
        return _file("sign-in/callback.html")

    async def script(request: web.Request) -> web.Response:
        return _file("js/sign-in-callback.js")

    async def document(request: web.Request) -> web.Response:
        if not (public_url and public_url.startswith("https://")):
            raise web.HTTPNotFound(text="this gateway has no public HTTPS address "
                                        "(--public-url), so it serves no client metadata")
        return web.json_response(client_document(public_url),
                                 headers={"Cache-Control": "max-age=3600"})

    app.router.add_get(CALLBACK_PATH, callback)
    app.router.add_get(SCRIPT_PATH, script)
    app.router.add_get(DOCUMENT_PATH, document)
