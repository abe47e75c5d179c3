"""JSON-RPC errors ``/mcp`` answers in its own words.

The MCP SDK answers some malformed requests with the text of its validator (pydantic's, with
its URLs and internal type names) and others — a request whose ``id`` is ``true``, an object
or ``1.5`` — with an empty ``202`` as if it were a notification. What the endpoint answers
itself is built here.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from toolmesh import json_codec

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
#: JSON-RPC's range for errors a server defines: a limit of the endpoint was reached
SERVER_ERROR = -32000


def valid_id(id: Any) -> bool:
    """Whether ``id`` may be a request's id: a string or an integer (JSON-RPC also allows
    ``null``, which MCP does not)."""
    return isinstance(id, str | int) and not isinstance(id, bool)


def error_response(status: int, code: int, message: str, *, id: Any = None,
                   data: dict[str, Any] | None = None) -> web.Response:
    """A JSON-RPC error as the HTTP answer: ``id`` is the request's when it is a valid one,
    else ``null``."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return web.Response(status=status, content_type="application/json",
                        body=json_codec.dumps({"jsonrpc": "2.0",
                                               "id": id if valid_id(id) else None,
                                               "error": error}))
