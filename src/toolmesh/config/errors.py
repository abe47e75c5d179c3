"""The error raised by the config layer."""

from __future__ import annotations

from toolmesh.errors import ToolmeshError


class ConfigError(ToolmeshError):
    """A config operation could not be done: a bad request, or the store failed.

    Travels on the wire as ``{"error": {"type": "config-error", "message": ...}}``.
    """

    type = "config-error"
