"""Every call the gateway's direct routes make carries an idempotency key (docs/dialogs.md,
"Each side effect once, route by route").

The ``tool-service`` and ``mcp-tool`` routes (REST and WebSocket) call a tool service or an
MCP server for the client. A client may name the call with its own key — ``"idempotency-key":
"..."`` in the request, sent again with every retry of that call — or leave it to the gateway,
which makes one per request. The key that goes on is the caller's under its token's id
(``TOKEN/KEY``), so two tokens' keys never meet in a tool's dedupe store: a key is only ever
its sender's.

Both services get it in their request's ``idempotency-key`` field: a tool service written
with the SDK then runs the call once per key; the mcp-tool service passes it to the MCP server
in the call's ``_meta`` (``io.toolmesh/idempotency-key``). A client's
``io.toolmesh/idempotency-key`` — the field of a dialog's calls, whose server's questions go
to the dialog's person — is taken as its key like ``idempotency-key``, and never passed on as
a dialog's.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from toolmesh.mcp.meta import IDEMPOTENCY_KEY as MCP_FIELD
from toolmesh.schema.tool_service import IDEMPOTENCY_KEY, client_key

#: the request field a client names its call with, on both routes
FIELD = IDEMPOTENCY_KEY
#: the routes that call a tool (call_approval.ROUTES, and the test of every route, agree)
ROUTES = frozenset({"tool-service", "mcp-tool"})


def with_key(route: str, request: dict[str, Any], *, caller: str) -> dict[str, Any]:
    """``request`` with the key its call goes with, when ``route`` calls a tool (else
    ``request`` itself); ``caller``: the id of the token that sent it. A key that is not a
    string of 1 to 200 printable characters is a ``bad-request``
    (:func:`~toolmesh.schema.tool_service.client_key`)."""
    if route not in ROUTES:
        return request
    given = _given(request)
    key = f"{caller}/{given}" if given is not None else f"{caller}/gw-{uuid.uuid4().hex}"
    out = {k: v for k, v in request.items() if k not in (FIELD, MCP_FIELD)}
    out[FIELD] = key
    return out


def _given(request: Mapping[str, Any]) -> str | None:
    """The client's own key, if it sent one (the spelling of a dialog's calls taken too)."""
    name = FIELD if FIELD in request else MCP_FIELD
    return client_key(request.get(name), field=name)
