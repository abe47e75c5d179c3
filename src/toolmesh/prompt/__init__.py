"""The prompt layer: named Jinja2 templates, rendered and sent to text-completion.

``PromptService`` serves TrustGraph's prompt wire on the bus (templates from
:data:`DEFAULT_TEMPLATES`, overridden live by config items of type ``prompt``);
``PromptClient`` calls it.
"""

from toolmesh.prompt.defaults import DEFAULT_TEMPLATES
from toolmesh.prompt.service import (
    PROMPT_REQUEST_QUEUE,
    PROMPT_RESPONSE_QUEUE,
    PromptClient,
    PromptService,
)
from toolmesh.prompt.templates import PromptError, PromptTemplate, ResponseType, extract_json

__all__ = [
    "DEFAULT_TEMPLATES", "PROMPT_REQUEST_QUEUE", "PROMPT_RESPONSE_QUEUE", "PromptClient",
    "PromptError", "PromptService", "PromptTemplate", "ResponseType", "extract_json",
]
