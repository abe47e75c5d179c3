"""What a tool call tells an MCP server in its ``_meta``: the trace it belongs to
(``traceparent``) and its idempotency key."""

from __future__ import annotations

from typing import Any

from toolmesh.telemetry import tracing

#: the ``_meta`` entry (and the mcp-tool request field) carrying a call's idempotency key:
#: the same on every attempt of one call, so a server can act once (docs/dialogs.md)
IDEMPOTENCY_KEY = "io.toolmesh/idempotency-key"


def call_meta(key: str | None) -> dict[str, Any] | None:
    """The ``_meta`` of one ``tools/call`` (``None``: nothing to say)."""
    meta = tracing.mcp_meta()
    if key is None:
        return meta
    return {**(meta or {}), IDEMPOTENCY_KEY: key}
