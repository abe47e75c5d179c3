"""Secrets in config items: which fields hold them, masked reads, kept-on-put, encryption at
rest. Every reader that shows config to a person (the gateway, hence the CLIs and the web UI)
goes through :func:`mask_value` / :func:`mask_config_response`; the config service applies
:func:`keep_secrets` to every put and stores through :class:`SealedStore`."""

from toolmesh.secrets.crypto import SecretBox, SecretKeyError
from toolmesh.secrets.fields import MASK, keep_secrets, mask_value, secret_slots
from toolmesh.secrets.masking import mask_config_response
from toolmesh.secrets.store import SealedStore

__all__ = ["MASK", "SealedStore", "SecretBox", "SecretKeyError", "keep_secrets",
           "mask_config_response", "mask_value", "secret_slots"]
