"""Tool services: the server base class, its definition, the client, and the built-in
examples."""

from toolmesh.tools.client import ToolServiceClient
from toolmesh.tools.definition import Argument, ConfigParam, Tool, ToolServiceDefinition
from toolmesh.tools.service import DynamicToolService, call_key

__all__ = ["Argument", "ConfigParam", "DynamicToolService", "Tool", "ToolServiceClient",
           "ToolServiceDefinition", "call_key"]
