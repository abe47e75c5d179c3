"""``{"operation": "embeddings", "input": [text, ...]}``: the text-completion service's
embedding vectors, from a provider that has them (an OpenAI-compatible server's
``/v1/embeddings``). The agent's tool selection uses them with ``--tool-selection embeddings``
(:mod:`toolmesh.agent.selection.embeddings`).

Answer: ``{"embeddings": [[float, ...], ...], "model", "error": null, "end_of_stream": true}``,
one vector per input, in order; a provider without embeddings, or a server that refuses them,
answers an ``llm-error`` that says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolmesh.errors import ServiceError

#: the most texts, and characters in all, one request may ask for
MAX_INPUTS = 2048
MAX_CHARS = 4_000_000


def parse_input(request: Mapping[str, Any]) -> list[str]:
    """The texts of an embeddings request, checked (a ``malformed-request`` otherwise)."""
    texts = request.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise ServiceError("an embeddings request needs 'input': a non-empty list of strings",
                           type="malformed-request")
    if len(texts) > MAX_INPUTS or sum(map(len, texts)) > MAX_CHARS:
        raise ServiceError(f"an embeddings request may hold at most {MAX_INPUTS} texts of "
                           f"{MAX_CHARS:,} characters in all", type="malformed-request")
    return texts


async def answer(provider: Any, request: Mapping[str, Any]) -> dict[str, Any]:
    """The response to an embeddings request (module docstring)."""
    texts = parse_input(request)
    embed = getattr(provider, "embed", None)
    if not callable(embed):
        raise ServiceError(f"{provider.name} gives no embeddings; --tool-selection embeddings "
                           "needs an OpenAI-compatible server that serves /v1/embeddings",
                           type="llm-error")
    vectors = await embed(texts)
    return {"error": None, "embeddings": vectors, "model": getattr(provider, "model", None),
            "end_of_stream": True}
