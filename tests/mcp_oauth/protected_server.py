"""An MCP server protected by OAuth, as an MCP client meets one: the ``mcp`` SDK's own server
(``MCPServer`` over streamable HTTP, its ``mcp.server.auth`` resource-server support) in a
thread of the test process, on a free loopback port, trusting a :class:`~tests.mcp_oauth.
authserver.AuthServer`.

- Without a valid token ``POST /mcp`` is answered 401 with ``WWW-Authenticate: Bearer ...,
  resource_metadata="http://127.0.0.1:PORT/.well-known/oauth-protected-resource/mcp"``, where
  RFC 9728 metadata names the resource ``http://127.0.0.1:PORT/mcp``, the authorization
  server and ``scopes_supported``.
- A token is checked by RFC 7662 introspection at the authorization server (as a confidential
  client the server registers for itself at start): it must be ``active``, from that issuer,
  for this resource (``aud``, RFC 8707: a token minted for another resource is refused) and
  carry the required scopes (``mcp:tools``; 403 without).
- Tools: ``whoami`` (``"alice (scopes: mcp:tools)"``) and ``write_note(text)``, which needs
  ``notes:write``: without it the HTTP request is answered 403 ``insufficient_scope`` naming
  the scopes to ask for (MCP's step-up authorization).
- Every successful tool call is recorded in :attr:`ProtectedServer.calls` as ``(sub, tool)``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import httpx2
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from pydantic import AnyHttpUrl, ConfigDict, TypeAdapter
from starlette.middleware import Middleware
from starlette.routing import Route

from tests.mcp_oauth.authserver import DEFAULT_SCOPE, AuthServer

__all__ = ["Call", "IntrospectionVerifier", "ProtectedServer", "running_protected_server"]

#: the scope ``write_note`` needs besides the endpoint's
WRITE_SCOPE = "notes:write"

# An issuer is compared as a string (RFC 8414 §3.3): a path-less one must not gain a "/".
_URL = TypeAdapter(AnyHttpUrl, config=ConfigDict(url_preserve_empty_path=True))


class Call(NamedTuple):
    """One successful tool call: who made it (the token's ``sub``) and which tool."""

    sub: str
    tool: str


class IntrospectionVerifier(TokenVerifier):
    """Checks a bearer token with the authorization server's RFC 7662 introspection endpoint,
    authenticated as the confidential client ``client_id``/``client_secret``.

    Refuses (``None``) a token that is not ``active`` or was issued by another issuer. Its
    ``aud`` becomes :attr:`AccessToken.resource`, which the SDK compares with the server's
    resource URL (``AuthSettings.validate_token_resource``)."""

    def __init__(self, *, endpoint: str, issuer: str, client_id: str, client_secret: str,
                 resource: str) -> None:
        self.endpoint = endpoint
        self.issuer = issuer
        self.auth = (client_id, client_secret)
        self.resource = resource

    async def verify_token(self, token: str) -> AccessToken | None:
        async with httpx2.AsyncClient(timeout=10) as client:
            response = await client.post(self.endpoint, data={"token": token}, auth=self.auth)
        if response.status_code != 200:
            return None
        found = response.json()
        if found.get("active") is not True or found.get("iss") != self.issuer:
            return None
        audience = found.get("aud")
        if isinstance(audience, list):  # several audiences: ours, if it is among them
            audience = self.resource if self.resource in audience else None
        return AccessToken(
            token=token, client_id=str(found.get("client_id", "")),
            scopes=str(found.get("scope", "")).split(), expires_at=found.get("exp"),
            resource=audience, subject=found.get("sub"), claims={"iss": found["iss"]})


def require_scope_for_tool(app: Any, *, tool: str, scope: str, all_scopes: str,
                           resource_metadata: str) -> Any:
    """ASGI middleware (inside the SDK's authentication): a ``tools/call`` of ``tool`` by a
    token without ``scope`` is answered 403 ``insufficient_scope`` naming ``all_scopes``, so
    the client can ask for them (MCP step-up authorization). The body it read is handed on."""
    challenge = (f'Bearer error="insufficient_scope", scope="{all_scopes}", '
                 f'resource_metadata="{resource_metadata}"').encode()

    async def guarded(scope_: Any, receive: Any, send: Any) -> None:
        user = scope_.get("user")
        if (scope_["type"] != "http" or scope_["method"] != "POST"
                or not isinstance(user, AuthenticatedUser) or scope in user.scopes):
            await app(scope_, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if _calls_tool(body, tool):
            answer = json.dumps({"error": "insufficient_scope",
                                 "error_description": f"{tool} needs scope {scope}"}).encode()
            await send({"type": "http.response.start", "status": 403, "headers": [
                (b"content-type", b"application/json"), (b"www-authenticate", challenge),
                (b"content-length", str(len(answer)).encode())]})
            await send({"type": "http.response.body", "body": answer})
            return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope_, replay, send)

    return guarded


def _calls_tool(body: bytes, tool: str) -> bool:
    try:
        found = json.loads(body)
    except ValueError:
        return False
    messages = found if isinstance(found, list) else [found]
    return any(isinstance(m, dict) and m.get("method") == "tools/call"
               and isinstance(m.get("params"), dict) and m["params"].get("name") == tool
               for m in messages)


def _subject() -> str:
    """Who the token acts for: its person (``sub``), or ``client:ID`` for a client's own token
    (client credentials: no person)."""
    token = get_access_token()
    if token is None:
        raise RuntimeError("a tool ran without an authenticated caller")
    if token.subject:
        return token.subject
    if token.client_id:
        return f"client:{token.client_id}"
    raise RuntimeError("a tool ran without an authenticated subject")


class ProtectedServer:
    """The protected MCP server (see the module docstring), for ``async with`` or
    :meth:`start`/:meth:`stop`; usable from any event loop (it runs its own, in a thread).

    Options (keyword-only):

    ``required_scopes``
        what every request to ``/mcp`` needs (default ``["mcp:tools"]``).
    ``scopes_supported``
        what its RFC 9728 metadata lists (default: ``required_scopes``, so a client that asks
        for those meets the ``write_note`` step-up).
    ``resource_scope``
        the scopes the authorization server may put in tokens for this server.
    ``wrong_resource``
        fault: the metadata names ``http://127.0.0.1:PORT/other`` as the resource, not the URL
        it describes.
    ``json_response``
        answer POSTs with ``application/json`` instead of an SSE stream.
    """

    def __init__(self, auth: AuthServer, *, required_scopes: list[str] | None = None,
                 scopes_supported: list[str] | None = None, resource_scope: str = DEFAULT_SCOPE,
                 wrong_resource: bool = False, json_response: bool = False,
                 timeout: float = 30) -> None:
        self.auth = auth
        self.required_scopes = list(required_scopes or ["mcp:tools"])
        self.scopes_supported = list(scopes_supported or self.required_scopes)
        self.resource_scope = resource_scope
        self.wrong_resource = wrong_resource
        self.json_response = json_response
        self.timeout = timeout
        #: every successful tool call, in order: ``Call(sub, tool)``
        self.calls: list[Call] = []
        #: what ``write_note`` was given: ``(sub, text)``
        self.notes: list[tuple[str, str]] = []
        #: the confidential client it introspects tokens as (the registration's answer)
        self.introspection_client: dict[str, Any] = {}
        self.port = 0
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._uvicorn: Any = None
        self._failure: BaseException | None = None

    @property
    def url(self) -> str:
        """The MCP endpoint, which is also the resource URL (RFC 8707) tokens must be for."""
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def resource(self) -> str:
        return self.url

    @property
    def metadata_url(self) -> str:
        """Where its RFC 9728 protected resource metadata is (and the 401 says so)."""
        return str(build_resource_metadata_url(_URL.validate_python(self.url)))

    @property
    def advertised_resource(self) -> str:
        """The ``resource`` its metadata names (not :attr:`url` with ``wrong_resource``)."""
        return f"http://127.0.0.1:{self.port}/other" if self.wrong_resource else self.url

    def _build(self) -> Any:
        verifier = IntrospectionVerifier(
            endpoint=self.auth.introspection_endpoint, issuer=self.auth.issuer,
            client_id=self.introspection_client["client_id"],
            client_secret=self.introspection_client["client_secret"], resource=self.url)
        settings = AuthSettings(issuer_url=_URL.validate_python(self.auth.issuer),
                                resource_server_url=_URL.validate_python(self.url),
                                required_scopes=self.required_scopes,
                                validate_token_resource=True)
        mcp = MCPServer("oauth-protected", log_level="WARNING", auth=settings,
                        token_verifier=verifier)

        @mcp.tool()
        def whoami() -> str:
            """Who the token is for, and its scopes."""
            token = get_access_token()
            sub = _subject()
            self.calls.append(Call(sub, "whoami"))
            return f"{sub} (scopes: {' '.join(token.scopes if token else [])})"

        @mcp.tool()
        def write_note(text: str) -> str:
            """Keep a note (needs scope notes:write)."""
            sub = _subject()
            self.notes.append((sub, text))
            self.calls.append(Call(sub, "write_note"))
            return f"noted for {sub}"

        app = mcp.streamable_http_app(json_response=self.json_response)
        # RFC 9728 metadata from this server's own options, shadowing the SDK's route (which
        # lists the required scopes and the true resource)
        metadata_path = urlsplit(self.metadata_url).path
        sdk_route = create_protected_resource_routes(
            resource_url=_URL.validate_python(self.advertised_resource),
            authorization_servers=[_URL.validate_python(self.auth.issuer)],
            scopes_supported=self.scopes_supported)[0]
        app.router.routes.insert(0, Route(metadata_path, endpoint=sdk_route.endpoint,
                                          methods=["GET", "OPTIONS"]))
        # innermost of the app's middleware: after the SDK authenticated the request
        app.user_middleware.append(Middleware(
            require_scope_for_tool, tool="write_note", scope=WRITE_SCOPE,
            all_scopes=" ".join(dict.fromkeys([*self.required_scopes, WRITE_SCOPE])),
            resource_metadata=self.metadata_url))
        return app

    async def start(self) -> ProtectedServer:
        """Bind a free port, have the authorization server accept it as a resource, register
        the introspection client, serve; return once it accepts connections."""
        if self._thread is not None:
            raise RuntimeError("this ProtectedServer was started already")
        # IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say so (tests/mcp/servers)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self.port = self._sock.getsockname()[1]
        await self.auth.allow_resource(self.url, scope=self.resource_scope)
        self.introspection_client = await self.auth.register_client(
            client_name=f"protected MCP server {self.url}", redirect_uris=[],
            response_types=[], grant_types=[], token_endpoint_auth_method="client_secret_basic")
        app = self._build()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(app, ready), daemon=True,
                                        name=f"protected-mcp-{self.port}")
        self._thread.start()
        await asyncio.to_thread(ready.wait, self.timeout)
        if self._failure is not None or not getattr(self._uvicorn, "started", False):
            await self.stop()
            raise RuntimeError(f"the protected MCP server did not start: {self._failure!r}")
        return self

    def _serve(self, app: Any, ready: threading.Event) -> None:
        import uvicorn

        class Server(uvicorn.Server):
            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets=sockets)
                ready.set()

        config = uvicorn.Config(app, log_level="warning", lifespan="on",
                                timeout_graceful_shutdown=2)
        self._uvicorn = Server(config)
        try:
            asyncio.run(self._uvicorn.serve(sockets=[self._sock]))
        except BaseException as e:  # reported by start(); a thread cannot raise to it
            self._failure = e
        finally:
            ready.set()

    async def stop(self) -> None:
        """Stop serving (open streams get two seconds) and close the socket."""
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 20)
        if self._sock is not None:
            self._sock.close()

    async def __aenter__(self) -> ProtectedServer:
        return await self.start()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.stop()


@asynccontextmanager
async def running_protected_server(auth: AuthServer, **options: Any
                                   ) -> AsyncIterator[ProtectedServer]:
    """A :class:`ProtectedServer` for an ``async with`` block."""
    async with ProtectedServer(auth, **options) as server:
        yield server
