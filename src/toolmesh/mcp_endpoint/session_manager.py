"""The MCP SDK's streamable-HTTP session manager, with its sessions' ends told and ended on
demand.

The SDK's manager keeps one table of sessions for everyone (10,000, each ending after 30 min
idle): one token could fill it for all. toolmesh keeps the limits itself
(:mod:`.session_table`), so it needs two things the SDK has no public hook for: to hear when
a session ends, however it ends (a client's DELETE, a failed opening, a crash), and to end an
idle one to make room or when it expires. Both go through the manager's own
``_discard_session``, which forgets the session before it awaits anything, so its id answers
404 at once. ``tests/mcp_endpoint/test_sessions.py`` fails if an SDK release changes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

__all__ = ["SessionManager"]


class SessionManager(StreamableHTTPSessionManager):
    """The SDK's manager without limits or expiry of its own (toolmesh's table has them);
    ``on_end``: told the id of each session that ends."""

    def __init__(self, app: Any, *, on_end: Callable[[str], None], **kwargs: Any) -> None:
        super().__init__(app, session_idle_timeout=None, max_sessions=None, **kwargs)
        self._on_end = on_end

    async def end(self, session: str) -> None:
        """End ``session`` (its id answers 404 from now on; nothing if it is gone already)."""
        transport = self._server_instances.get(session)
        if transport is not None:
            await self._discard_session(session, transport)

    def open_sessions(self) -> int:
        """Sessions the SDK holds now."""
        return len(self._server_instances)

    async def _discard_session(self, session_id: str,
                               transport: StreamableHTTPServerTransport) -> None:
        if self._server_instances.get(session_id) is transport:
            self._on_end(session_id)
        await super()._discard_session(session_id, transport)
