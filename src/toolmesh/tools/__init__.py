"""Tool services: the server base class, the client, and the built-in examples."""

from toolmesh.tools.client import ToolServiceClient
from toolmesh.tools.service import DynamicToolService

__all__ = ["DynamicToolService", "ToolServiceClient"]
