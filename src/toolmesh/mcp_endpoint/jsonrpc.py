"""The JSON-RPC envelope of a ``/mcp`` POST, checked before the MCP SDK sees it, and the errors
the endpoint answers in its own words.

The SDK answered some malformed messages with its validator's text (pydantic's: 6 validation
errors for ``union[JSONRPCRequest,...]``, ``input_value=``, a link to pydantic's site) and took
a request whose ``id`` is ``true``, an object, ``1.5`` or ``null`` for a notification: an empty
``202``, no answer ever. Here every message that is not one JSON-RPC 2.0 request, notification
or response gets ``-32700 Parse error`` or ``-32600 Invalid Request`` (HTTP 400) saying what is
wrong, its ``id`` echoed only when it is a valid one (JSON-RPC: ``null`` when it cannot be
told). What passes has the shape the SDK's models take, so their text never reaches a client;
what a method's ``params`` hold is the SDK's to check, and it answers ``-32602`` without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from toolmesh import json_codec

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
#: JSON-RPC's range for errors a server defines: a limit of the endpoint was reached
SERVER_ERROR = -32000


@dataclass(frozen=True, slots=True)
class Invalid:
    """Why a body is not a JSON-RPC message: its error code, message, and the id to answer."""

    code: int
    message: str
    id: Any = None

    def response(self) -> web.Response:
        return error_response(400, self.code, self.message, id=self.id)


def valid_id(id: Any) -> bool:
    """Whether ``id`` may be a request's id: a string or an integer (JSON-RPC also allows
    ``null``, which MCP does not)."""
    return isinstance(id, str | int) and not isinstance(id, bool)


def read_message(data: bytes) -> tuple[Any, Invalid | None]:
    """A POST body: the JSON it holds (``None`` if it holds none), and why it is not one
    JSON-RPC message (``None``: it is one)."""
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None, Invalid(PARSE_ERROR, "Parse error: the body is not JSON")
    return body, _problem(body)


def _problem(body: Any) -> Invalid | None:
    if isinstance(body, list):
        return _invalid("a batch (a JSON array) is not supported: send one message per request")
    if not isinstance(body, dict):
        return _invalid("the body must be one JSON-RPC message: a JSON object")
    id = body.get("id")
    if body.get("jsonrpc") != "2.0":
        return _invalid('the message must say "jsonrpc": "2.0"', id)
    if "method" in body:
        if not isinstance(body["method"], str):
            return _invalid('"method" must be a string', id)
        if "id" in body and not valid_id(id):
            return _invalid('"id" must be a string or an integer (a request), or left out '
                            f"(a notification); not {_kind(id)}")
        if "params" in body and not isinstance(body["params"], dict):
            return _invalid('"params" must be an object', id)
        return None
    if ("result" in body) == ("error" in body):
        return _invalid('a message needs a "method" (a request or notification), or one of '
                        '"result" and "error" (a response)', id)
    if "result" in body:
        if not valid_id(id):
            return _invalid(f'a response\'s "id" must be a string or an integer; not {_kind(id)}')
        if not isinstance(body["result"], dict):
            return _invalid('"result" must be an object', id)
        return None
    if id is not None and not valid_id(id):
        return _invalid('an error\'s "id" must be a string, an integer or null; not '
                        f"{_kind(id)}")
    error = body["error"]
    if not (isinstance(error, dict) and isinstance(error.get("code"), int)
            and not isinstance(error.get("code"), bool)
            and isinstance(error.get("message"), str)):
        return _invalid('"error" must be an object with an integer "code" and a string '
                        '"message"', id)
    return None


def _invalid(message: str, id: Any = None) -> Invalid:
    return Invalid(INVALID_REQUEST, f"Invalid Request: {message}", id)


def _kind(value: Any) -> str:
    """What a JSON value is, for a message (never the value itself: it may be large)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    return {dict: "an object", list: "an array", float: "a fraction",
            str: "a string", int: "an integer"}.get(type(value), "that")


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
