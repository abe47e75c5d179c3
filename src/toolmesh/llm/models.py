"""Which model a text-completion service answers with: TrustGraph's ``list-models``.

``{"operation": "list-models"}`` is answered with ``{"models": [<model info>], "error": null,
"end_of_stream": true}``, a model info being TrustGraph's ``ModelInfo`` as its gateway encodes
it: ``id`` always, then only the fields known (``owned_by``, ``created``, ``context_length``,
``description``...). ``tg-list-models`` prints them.

A toolmesh text-completion service answers with *one* model (the one it was started with), so
that is the one listed, not every model the server behind it could load: an agent asking this
service could never get another. A provider lists itself with an ``async def models()``; one
without it is answered as TrustGraph answers a backend that cannot list
(``not-implemented``), so a client learns why instead of seeing an empty list.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolmesh.errors import ServiceError
from toolmesh.llm.base import LLMProvider

#: fields of TrustGraph's ModelInfo, as its gateway names them on the wire
MODEL_FIELDS = ("id", "name", "owned_by", "created", "description", "context_length",
                "max_output_length", "input_modalities", "output_modalities",
                "supported_features", "input_price", "output_price", "family",
                "parameter_size", "quantization", "format")


async def list_models(provider: LLMProvider) -> list[dict[str, Any]]:
    """The models ``provider`` answers with, as TrustGraph's wire carries them."""
    lister = getattr(provider, "models", None)
    if not callable(lister):
        raise ServiceError(f"{provider.name} does not list its models",
                           type="not-implemented")
    return [model_info(entry) for entry in await lister()]


def model_info(entry: Mapping[str, Any]) -> dict[str, Any]:
    """``entry`` with only ModelInfo's fields, and none left empty (as TrustGraph encodes)."""
    return {name: entry[name] for name in MODEL_FIELDS
            if entry.get(name) not in (None, "", [])}


def served_model(model: str, listing: Any) -> dict[str, Any]:
    """What an OpenAI-compatible server's ``GET /models`` answer (``listing``) says of
    ``model``: its owner, creation time and context length when the server tells them
    (vLLM: ``max_model_len``; llama.cpp: ``meta.n_ctx_train``), else the id alone."""
    info: dict[str, Any] = {"id": model}
    entries = listing.get("data") if isinstance(listing, dict) else None
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict) or entry.get("id") != model:
            continue
        if isinstance(entry.get("owned_by"), str):
            info["owned_by"] = entry["owned_by"]
        if _count(entry.get("created")):
            info["created"] = entry["created"]
        meta = entry.get("meta")
        context = next((value for value in (
            entry.get("context_length"), entry.get("max_model_len"),
            meta.get("n_ctx_train") if isinstance(meta, dict) else None) if _count(value)),
            None)
        if context is not None:
            info["context_length"] = context
        break
    return info


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
