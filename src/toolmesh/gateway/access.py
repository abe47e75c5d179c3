"""Who may reach the gateway: one place that decides, applied to every route and the WebSocket.

A web page the user visits can make the browser send requests to the user's loopback ports.
Three checks keep such pages out, token or not (see SECURITY.md):

* **Origin** — a request whose ``Origin`` is neither the gateway's own (the origin of the
  ``Host`` it was sent to) nor in ``--allow-origin`` is refused (403). Requests without
  ``Origin`` (CLIs, curl, trustgraph-cli) are not affected; browsers always send it on
  cross-site requests and on every WebSocket.
* **Host** — when the gateway listens on loopback, only ``localhost``, ``127.0.0.1`` and
  ``[::1]`` (any port) plus ``--allow-host`` are accepted as ``Host``: a DNS-rebound name
  (``evil.example`` resolving to 127.0.0.1) is refused (403).
* **Content-Type** — a ``POST``/``PUT``/``PATCH``/``DELETE`` must say ``application/json``
  (415 otherwise): a browser's cross-site "simple" request cannot, and one that tries is
  preflighted, which the Origin check refuses.

Then the bearer token (:mod:`toolmesh.gateway.auth`): with the gateway's token set, REST routes
need ``Authorization: Bearer <token>`` — that token or a scoped one; the WebSocket may send it
in the upgrade or authenticate with its first frame. Each request then passes :meth:`AccessPolicy.
admit`: the capability it needs (:mod:`toolmesh.gateway.scopes`) and its workspace must be the
caller's, else ``403 forbidden`` naming the capability or the workspace.

Listening beyond loopback without a token, or with a weak one, is refused at start
(:func:`check_exposure`) unless the operator says ``--insecure``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from toolmesh.approvals.audit import stamped
from toolmesh.config.admin import ACTOR_FIELD
from toolmesh.errors import ToolmeshError
from toolmesh.gateway.auth import Auth, Identity
from toolmesh.gateway.mcp_items import admit_mcp_items
from toolmesh.gateway.scopes import need
from toolmesh.gateway.throttle import Throttled
from toolmesh.gateway.token_strength import SUGGESTION, weakness
from toolmesh.mcp.addresses import DEFAULT_POLICY, AddressPolicy, AddressRefused
from toolmesh.urls import is_loopback
from toolmesh.web.routes import is_page_path
from toolmesh.web.sign_in import PATHS as SIGN_IN_PATHS

log = logging.getLogger("toolmesh.gateway.access")

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
JSON = "application/json"
#: routes that do their own authentication, or need none (and the Workbench's files, which
#: hold no secret: the page asks for the token)
PUBLIC_PATHS = frozenset({"/api/v1/health", "/api/v1/socket", "/api/v1/openapi.json",
                          # how an MCP client learns to authenticate (RFC 9728)
                          "/.well-known/oauth-protected-resource",
                          "/.well-known/oauth-protected-resource/mcp",
                          # MCP sign-ins: the page a browser comes back to (its script posts
                          # the code with the person's token) and the client metadata
                          *SIGN_IN_PATHS})
CORS_HEADERS = "Authorization, Content-Type, X-Workspace, X-Timeout"
CORS_METHODS = "GET, POST, OPTIONS"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: set on every request that passed the checks: whether it carried the token
AUTHENTICATED = web.RequestKey("authenticated", bool)
#: set on every request that passed the checks: who sent it (``None``: no valid token)
IDENTITY = web.RequestKey("identity", Identity | None)
#: services whose requests carry the caller's id (the gateway sets it): for the audit, and
#: for whose sign-ins the calls of an MCP server that signs each person in use; approvals also
#: get the token's name and the face (approvals/audit.py: who decided, through what)
STAMPED = frozenset({"config", "token", "iam", "agent", "mcp-tool", "approvals"})
#: beside ``actor`` on mcp-tool requests: whether the caller may ``admin`` (an item signed in
#: once for a whole workspace is signed in and out by an admin only)
ADMIN_FIELD = "actor-admin"


class AccessError(ToolmeshError):
    """The gateway's access settings are unusable (an invalid origin, no token off-loopback)."""

    type = "access-error"


class Forbidden(ToolmeshError):
    """The caller's token does not allow the request (HTTP 403)."""

    type = "forbidden"


class Revoked(ToolmeshError):
    """The caller's token was revoked after it was checked (HTTP 401)."""

    type = "auth-failed"


