"""The set of tools an agent offers, rebuilt from config on every change."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolmesh.agent.selection import Catalogue
from toolmesh.agent.status import ToolStatus
from toolmesh.agent.tools import Tool, ToolBuildError, build_tool
from toolmesh.agent.tools.context import BuildContext, ClientPool
from toolmesh.config.client import ConfigSnapshot
from toolmesh.config.service import DEFAULT_WORKSPACE
from toolmesh.registry.merge import SETTINGS, merge
from toolmesh.registry.wire import Announcement

log = logging.getLogger("toolmesh.agent.tools")

#: the reason a tool item with ``"enabled": false`` gives for not being offered
DISABLED = "disabled by its config item (\"enabled\": false)"

#: the key of ``settings/workspace`` that picks a workspace's tool-calling strategy, and its
#: values
TOOL_CALLING_SETTING = "tool-calling"
TOOL_CALLING_CHOICES = ("auto", "native", "json", "react")

#: the config types an agent watches (``settings``: the workspace's, e.g. whether it takes
#: announced tools)
WATCHED_TYPES = ("tool", "tool-service", "mcp", "settings")


@dataclass(frozen=True)
class ToolSet:
    """Tools by name, the config version they come from, and what could not be built."""

    version: int = -1
    tools: Mapping[str, Tool] = field(default_factory=dict)
    problems: Mapping[str, str] = field(default_factory=dict)
    #: tool key -> the status of an item that is not a tool (not buildable, name taken)
    refused: Mapping[str, ToolStatus] = field(default_factory=dict)
    #: the workspace whose tool items these are
    workspace: str = DEFAULT_WORKSPACE
    #: tool key -> service id: the tools (offered or refused) that come from announcements
    announced: Mapping[str, str] = field(default_factory=dict)
    #: tool key -> service id: announced tools a configured item of the same key overrides
    overridden: Mapping[str, str] = field(default_factory=dict)
    #: whether the tool set takes announced tools (the process and the workspace allow it)
    accepts_announcements: bool = True
    #: how the workspace's dialogs ask for tool calls (``settings/workspace``'s
    #: ``tool-calling``; ``auto``: as the agent and its LLM decide)
    tool_calling: str = "auto"
    #: the tools as retrieval sees them (tool selection), built once per tool set
    catalogue: Catalogue = field(default_factory=Catalogue, compare=False, repr=False)

    def offered(self, *, groups: Sequence[str] | None, state: str | None) -> list[Tool]:
        """The tools for a request in ``groups`` (default ``["default"]``) and ``state``."""
        wanted = set(groups or ("default",))
        offered = []
        for tool in self.tools.values():
            info = tool.info
            in_group = "*" in wanted or "*" in info.group or bool(wanted & set(info.group))
            in_state = "*" in info.applicable_states or (state is not None
                                                         and state in info.applicable_states)
            if in_group and in_state:
                offered.append(tool)
        return sorted(offered, key=lambda t: t.name)

    def statuses(self) -> list[ToolStatus]:
        """Every tool item, by key: offered, or not and why (as of the tools' last prepare)."""
        by_key = dict(self.refused)
        for tool in self.tools.values():
            by_key[tool.info.key] = ToolStatus.of(tool)
        return [by_key[key].announced_by(self.announced.get(key)) for key in sorted(by_key)]


def parse_snapshot(snapshot: ConfigSnapshot) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The JSON values of a snapshot by type and key, and the keys that do not parse."""
    parsed: dict[str, dict[str, Any]] = {}
    problems: dict[str, str] = {}
    for type, items in snapshot.items.items():
        parsed[type] = {}
        for key, raw in items.items():
            try:
                value = json.loads(raw)
                if not isinstance(value, dict):
                    raise ValueError("not a JSON object")
                parsed[type][key] = value
            except ValueError as e:
                problems[f"{type}/{key}"] = f"{type}/{key} is not a JSON object: {e}"
    return parsed, problems


async def build_toolset(snapshot: ConfigSnapshot, *, clients: ClientPool,
                        services: dict[str, Any],
                        announced: Mapping[str, Announcement] | None = None,
                        accept: bool = True) -> ToolSet:
    """Build every tool of ``snapshot`` and of the ``announced`` services (id ->
    announcement) no configured item overrides (:mod:`toolmesh.registry.merge`; ``accept``:
    whether announced tools are taken at all).

    A tool that cannot be built is not offered, and the problem is reported (logged, and in
    its status); the other changes apply. Validation on put refuses malformed items, so what
    fails here is a tool that could only fail: its mcp or tool-service item is gone, its type
    has no implementation, a required config-param is missing. Keeping its previous
    definition would offer exactly that. Two tools with one name: the first key wins,
    configured items before announced ones.
    """
    parsed, problems = parse_snapshot(snapshot)
    merged = merge(parsed, announced or {}, accept=accept)
    config = merged.config
    context = BuildContext(clients=clients, config=config, services=services,
                           workspace=snapshot.workspace)
    tools: dict[str, Tool] = {}
    refused: dict[str, ToolStatus] = {
        key: ToolStatus.refused(key, announced[id].tools.get(key) if announced else None,
                                reason)
        for key, (id, reason) in merged.refused.items()}
    items = config.get("tool", {})
    configured = sorted((set(items) - set(merged.announced)) | set(snapshot.of("tool")))
    for key in [*configured, *sorted(merged.announced)]:
        try:
            if key not in items:
                raise ToolBuildError(problems[f"tool/{key}"])  # its JSON did not parse
            if items[key].get("enabled", True) is False:  # the operator's choice, no problem
                refused[key] = ToolStatus.refused(key, items[key], DISABLED)
                continue
            tool = await build_tool(key, items[key], context)
        except (ToolBuildError, KeyError, TypeError, ValueError) as e:
            message = e.message if isinstance(e, ToolBuildError) else f"tool/{key}: {e!r}"
            problems[f"tool/{key}"] = message
            refused[key] = ToolStatus.refused(key, items.get(key), message)
            continue
        if tool.name in tools:
            message = (f"tool/{key} is named {tool.name!r} like tool/"
                       f"{tools[tool.name].info.key}; it is not offered")
            problems[f"tool/{key}"] = message
            refused[key] = ToolStatus.refused(key, items[key], message)
            continue
        tools[tool.name] = tool
    for where, problem in problems.items():
        log.error("config version %d of workspace %r: %s", snapshot.version,
                  snapshot.workspace, problem)
    announced_keys = {**merged.announced, **{k: id for k, (id, _) in merged.refused.items()}}
    return ToolSet(snapshot.version, tools, problems, refused, workspace=snapshot.workspace,
                   announced=announced_keys, overridden=merged.overridden,
                   accepts_announcements=merged.accepted,
                   tool_calling=workspace_tool_calling(parsed))


def workspace_tool_calling(config: Mapping[str, Mapping[str, Any]]) -> str:
    """The ``tool-calling`` of a workspace's ``settings/workspace`` item (``auto`` without
    one; the item was validated on put)."""
    settings = config.get(SETTINGS[0], {}).get(SETTINGS[1])
    value = settings.get(TOOL_CALLING_SETTING) if isinstance(settings, Mapping) else None
    return value if value in TOOL_CALLING_CHOICES else "auto"
