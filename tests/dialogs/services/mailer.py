"""A tool service that acts on the world once per idempotency key, as such a tool should:
each attempt is a line in ``attempts.log`` and each mail a file in ``sent/`` (the folder is
``$MAILER_DIR``); an attempt waits ``$MAILER_SECONDS`` before it sends, so a test can kill
the agent while the call is in flight."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from toolmesh.tools import Argument, DynamicToolService, Tool, ToolServiceDefinition, call_key


class Mailer(DynamicToolService):
    definition = ToolServiceDefinition(
        id="mailer",
        tools=[Tool("send", "Send a mail", arguments=[
            Argument("to", "string", "whom to send it to", required=True)])])

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        folder = Path(os.environ["MAILER_DIR"])
        key = call_key() or "no-key"
        with open(folder / "attempts.log", "a") as log:
            log.write(key + "\n")
        await asyncio.sleep(float(os.environ.get("MAILER_SECONDS", "0")))
        mail = folder / "sent" / key.replace("/", "_")
        mail.parent.mkdir(exist_ok=True)
        if not mail.exists():  # the side effect: once per key, whatever the attempts
            mail.write_text(f"to {arguments['to']}")
        return f"sent to {arguments['to']}"
