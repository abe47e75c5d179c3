"""The prompt layer: named Jinja2 templates, rendered and sent to text-completion.

``PromptService`` serves TrustGraph's prompt wire on the bus (templates from
:data:`DEFAULT_TEMPLATES`, overridden live, per workspace, by config items of type ``prompt``
in TrustGraph's layout: :mod:`toolmesh.prompt.layout`); ``PromptClient`` calls it.
:func:`shipped_items` writes the shipped prompts as the config items they stand for.
Templates render in worker processes within :class:`RenderLimits`
(:mod:`toolmesh.prompt.renderer`).

The names are loaded at first use, so that the render worker (:mod:`toolmesh.prompt.worker`),
which needs only the templates, starts without the service, the bus and the RPC layer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolmesh.prompt.defaults import DEFAULT_SYSTEM, DEFAULT_TEMPLATES
    from toolmesh.prompt.layout import shipped_items
    from toolmesh.prompt.sandbox import RenderLimits
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

#: where each public name lives
_HOMES = {
    "DEFAULT_SYSTEM": "defaults", "DEFAULT_TEMPLATES": "defaults", "shipped_items": "layout",
    "RenderLimits": "sandbox", "PROMPT_REQUEST_QUEUE": "service",
    "PROMPT_RESPONSE_QUEUE": "service", "PromptClient": "service", "PromptService": "service",
    "PromptError": "templates", "PromptTemplate": "templates", "ResponseType": "templates",
    "extract_json": "templates",
}

__all__ = [
    "DEFAULT_SYSTEM", "DEFAULT_TEMPLATES", "PROMPT_REQUEST_QUEUE", "PROMPT_RESPONSE_QUEUE",
    "PromptClient", "PromptError", "PromptService", "PromptTemplate", "RenderLimits",
    "ResponseType", "extract_json", "shipped_items",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
