"""Tool-service wire messages (docs/tool-services.md, "The wire").

Request: ``{"user": ..., "config": "<json object>", "arguments": "<json object>"}``.
Response: ``{"error": null | {"type", "message"}, "response": "<text>", "end_of_stream": bool}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolmesh import json_codec
from toolmesh.errors import ServiceError
from toolmesh.schema.json_object import json_object

#: the user a request without one runs as (TrustGraph's default)
DEFAULT_USER = "trustgraph"


#: the request field carrying a call's idempotency key (docs/dialogs.md)
IDEMPOTENCY_KEY = "idempotency-key"
#: the most characters of a key a client gives (the gateway's routes, ``/mcp``)
MAX_KEY = 200


def client_key(value: Any, *, field: str = IDEMPOTENCY_KEY) -> str | None:
    """A client's idempotency key (``None``: it gave none), or a ``bad-request``
    :class:`ServiceError` unless it is a string of 1 to :data:`MAX_KEY` printable
    characters."""
    if value is None:
        return None
    if isinstance(value, str) and 0 < len(value) <= MAX_KEY and value.isprintable():
        return value
    shown = (repr(value) if len(value) <= 40 else f"{len(value)} characters") \
        if isinstance(value, str) else f"a {type(value).__name__}"
    raise ServiceError(f"'{field}' must be a string of 1 to {MAX_KEY} printable characters "
                       f"naming the call (the same on each retry), not {shown}",
                       type="bad-request")


def request(*, user: str, config: Mapping[str, Any], arguments: Mapping[str, Any],
            workspace: str | None = None, key: str | None = None) -> dict[str, str]:
    """Build a request; ``config`` and ``arguments`` travel JSON-encoded. ``workspace``: the
    caller's, beside ``user``; ``key``: the call's idempotency key, the same on every attempt
    of one call (fields services that do not know them ignore)."""
    # dicts as they are (the usual case): orjson encodes only dicts as objects
    body = {"user": user,
            "config": json_codec.dumps(config if type(config) is dict else dict(config)).decode(),
            "arguments": json_codec.dumps(
                arguments if type(arguments) is dict else dict(arguments)).decode()}
    if workspace is not None:
        body["workspace"] = workspace
    if key is not None:
        body[IDEMPOTENCY_KEY] = key
    return body


def parse_request(body: Mapping[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(user, config, arguments)`` from a request, or :class:`ServiceError` saying what is wrong."""
    user = body.get("user")
    if user is None or user == "":
        user = DEFAULT_USER
    elif not isinstance(user, str):  # 0, [] or {} too: a wrong type is refused, not defaulted
        raise ServiceError(f"'user' must be a string, not {type(user).__name__}",
                           type="malformed-request")
    try:
        return (user, json_object(body.get("config"), name="'config'"),
                json_object(body.get("arguments"), name="'arguments'"))
    except ValueError as e:
        raise ServiceError(str(e), type="malformed-request") from None


def response(text: str, *, end_of_stream: bool = True) -> dict[str, Any]:
    """A success response carrying ``text``."""
    return {"error": None, "response": text, "end_of_stream": end_of_stream}


def error_response(error: Mapping[str, str]) -> dict[str, Any]:
    """An error response; it always ends the stream."""
    return {"error": dict(error), "response": "", "end_of_stream": True}


def observation(value: Any) -> str:
    """The observation text of a result: strings as they are, anything else JSON-encoded."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError) as e:
        raise ServiceError(f"the result is neither a string nor JSON-serialisable: {e}",
                           type="tool-service-error") from None
