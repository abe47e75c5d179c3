"""The joke service: the smallest useful tool service, shipped as an example.

Its config items are ``examples/joke/joke-service.json`` and ``tell-joke.json`` — what its
:data:`DEFINITION` describes, so ``toolmesh tool-service register joke`` writes the same. Run
it with ``toolmesh run joke``.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from typing import Any

from toolmesh.errors import ServiceError
from toolmesh.tools.definition import Argument, ConfigParam, Tool, ToolServiceDefinition
from toolmesh.tools.service import DynamicToolService

JOKES: dict[str, dict[str, list[str]]] = {
    "pun": {
        "programming": [
            "I would tell you a UDP joke, but you might not get it.",
            "Why do programmers prefer dark mode? Because light attracts bugs.",
        ],
        "animals": [
            "What do you call a fish with no eyes? A fsh.",
            "Why don't cats play poker in the jungle? Too many cheetahs.",
        ],
        "food": [
            "I'm on a seafood diet: I see food and I eat it.",
            "Why did the tomato blush? It saw the salad dressing.",
        ],
        "*": ["I'm reading a book about anti-gravity. It's impossible to put down."],
    },
    "dad-joke": {
        "programming": ["Why did the developer go broke? He used up all his cache."],
        "animals": ["What do you call a sleeping bull? A bulldozer."],
        "food": ["Why don't eggs tell jokes? They'd crack each other up."],
        "*": ["I used to hate facial hair, but then it grew on me."],
    },
    "one-liner": {
        "programming": ["There are 10 kinds of people: those who know binary and those who don't."],
        "*": ["I told my wife she was drawing her eyebrows too high. She looked surprised."],
    },
}

STYLES = tuple(JOKES)


def pick_joke(topic: str, style: str) -> str:
    """A joke for ``topic`` in ``style``; the same topic always gets the same joke."""
    if style not in JOKES:
        raise ServiceError(f"unknown joke style {style!r}; known styles: {', '.join(STYLES)}",
                           type="tool-service-error")
    by_topic = JOKES[style]
    key = topic.strip().lower()
    jokes = by_topic.get(key) or by_topic["*"]
    return jokes[zlib.crc32(key.encode()) % len(jokes)]


def tell_joke(user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
    """The joke service's observation for one call."""
    style = config.get("style", "pun")
    topic = arguments.get("topic", "")
    if not isinstance(topic, str):
        raise ServiceError(f"'topic' must be a string, not {type(topic).__name__}",
                           type="tool-service-error")
    return f"Hey {user}! Here's a {style} for you:\n\n{pick_joke(topic, str(style))}"


DEFINITION = ToolServiceDefinition(
    id="joke-service",
    topic="joke",
    config_params=[ConfigParam("style")],
    tools=[Tool("tell-joke", "Tell a joke on a given topic", config={"style": "pun"},
                arguments=[Argument("topic", "string", "The topic for the joke (e.g., "
                                    "programming, animals, food)", required=True)])],
)


class JokeService(DynamicToolService):
    """Tells a joke: ``style`` from config (default ``pun``), ``topic`` from the arguments."""

    definition = DEFINITION

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        return tell_joke(user, config, arguments)


class StreamingJokeService(DynamicToolService):
    """The joke service answering word by word, to show a streamed tool-service response."""

    definition = DEFINITION

    async def invoke(self, user: str, config: dict[str, Any],
                     arguments: dict[str, Any]) -> AsyncIterator[str]:
        words = tell_joke(user, config, arguments).split(" ")
        for i, word in enumerate(words):
            yield word if i == len(words) - 1 else word + " "
