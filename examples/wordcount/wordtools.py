"""A tool service that counts words: the example of docs/tool-services.md."""

from typing import Any

from toolmesh.tools import Argument, DynamicToolService, Tool, ToolServiceDefinition


class WordCount(DynamicToolService):
    """Counts the words of a text."""

    # What the service offers the agent: it announces this while it runs.
    definition = ToolServiceDefinition(
        id="word-count",
        tools=[Tool("count-words", "Count the words in a text",
                    arguments=[Argument("text", "string", "The text whose words to count",
                                        required=True)])],
    )

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        words = arguments["text"].split()
        return f"{len(words)} words"
