"""The optional semantic half of tool retrieval: tools and the dialog as embedding vectors,
compared by cosine similarity.

Lexical retrieval finds "weather" for "Is it raining in Lima?" only if the weather tool's
description says "rain". An embedding model finds it either way, where one is served: an
OpenAI-compatible ``/v1/embeddings`` (OpenAI, vLLM, Ollama, llama.cpp's server with
``--embedding``), asked through the text-completion service. A tool's vector is asked once per
description (and kept while the tool set lives); the dialog's once per step.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol


class Embedder(Protocol):
    """What turns texts into vectors (the prompt service's client does, through the
    text-completion service's ``embeddings`` operation)."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; raises :class:`toolmesh.RequestError` when the
        model cannot."""
        ...


class VectorCache:
    """Vectors by text, at most ``size`` kept (the least recently used go first)."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._vectors: OrderedDict[str, list[float]] = OrderedDict()

    async def vectors(self, embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
        """The vector of each text: those not kept are asked of ``embedder``, in one request."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            fresh = await embedder.embed(missing)
            if len(fresh) != len(missing):
                raise ValueError(f"asked for {len(missing)} embeddings, got {len(fresh)}")
            for text, vector in zip(missing, fresh, strict=True):
                self._vectors[text] = vector
        out = []
        for text in texts:
            self._vectors.move_to_end(text)
            out.append(self._vectors[text])
        while len(self._vectors) > self._size:
            self._vectors.popitem(last=False)
        return out


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of the angle between ``a`` and ``b`` (0.0 for a zero vector)."""
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0
