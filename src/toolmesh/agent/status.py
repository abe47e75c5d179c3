"""Whether each tool item is offered to the LLM, and if not, why: what `toolmesh tools`,
``tg-show-tools`` and the gateway's ``agent-tools`` service show."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from toolmesh.agent.tools import Tool

Status = Literal["available", "not-offered"]


@dataclass(frozen=True, kw_only=True)
class ToolStatus:
    """One ``tool`` config item as the agent sees it."""

    key: str
    name: str | None
    type: str | None
    status: Status
    #: why the tool is not offered (``None`` when it is)
    reason: str | None = None
    #: the id of the tool service that announced it (``None``: a configured item)
    announced_by_service: str | None = None

    def announced_by(self, service: str | None) -> ToolStatus:
        """This status, of a tool the service ``service`` announced (``None``: configured)."""
        return self if service is None else replace(self, announced_by_service=service)

    @classmethod
    def of(cls, tool: Tool) -> ToolStatus:
        """The status of a built tool: offered unless it says it cannot work now."""
        reason = tool.unavailable
        return cls(key=tool.info.key, name=tool.name, type=tool.info.type or None,
                   status="available" if reason is None else "not-offered", reason=reason)

    @classmethod
    def refused(cls, key: str, item: Any, reason: str) -> ToolStatus:
        """The status of an item that did not become a tool (``item``: its value, if JSON)."""
        fields = item if isinstance(item, dict) else {}
        name, type = fields.get("name"), fields.get("type")
        return cls(key=key, name=name if isinstance(name, str) else None,
                   type=type if isinstance(type, str) else None, status="not-offered",
                   reason=reason)

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"key": self.key, "name": self.name, "type": self.type,
                                "status": self.status}
        if self.reason is not None:
            wire["reason"] = self.reason
        wire["source"] = "announced" if self.announced_by_service else "configured"
        if self.announced_by_service:
            wire["service"] = self.announced_by_service
        return wire
