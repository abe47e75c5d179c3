"""The Workbench's files on the gateway: ``/`` redirects to ``/workbench/``, which serves them.

The files are read once, at import, from the package (``static/``): a request can only name
one of them, never a path on disk. They hold no secret, so they are served without a token
(the page asks for one). Every page response carries a Content-Security-Policy that allows
only this origin's own scripts, styles and connections — no inline script, no ``eval``, no
other site — so text that reaches the page (a tool's description, an MCP server's answer) can
never run as code; the scripts add it as text, never as HTML.
"""

from __future__ import annotations

import hashlib
import mimetypes
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

from aiohttp import web

WORKBENCH_PATH = "/workbench/"

#: what a Workbench page may load: its own scripts, styles, images and the API (HTTP and
#: WebSocket on the same host: CSP's 'self' covers ws: since CSP 3)
PAGE_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
               "connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; "
               "form-action 'none'; frame-ancestors 'none'")
#: headers every Workbench file is served with
PAGE_HEADERS: Mapping[str, str] = MappingProxyType({
    "Content-Security-Policy": PAGE_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    # a new release must be seen at the next load; the ETag makes that cheap
    "Cache-Control": "no-cache",
})
TYPES = {".html": "text/html", ".css": "text/css", ".js": "text/javascript",
         ".svg": "image/svg+xml", ".png": "image/png", ".txt": "text/plain",
         ".json": "application/json"}


@dataclass(frozen=True, slots=True)
class StaticFile:
    """One file of the Workbench, as served."""

    body: bytes
    content_type: str
    etag: str


def _load() -> Mapping[str, StaticFile]:
    """Every file under ``static/``, by its path below it (``js/main.js``)."""
    root = resources.files("toolmesh.web") / "static"
    found: dict[str, StaticFile] = {}

    def walk(node: object, prefix: str) -> None:
        for child in node.iterdir():  # type: ignore[attr-defined]
            name = prefix + child.name
            if child.is_dir():
                walk(child, name + "/")
                continue
            suffix = "." + child.name.rsplit(".", 1)[-1] if "." in child.name else ""
            kind = TYPES.get(suffix) or mimetypes.guess_type(child.name)[0]
            if kind is None:
                continue  # not a file the page uses
            body = child.read_bytes()
            found[name] = StaticFile(body, kind, '"' + hashlib.sha256(body).hexdigest()[:20] + '"')

    walk(root, "")
    return MappingProxyType(found)


FILES = _load()


def is_page_path(path: str) -> bool:
    """Whether ``path`` is the Workbench's (served without a token: its files hold no secret)."""
    return path == "/" or path.startswith(WORKBENCH_PATH) or path == WORKBENCH_PATH.rstrip("/")


async def _root(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound(WORKBENCH_PATH)


async def _file(request: web.Request) -> web.StreamResponse:
    name = request.match_info.get("name") or "index.html"
    found = FILES.get(name)
    if found is None:
        return web.json_response({"error": {"type": "not-found", "message": (
            f"the Workbench has no file {name!r}")}}, status=404, headers=PAGE_HEADERS)
    headers = {**PAGE_HEADERS, "ETag": found.etag}
    if request.headers.get("If-None-Match") == found.etag:
        return web.Response(status=304, headers=headers)
    charset = "utf-8" if found.content_type.startswith("text/") or \
        found.content_type.endswith(("json", "xml")) else None
    return web.Response(body=found.body, content_type=found.content_type, charset=charset,
                        headers=headers)


def add_workbench(app: web.Application) -> None:
    """Serve the Workbench on ``app``: ``GET /`` → ``/workbench/``, and its files.
    ``/index.html`` (where TrustGraph's Workbench is, and ``tg-verify-system-status`` looks
    for it) redirects there too."""
    app.router.add_get("/", _root)
    app.router.add_get("/index.html", _root)
    app.router.add_get(WORKBENCH_PATH.rstrip("/"), _root)
    app.router.add_get(WORKBENCH_PATH, _file)
    app.router.add_get(WORKBENCH_PATH + "{name:.+}", _file)
