"""Choose an LLM provider from one string, as given on a command line or in config."""

from __future__ import annotations

import os
from collections.abc import Mapping

from toolmesh.llm.base import LLMError, LLMProvider
from toolmesh.llm.openai import DEFAULT_TIMEOUT, OpenAICompatible
from toolmesh.llm.scripted import ScriptedLLM
from toolmesh.logs import register_secret
from toolmesh.urls import mask_url

MODEL_ENV = "TOOLMESH_LLM_MODEL"
API_KEY_ENVS = ("TOOLMESH_LLM_API_KEY", "OPENAI_API_KEY")

ACCEPTED = ("'http://HOST:PORT/v1' or 'https://HOST/v1' (an OpenAI-compatible server; the "
            "API root including /v1), or 'scripted:/path/to/script.json' (answers from a file)")


def open_provider(spec: str, *, model: str | None = None, api_key: str | None = None,
                  timeout: float = DEFAULT_TIMEOUT, temperature: float | None = None,
                  max_tokens: int | None = None, server: str | None = None,
                  environ: Mapping[str, str] | None = None) -> LLMProvider:
    """The provider ``spec`` names.

    * ``http://...`` / ``https://...`` — :class:`OpenAICompatible` at that base URL; the model
      is ``model`` or ``$TOOLMESH_LLM_MODEL`` (required), the API key ``api_key`` or
      ``$TOOLMESH_LLM_API_KEY`` or ``$OPENAI_API_KEY`` (optional: local servers need none);
    * ``scripted:PATH`` — :meth:`ScriptedLLM.from_file`.

    ``server``: which kind of OpenAI-compatible server it is (:mod:`toolmesh.llm.quirks`;
    default: recognised at the first call). ``environ`` replaces ``os.environ`` (for tests). Anything else raises :class:`LLMError`.
    """
    env = os.environ if environ is None else environ
    if spec.startswith(("http://", "https://")):
        model = model or env.get(MODEL_ENV)
        if not model:
            raise LLMError(f"no model given for the LLM at {mask_url(spec)}; set {MODEL_ENV} "
                           "or pass the model explicitly (e.g. gpt-4o-mini, or a name your "
                           "server serves)")
        key = api_key or next((env[name] for name in API_KEY_ENVS if env.get(name)), None)
        register_secret(key)
        return OpenAICompatible(base_url=spec, model=model, api_key=key, timeout=timeout,
                                temperature=temperature, max_tokens=max_tokens, server=server)
    if spec.startswith("scripted:"):
        path = spec.removeprefix("scripted:")
        if not path:
            raise LLMError(f"'scripted:' needs a file path; accepted forms: {ACCEPTED}")
        return ScriptedLLM.from_file(path)
    raise LLMError(f"unsupported LLM {mask_url(spec)!r}; accepted forms: {ACCEPTED}")
