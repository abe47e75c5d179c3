"""The prompt layer: named Jinja2 templates, rendered and sent to text-completion.

``PromptService`` serves TrustGraph's prompt wire on the bus (templates from
:data:`DEFAULT_TEMPLATES`, overridden live, per workspace, by config items of type ``prompt``
in TrustGraph's layout: :mod:`toolmesh.prompt.layout`); ``PromptClient`` calls it.
:func:`shipped_items` writes the shipped prompts as the config items they stand for.
"""

from toolmesh.prompt.defaults import DEFAULT_SYSTEM, DEFAULT_TEMPLATES
from toolmesh.prompt.layout import shipped_items
from toolmesh.prompt.service import (
    PROMPT_REQUEST_QUEUE,
    PROMPT_RESPONSE_QUEUE,
    PromptClient,
    PromptService,
)
from toolmesh.prompt.templates import (
    PromptError,
    PromptTemplate,
    ResponseType,
    extract_json,
)

__all__ = [
    "DEFAULT_SYSTEM", "DEFAULT_TEMPLATES", "PROMPT_REQUEST_QUEUE", "PROMPT_RESPONSE_QUEUE",
    "PromptClient", "PromptError", "PromptService", "PromptTemplate", "ResponseType",
    "extract_json", "shipped_items",
]
