"""Tool types TrustGraph has and toolmesh does not implement, and what to tell a user of one.

TrustGraph's ``knowledge-query``, ``structured-query`` and ``row-embeddings-query`` tools call
its graph-rag, structured-query and row-embeddings-query services. toolmesh runs none of
them, so a tool of such a type could only ever fail: the config service refuses a put of one,
and the agent does not offer one stored before; both say why with :func:`not_available`.
The same question can still reach such a service: through a tool service (docs/tool-services.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: tool type -> the TrustGraph service it calls
TRUSTGRAPH_ONLY: Mapping[str, str] = MappingProxyType({
    "knowledge-query": "graph-rag",
    "structured-query": "structured-query",
    "row-embeddings-query": "row-embeddings-query",
})


def not_available(tool_type: str) -> str | None:
    """Why a tool of ``tool_type`` cannot be offered here and what would change that, or
    ``None`` when the type is not one of TrustGraph's service-backed types."""
    service = TRUSTGRAPH_ONLY.get(tool_type)
    if service is None:
        return None
    return (f"tool type {tool_type!r} is not available in this deployment: it calls "
            f"TrustGraph's {service} service, which toolmesh does not run. To offer it, run "
            f"a tool service that answers the question (one that forwards to a {service} "
            f"service, say; `toolmesh run MODULE:CLASS`), describe it in a 'tool-service' "
            f"item and store this tool with type 'tool-service' and 'service' naming that "
            f"item")
