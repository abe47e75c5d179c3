"""Tool services used by the tests (importable by subprocesses as MODULE:CLASS)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from toolmesh import DynamicToolService
from toolmesh.tools.services.joke import JokeService


class Inventory(DynamicToolService):
    """Returns a JSON-able object: the config and arguments it was called with."""

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> Any:
        return {"user": user, "config": config, "arguments": arguments}


class Counter(DynamicToolService):
    """Streams the numbers 1..n as separate pieces; n = 0 yields nothing."""

    async def invoke(self, user: str, config: dict[str, Any],
                     arguments: dict[str, Any]) -> AsyncIterator[str]:
        for i in range(1, int(arguments.get("n", 3)) + 1):
            yield f"{i};"
        if arguments.get("fail_at_end"):
            raise ValueError("counted too far")


class Broken(DynamicToolService):
    """Always fails."""

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        raise KeyError("the database is missing")


class Gathering(DynamicToolService):
    """Answers only when `size` calls are being handled at the same time."""

    size = 8

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.barrier = asyncio.Barrier(self.size)

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        await self.barrier.wait()
        return "together"


class CountingJoke(JokeService):
    """The joke service, counting the calls this replica served."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.served = 0

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        self.served += 1
        return await super().invoke(user, config, arguments)
