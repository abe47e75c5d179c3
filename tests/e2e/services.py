"""The tool service the cross-process tests run as replicas (``tests.e2e.services:Replica``)."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from toolmesh import DynamicToolService

log = logging.getLogger("tests.replica")


class Replica(DynamicToolService):
    """Says which process served the call, after ``delay`` seconds of pretend work.

    It logs ``serving TAG`` when a call starts, so a test knows which replica holds which call.
    """

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        tag = str(arguments.get("tag", ""))
        log.info("serving %s", tag)
        await asyncio.sleep(float(arguments.get("delay", 0)))
        return f"{tag} served by replica {os.getpid()}"
