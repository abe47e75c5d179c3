"""Configured items and announced ones, as one config: the rule that configured items win.

An agent builds its tools from one ``{type: {key: item}}`` view. Announced services add their
``tool-service`` descriptor and ``tool`` items to it, but never over a configured item with
the same key: an operator renames, restricts or disables (``"enabled": false``) an announced
tool or service by writing an item of that key. A tool key announced by two services goes to
the first by service id; the other's is refused, and says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolmesh.registry.wire import Announcement

#: the config item that holds a workspace's settings (type, key)
SETTINGS = ("settings", "workspace")
ACCEPT_ANNOUNCEMENTS = "accept-announcements"


@dataclass(frozen=True, kw_only=True)
class Merged:
    """The config an agent builds its tools from, and where each announced part went."""

    #: type -> key -> item: the configured items, and the announced ones no item overrides
    config: Mapping[str, Mapping[str, Any]]
    #: tool key -> service id: tools that come from an announcement
    announced: Mapping[str, str] = field(default_factory=dict)
    #: tool key -> service id: announced tools a configured item of their key overrides
    overridden: Mapping[str, str] = field(default_factory=dict)
    #: tool key -> (service id, why): announced tools not taken
    refused: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    #: whether the workspace takes announcements at all
    accepted: bool = True


def accepts_announcements(config: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether a workspace's settings item lets announced tools in (the default: yes)."""
    settings = config.get(SETTINGS[0], {}).get(SETTINGS[1])
    if not isinstance(settings, Mapping):
        return True
    return settings.get(ACCEPT_ANNOUNCEMENTS, True) is not False


def merge(config: Mapping[str, Mapping[str, Any]], announced: Mapping[str, Announcement], *,
          accept: bool = True) -> Merged:
    """``config`` with the services of ``announced`` (id -> announcement) added where no
    configured item has their key; ``accept=False`` (or the workspace's setting) adds none."""
    accept = accept and accepts_announcements(config)
    if not accept or not announced:
        return Merged(config=config, accepted=accept)
    services = dict(config.get("tool-service", {}))
    configured_tools = config.get("tool", {})
    tools = dict(configured_tools)
    from_announcement: dict[str, str] = {}
    overridden: dict[str, str] = {}
    refused: dict[str, tuple[str, str]] = {}
    for id in sorted(announced):
        a = announced[id]
        services.setdefault(id, a.descriptor)
        for key, item in sorted(a.tools.items()):
            if key in configured_tools:
                overridden[key] = id
            elif key in from_announcement:
                first = from_announcement[key]
                why = (f"tool key {key!r} is announced by tool service {first!r} too, and "
                       f"{first!r}'s is offered; configure one of them")
                refused[key] = (id, why)
            else:
                tools[key] = item
                from_announcement[key] = id
    return Merged(config={**config, "tool-service": services, "tool": tools},
                  announced=from_announcement, overridden=overridden, refused=refused)
