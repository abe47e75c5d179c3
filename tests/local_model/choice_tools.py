"""A small tool service for the real-model choice check: three tools a question needs one of,
besides the built-in ``tell-joke``, and questions none of the project's tuning ever used (the
benchmark's sets are bench/choice; these are the tests' own).

    toolmesh serve --tool-service tests.local_model.choice_tools:Helpers
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from toolmesh.tools import Argument, ConfigParam, DynamicToolService, Tool, ToolServiceDefinition


@dataclass(frozen=True)
class Case:
    question: str
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


CASES = (
    Case("Spell the word rhythm for me", "spell-word", {"word": "rhythm"}),
    Case("How do you spell necessary?", "spell-word", {"word": "necessary"}),
    Case("What is the area of a circle with radius 3?", "circle-area", {"radius": 3}),
    Case("Compute the area of a circle of radius 10", "circle-area", {"radius": 10}),
    Case("Reverse the text 'stressed desserts'", "reverse-text",
         {"text": "stressed desserts"}),
    Case("Can you write 'hello world' backwards?", "reverse-text", {"text": "hello world"}),
    Case("Tell me a joke about owls", "tell-joke", {"topic": "owls"}),
    Case("Something funny about lawyers, please", "tell-joke", {"topic": "lawyers"}),
)


def _answer(tool: str, arguments: dict[str, Any]) -> str:
    if tool == "spell-word":
        return "-".join(str(arguments["word"]).upper())
    if tool == "circle-area":
        return f"{math.pi * float(arguments['radius']) ** 2:.2f}"
    return str(arguments["text"])[::-1]


class Helpers(DynamicToolService):
    """Spelling, a circle's area, reversing a text."""

    definition = ToolServiceDefinition(
        id="helpers", config_params=[ConfigParam("tool", required=True)],
        tools=[Tool("spell-word", "Spell a word letter by letter", config={"tool": "spell-word"},
                    arguments=[Argument("word", "string", "The word to spell",
                                        required=True)]),
               Tool("circle-area", "Compute the area of a circle", config={"tool": "circle-area"},
                    arguments=[Argument("radius", "number", "The circle's radius",
                                        required=True)]),
               Tool("reverse-text", "Write a text backwards", config={"tool": "reverse-text"},
                    arguments=[Argument("text", "string", "The text to reverse",
                                        required=True)])])

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        return _answer(str(config["tool"]), arguments)