def request_workspace(request: dict[str, Any], workspace: str) -> str:
    """The workspace ``request`` reaches: its own ``workspace`` field when it names one, as
    every service reads it, else ``workspace`` (the header's or frame's). A field that is not
    a string is refused by the services, or (``flow``) ignored for the header's."""
    named = request.get("workspace")
    return named if isinstance(named, str) and named else workspace


def check_exposure(*, host: str, token: str | None, insecure: bool) -> None:
    """Refuse to listen beyond loopback without a token, or with a weak one
    (:mod:`toolmesh.gateway.token_strength`), unless ``insecure``; on loopback a weak token is
    only warned about."""
    weak = weakness(token) if token else None
    if is_loopback(host):
        if weak is not None:
            log.warning("WEAK TOKEN: the gateway's token is weak: %s; accepted on loopback, "
                        "refused on any other address without --insecure. Make a strong one "
                        "with %s", weak, SUGGESTION)
        return
    if token and weak is None:
        return
    if not insecure:
        if token:
            raise AccessError(
                f"refusing to listen on {host} with a weak token: {weak}. A guesser who can "
                f"reach this address would find it. Make a strong one with {SUGGESTION} "
                "(set it as TOOLMESH_GATEWAY_TOKEN or in --token-file PATH), or listen on "
                "127.0.0.1, or pass --insecure to accept the risk")
        raise AccessError(
            f"refusing to listen on {host} without a token: anyone who can reach this address "
            "could change config and call tools. Set TOOLMESH_GATEWAY_TOKEN (or "
            "--token-file PATH), or listen on 127.0.0.1, or pass --insecure to accept the risk")
    if token:
        log.warning("INSECURE: listening on %s with a weak token (--insecure): %s; anyone who "
                    "can reach it may guess it", host, weak)
    else:
        log.warning("INSECURE: listening on %s with no token (--insecure): anyone who can reach "
                    "it, and any web page by DNS rebinding, can change config and call tools",
                    host)


def normalize_origin(origin: str) -> str | None:
    """``scheme://host[:port]`` lower-cased, default port dropped; ``None`` if not an origin."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in ("http", "https") or not host or parts.path not in ("", "/") \
            or parts.query or parts.username:
        return None
    if ":" in host:
        host = f"[{host}]"
    if port is None or (scheme, port) in (("http", 80), ("https", 443)):
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def _netloc(origin: str) -> str:
    return origin.split("://", 1)[1]


def _host_name(host_header: str) -> str:
    """The name part of a ``Host`` header: ``localhost:8888`` → ``localhost``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _default_port_dropped(host_header: str, scheme: str) -> str:
    host = host_header.strip().lower()
    for s, port in (("http", ":80"), ("https", ":443")):
        if scheme == s and host.endswith(port):
            return host[: -len(port)]
    return host


def media_type(request: web.Request) -> str:
    """The media type of the body, without its parameters.

    Not aiohttp's ``request.content_type``: that parses the parameters with the standard
    library's email parser, which raises IndexError on some malformed ones (``;x*``).
    """
    return request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()


def error_response(status: int, type: str, message: str) -> web.Response:
    return web.json_response({"error": {"type": type, "message": message}}, status=status)


