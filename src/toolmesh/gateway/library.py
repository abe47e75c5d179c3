"""TrustGraph's ``librarian`` service, answered for a system that keeps no documents.

TrustGraph's library stores documents for its knowledge pipelines; toolmesh has no document
store, so its library is empty, and says so the way TrustGraph says it:
``{"operation": "list-documents"}`` → ``{"document-metadatas": []}`` (also
``list-processing`` → ``{"processing-metadatas": []}``). ``tg-verify-system-status`` asks
this to see the library service answer; ``tg-show-library-documents`` shows none. Every other
operation (adding, fetching, removing a document) is refused with ``not-supported``: saying
"done" for a document nobody keeps would lie.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

EMPTY_LISTS = {"list-documents": "document-metadatas",
               "list-processing": "processing-metadatas"}


class LibrarianService:
    """The gateway's ``librarian`` endpoint (module docstring)."""

    name = "librarian"
    per_flow = False

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def call(self, request: dict[str, Any], *, workspace: str,
                   flow: str) -> AsyncIterator[tuple[dict[str, Any], bool]]:
        operation = request.get("operation")
        listed = EMPTY_LISTS.get(operation) if isinstance(operation, str) else None
        if listed is not None:
            yield {listed: []}, True
            return
        yield {"error": {"type": "not-supported", "message": (
            f"the library operation {operation!r} is not supported: toolmesh keeps no "
            "documents (its library is always empty; it answers "
            f"{' and '.join(EMPTY_LISTS)})")}}, True
