"""A tool service that takes every call and never answers (``tests.e2e.hang_service:HangService``).

It logs ``hanging on TAG`` once it holds a call, so a test knows the call has arrived; only a
stop (its drain running out) ends the call.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from toolmesh import DynamicToolService

log = logging.getLogger("tests.hang")


class HangService(DynamicToolService):
    """Consumes calls and answers none of them."""

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        log.info("hanging on %s", arguments.get("tag", ""))
        await asyncio.Event().wait()  # nothing ever sets it
        raise AssertionError("unreachable")