@dataclass(frozen=True, kw_only=True)
class AccessPolicy:
    """The origin, host and content-type rules, and the token check, as aiohttp middleware."""

    auth: Auth
    #: cross-origin callers the operator allows (normalised origins)
    allow_origins: frozenset[str] = frozenset()
    #: ``Host`` names accepted besides loopback's (lower-cased)
    allow_hosts: frozenset[str] = frozenset()
    #: whether ``Host`` is checked (listening on loopback, or ``--allow-host`` given)
    check_host: bool = True
    #: where ``mcp`` items put through the gateway may point (gateway/mcp_items.py)
    mcp_addresses: AddressPolicy = DEFAULT_POLICY

    @classmethod
    def build(cls, *, listen_host: str, auth: Auth, allow_origins: Iterable[str] = (),
              allow_hosts: Iterable[str] = (),
              mcp_addresses: AddressPolicy = DEFAULT_POLICY) -> AccessPolicy:
        """The policy for a gateway listening on ``listen_host``; :class:`AccessError` for an
        ``--allow-origin`` that is not an origin."""
        origins = set()
        for origin in allow_origins:
            normal = normalize_origin(origin)
            if normal is None:
                raise AccessError(f"--allow-origin {origin!r} is not an origin: give "
                                  "scheme://host[:port], e.g. http://localhost:5173 "
                                  "(no path, no wildcard)")
            origins.add(normal)
        hosts = {h.strip().lower() for h in allow_hosts if h.strip()}
        if not is_loopback(listen_host) and listen_host not in ("", "0.0.0.0", "::"):
            hosts.add(listen_host.lower())
        return cls(auth=auth, allow_origins=frozenset(origins), allow_hosts=frozenset(hosts),
                   mcp_addresses=mcp_addresses,
                   check_host=is_loopback(listen_host) or bool(hosts - {listen_host.lower()}))

    # -- the checks ------------------------------------------------------------------------

    def host_allowed(self, host_header: str | None) -> bool:
        if not self.check_host or host_header is None:
            return True  # no Host at all: not a browser (HTTP/1.0 tools)
        name = _host_name(host_header)
        return name in LOOPBACK_NAMES or name in self.allow_hosts \
            or name.strip("[]") in self.allow_hosts

    def origin_allowed(self, origin: str, host_header: str | None) -> bool:
        normal = normalize_origin(origin)
        if normal is None:  # "null" (sandboxed frames, file://) and garbage
            return False
        if normal in self.allow_origins:
            return True
        # same origin: the page was loaded from the very host this request was sent to
        scheme = normal.split("://", 1)[0]
        return host_header is not None and \
            _netloc(normal) == _default_port_dropped(host_header, scheme)

    def refusal(self, request: web.Request) -> web.Response | None:
        """The response that refuses ``request``, or ``None`` if it may go on."""
        hosts = request.headers.getall("Host", [])
        if len(hosts) > 1 or any("," in value for value in hosts):
            # one request, one host (RFC 9110 §7.2): with two, this check and a proxy or the
            # route could each read a different one
            return error_response(400, "bad-host", (
                f"a request names one host; this one names several ({', '.join(hosts)!r}): "
                "send a single Host header"))
        host = request.headers.get("Host")
        if not self.host_allowed(host):
            return error_response(403, "forbidden-host", (
                f"requests for host {host!r} are refused: this gateway listens on loopback and "
                "answers only to localhost, 127.0.0.1 and [::1] (a page that rebinds its own "
                "name to this machine is kept out); start it with --allow-host NAME to "
                "accept another name"))
        origin = request.headers.get("Origin")
        if origin is not None and not self.origin_allowed(origin, host):
            return error_response(403, "forbidden-origin", (
                f"requests from origin {origin!r} are refused: web pages of other origins may "
                "not use this gateway; start it with --allow-origin ORIGIN to allow one"))
        # a DELETE without a body (an MCP client ending its session) carries nothing to check
        if request.method in BODY_METHODS and media_type(request) != JSON and not (
                request.method == "DELETE" and not request.can_read_body):
            return error_response(415, "unsupported-media-type", (
                f"send the body as JSON with 'Content-Type: {JSON}' (got "
                f"{request.headers.get('Content-Type') or 'none'!r}), e.g. "
                f"curl -H 'Content-Type: {JSON}' -d '{{...}}' or curl --json '{{...}}'"))
        return None

    async def identify(self, request: web.Request) -> Identity | None:
        """Who the upgrade or request itself says it is (header, or ``?token=`` on the
        socket); ``None``: no valid token."""
        header = request.headers.get("Authorization")
        if request.path == "/api/v1/socket" and header is None and "token" in request.query:
            return await self.auth.identify(request.query.get("token"), peer=request.remote)
        return await self.auth.identify_header(header, peer=request.remote)

    async def admit(self, caller: Identity | None, service: str, request: dict[str, Any],
                    workspace: str, *, route: str = "rest") -> dict[str, Any]:
        """``request`` as ``service`` gets it, if ``caller`` may send it: :class:`Forbidden`
        naming the capability or workspace it lacks, :class:`Revoked` for a token revoked
        since. The requests of :data:`STAMPED` services get the caller's id as ``actor``,
        overwriting whatever the client sent (the audit's "who"); approvals requests also its
        token's name and their face (``route``: ``rest`` or ``socket``, and the client's
        ``via``)."""
        current = await self.auth.current(caller) if caller is not None else None
        if current is None:
            raise Revoked("this token is not valid (any more): it was revoked, or never was "
                          "one; ask the operator for a new one")
        needed = need(service, request)
        if needed.refused is not None:
            raise Forbidden(needed.refused)
        target = request_workspace(request, workspace)
        who = "the caller" if not current.scoped else f"token {current.id!r}"
        for capability in (needed.also, needed.capability):
            if capability is not None and not current.may(capability):
                raise Forbidden(f"{needed.what} needs the {capability!r} capability, which "
                                f"{who} does not have (it has: "
                                f"{', '.join(sorted(current.capabilities)) or 'none'})")
        if needed.everywhere and current.workspaces is not None:
            raise Forbidden(f"{needed.what} reaches every workspace: only the gateway's own "
                            f"token (--token) may ask, not {who}")
        if needed.in_workspace and not current.reaches(target):
            raise Forbidden(f"{who} may not use workspace {target!r} (it may use: "
                            f"{', '.join(current.workspaces or ())})")
        if service == "config":  # where its mcp items may point, and are refused if not
            try:
                request = await admit_mcp_items(request, admin=current.may("admin"),
                                                policy=self.mcp_addresses)
            except AddressRefused as e:
                raise Forbidden(e.message) from None
        if service == "approvals":
            request = stamped(request, id=current.id, route=route,
                              name=current.name if current.scoped else "")
        elif service in STAMPED:
            request = {**request, ACTOR_FIELD: current.id}
        if service == "mcp-tool":
            request[ADMIN_FIELD] = current.may("admin")
        return request

    async def admit_metrics(self, caller: Identity | None) -> None:
        """Whether ``caller`` may scrape ``/metrics``: :class:`Forbidden` without the
        ``metrics:read`` capability (its workspaces do not matter: the metrics count every
        workspace's calls, and name no workspace)."""
        current = await self.auth.current(caller) if caller is not None else None
        if current is None:
            raise Revoked("this token is not valid (any more): it was revoked, or never was "
                          "one; ask the operator for a new one")
        if not current.may("metrics:read"):
            who = "the caller" if not current.scoped else f"token {current.id!r}"
            raise Forbidden(f"/metrics needs the 'metrics:read' capability, which {who} does "
                            "not have; give the scraper a token made with "
                            "'toolmesh token create --workspace default --capability "
                            "metrics:read --name prometheus'")

    # -- middleware ------------------------------------------------------------------------

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        refusal = self.refusal(request)
        if refusal is not None:
            return refusal
        origin = request.headers.get("Origin")
        if request.method == "OPTIONS":
            return self._preflight(origin)
        try:
            identity = await self.identify(request)
        except Throttled as e:  # too many wrong tokens from this address: not even checked
            refused = error_response(429, e.type, e.message)
            refused.headers["Retry-After"] = e.retry_after_header
            return refused
        except ToolmeshError as e:  # the token table could not be loaded
            return error_response(503, e.type, f"cannot check the token now: {e.message}")
        request[IDENTITY] = identity
        request[AUTHENTICATED] = identity is not None
        if identity is None and request.path not in PUBLIC_PATHS \
                and not (request.method in ("GET", "HEAD") and is_page_path(request.path)):
            refused = error_response(401, "auth-failed", "a valid bearer token is required "
                                                         "(Authorization: Bearer <token>)")
            if request.path == "/mcp" or request.path.startswith("/mcp/"):
                # MCP clients look here for how to authenticate (RFC 9728, MCP's authorization)
                refused.headers["WWW-Authenticate"] = (
                    f'Bearer resource_metadata="{request.url.origin()}'
                    '/.well-known/oauth-protected-resource/mcp"')
            return refused
        response = await handler(request)
        if origin is not None and not response.prepared:
            self._cors(response.headers, origin)
        return response

    def _preflight(self, origin: str | None) -> web.Response:
        # Only reached by allowed origins (or without Origin, where CORS means nothing).
        response = web.Response(status=204)
        if origin is not None:
            self._cors(response.headers, origin)
            response.headers["Access-Control-Allow-Methods"] = CORS_METHODS
            response.headers["Access-Control-Allow-Headers"] = CORS_HEADERS
            response.headers["Access-Control-Max-Age"] = "600"
        return response

    @staticmethod
    def _cors(headers: Any, origin: str) -> None:
        headers["Access-Control-Allow-Origin"] = origin
        headers["Vary"] = "Origin"
