"""An MCP ``CallToolResult`` as what toolmesh passes on: text, a structured object, an error flag.

The reference implementation crashed on any content that was not text; here every content
item becomes readable text (binary payloads are described, never dumped), and the reader is
duck-typed so an item of a kind this SDK version does not know, or a plain dict, still reads.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class McpResult:
    """The outcome of one MCP tool call.

    ``text`` joins the readable form of every content item (``None`` when there is none);
    ``object`` is the ``structuredContent``; ``is_error`` is the server's ``isError`` — then
    ``text`` is the server's explanation, and ``refused_arguments`` whether it says the
    arguments did not fit the tool's schema (the caller's copy of it may be stale).
    """

    text: str | None
    object: Any | None
    is_error: bool = False
    refused_arguments: bool = False


def _get(item: Any, *names: str) -> Any:
    """The first present attribute (or key, for dicts) of ``names``."""
    for name in names:
        value = item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)
        if value is not None:
            return value
    return None


def _field(item: Any, name: str, camel: str) -> Any:
    """One field under its SDK v2 ``name`` or, from a dict or an older SDK, its ``camel``
    name. An object that has ``name`` is not asked for ``camel``: with fastmcp imported, the
    v2 types answer the camelCase name too, with a deprecation warning."""
    if not isinstance(item, Mapping) and hasattr(item, name):
        return getattr(item, name)
    return _get(item, name, camel)


def _size(data: Any) -> int:
    """Bytes in a base64 payload (its length in characters if it is not valid base64)."""
    if not isinstance(data, str):
        return 0
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return len(data)


def _resource(resource: Any) -> str:
    text = _get(resource, "text")
    if isinstance(text, str):
        return text
    uri = _get(resource, "uri") or "?"
    mime = _field(resource, "mime_type", "mimeType") or "unknown type"
    blob = _get(resource, "blob")
    size = f", {_size(blob)} bytes" if blob is not None else ""
    return f"[resource: {uri} ({mime}{size})]"


def content_text(item: Any) -> str:
    """One content item as text; never raises."""
    try:
        kind = _get(item, "type")
        if kind == "text":
            return str(_get(item, "text") or "")
        if kind in ("image", "audio"):
            mime = _field(item, "mime_type", "mimeType") or "unknown type"
            return f"[{kind}: {mime}, {_size(_get(item, 'data'))} bytes]"
        if kind == "resource":
            return _resource(_get(item, "resource"))
        if kind == "resource_link":
            name = _get(item, "name", "title") or ""
            return f"[link: {name} {_get(item, 'uri') or '?'}]".replace("  ", " ")
        return f"[{kind or 'unknown'} content]"
    except Exception:  # a result must never fail to read; say what we could not show
        return f"[unreadable content: {type(item).__name__}]"


#: how servers say a call's arguments do not fit the schema, as an ``isError`` result: the
#: Python SDK ("1 validation error for forecastArguments"), FastMCP, the TypeScript SDK
#: ("Invalid arguments for tool ...", "Input validation error: ...")
_REFUSED_ARGUMENTS = re.compile(r"validation error|invalid (arguments|params|parameters)\b",
                                re.IGNORECASE)


def to_result(result: Any) -> McpResult:
    """Read a ``CallToolResult`` (the SDK's model, or its JSON as a dict)."""
    content = _get(result, "content") or []
    if not isinstance(content, (list, tuple)):
        content = [content]
    pieces = [content_text(item) for item in content]
    text = "\n".join(pieces) if pieces else None
    is_error = bool(_field(result, "is_error", "isError"))
    structured = _field(result, "structured_content", "structuredContent")
    if is_error:
        return McpResult(text or "the MCP tool reported an error without a message", None, True,
                         refused_arguments=bool(text and _REFUSED_ARGUMENTS.search(text)))
    return McpResult(text, structured, False)


def result_text(result: McpResult) -> str:
    """The observation of a successful result.

    With ``structuredContent`` it is that object as JSON — unless the text says the same
    thing (servers send both; the SDK wraps a plain return value as ``{"result": value}``),
    in which case the plainer text is kept. Otherwise it is the text.
    """
    if result.object is not None:
        if result.text is not None and _same(result.text, result.object):
            return result.text
        return json.dumps(result.object, ensure_ascii=False)
    return result.text or ""


def _same(text: str, obj: Any) -> bool:
    candidates = [obj]
    if isinstance(obj, dict) and set(obj) == {"result"}:
        candidates.append(obj["result"])
    for candidate in candidates:
        if isinstance(candidate, str) and candidate == text:
            return True
        try:
            if json.loads(text) == candidate:
                return True
        except ValueError:
            continue
    return False
