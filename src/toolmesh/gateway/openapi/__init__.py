"""The OpenAPI 3.1 document of the gateway's REST API, served at ``GET /api/v1/openapi.json``.

``python -m toolmesh.gateway.openapi > docs/openapi.json`` writes the same document to the
docs (a test checks the copy is current). It holds no secrets, so the route needs no token.
"""

from __future__ import annotations

import functools
import json

from aiohttp import web

from toolmesh.gateway.openapi.document import document

__all__ = ["document", "openapi_handler", "render"]


@functools.cache
def render() -> str:
    """The document as the route serves it and ``docs/openapi.json`` holds it."""
    # ensure_ascii=False: the text reads as written (≥, →) in the docs copy
    return json.dumps(document(), indent=2, ensure_ascii=False) + "\n"


async def openapi_handler(request: web.Request) -> web.Response:
    return web.Response(text=render(), content_type="application/json")
