"""The LLM layer: the provider seam, its implementations, and the text-completion service.

::

    from toolmesh.llm import open_provider, TextCompletionService

    llm = open_provider("http://localhost:11434/v1", model="llama3.2")   # or "scripted:x.json"
    async with TextCompletionService(bus, llm):
        ...
"""

from toolmesh.llm.base import Completion, CompletionStream, LLMError, LLMProvider
from toolmesh.llm.factory import open_provider
from toolmesh.llm.openai import OpenAICompatible
from toolmesh.llm.scripted import Rule, ScriptedLLM
from toolmesh.llm.service import TextCompletionClient, TextCompletionService

__all__ = [
    "Completion", "CompletionStream", "LLMError", "LLMProvider", "OpenAICompatible", "Rule",
    "ScriptedLLM", "TextCompletionClient", "TextCompletionService", "open_provider",
]
