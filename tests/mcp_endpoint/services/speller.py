"""A tool service that answers in pieces: ``spell`` streams a word letter by letter."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from toolmesh.tools import Argument, DynamicToolService, Tool, ToolServiceDefinition


class Speller(DynamicToolService):
    definition = ToolServiceDefinition(
        id="speller",
        tools=[Tool("spell", "Spell a word, letter by letter", arguments=[
            Argument("word", "string", "the word to spell", required=True)])])

    async def invoke(self, user: str, config: dict[str, Any],
                     arguments: dict[str, Any]) -> AsyncIterator[str]:
        for letter in arguments["word"]:
            await asyncio.sleep(0.01)
            yield letter
