"""A tool service with a first draft's bug, for the tests of what its errors look like
(importable by a ``toolmesh run MODULE:CLASS`` process)."""

from __future__ import annotations

from typing import Any

from toolmesh import DynamicToolService
from toolmesh.errors import ServiceError

DESCRIPTOR = {"id": "wordcount", "request-queue": "non-persistent://tg/request/count-words",
              "response-queue": "non-persistent://tg/response/count-words",
              "config-params": []}
#: the tool as its config says: the argument is called "content", the service reads "text"
COUNT_WORDS = {"type": "tool-service", "name": "count-words", "service": "wordcount",
               "description": "Counts the words of a text",
               "arguments": [{"name": "content", "type": "string",
                              "description": "the text whose words to count"}]}


class CountWords(DynamicToolService):
    """Counts the words of ``text``, trusting the caller to send it: a KeyError otherwise."""

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        text = arguments["text"]
        if not text.strip():
            # refused on purpose: the service's own words for the user
            raise ServiceError("there is no text to count", type="tool-service-error")
        return str(len(text.split()))
