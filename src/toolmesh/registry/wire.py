"""The announcement wire (docs/announcements.md): what a tool service says about itself.

On the broadcast queue ``non-persistent://tg/notify/tool-descriptors`` (≡
``notify:tg:tool-descriptors``) every instance of a self-announcing tool service sends::

    {"id": "joke-service", "instance": "host-1234-9f2c", "workspace": "default",
     "descriptor": {<a tool-service item>}, "tools": {"KEY": {<a tool item>}, ...},
     "ttl": 15, "host": "host", "pid": 1234, "started": 1764700000.0}

at start and then as a heartbeat every ``ttl / 3`` seconds, and ``{"id", "instance",
"goodbye": true}`` when it stops. An instance not heard from for ``ttl`` seconds is gone.
``host``, ``pid`` and ``started`` are optional (shown in listings).

Anyone may ask every instance to announce itself at once by sending any message on
``notify:tg:tool-descriptor-requests`` (an agent does at start, so it need not wait a
heartbeat); instances that do not listen are learned at their next heartbeat.

An announcement may only describe the service itself: its tools are ``tool-service`` tools of
its own ``id``. Everything else is refused with an :class:`AnnouncementError` naming the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolmesh.errors import ToolmeshError

ANNOUNCEMENT_QUEUE = "notify:tg:tool-descriptors"
PROBE_QUEUE = "notify:tg:tool-descriptor-requests"

#: seconds an instance counts as alive after its last announcement, unless it says otherwise
DEFAULT_TTL = 15.0
#: the bounds a ttl must lie in: a second (heartbeats several times a second would be noise)
#: to an hour (a dead instance offered for longer would be a trap)
MIN_TTL, MAX_TTL = 1.0, 3600.0
#: tools one announcement may carry, and the length of its names
MAX_TOOLS = 256
MAX_NAME = 200
#: the workspace an announcement that names none is in
DEFAULT_WORKSPACE = "default"


class AnnouncementError(ToolmeshError):
    """An announcement that is not one (the registry logs it once and ignores it)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, type="malformed-announcement")


@dataclass(frozen=True, kw_only=True)
class Announcement:
    """One instance of a tool service saying it is alive and what it offers."""

    id: str
    instance: str
    workspace: str
    #: the ``tool-service`` item
    descriptor: Mapping[str, Any]
    #: tool key -> ``tool`` item
    tools: Mapping[str, Mapping[str, Any]]
    ttl: float
    host: str | None = None
    pid: int | None = None
    #: when the instance started (seconds since the epoch), if it says
    started: float | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"id": self.id, "instance": self.instance,
                                "workspace": self.workspace,
                                "descriptor": dict(self.descriptor),
                                "tools": {k: dict(v) for k, v in self.tools.items()},
                                "ttl": self.ttl}
        for name in ("host", "pid", "started"):
            if getattr(self, name) is not None:
                wire[name] = getattr(self, name)
        return wire

    def definition(self) -> tuple[str, str]:
        """What the instance offers, comparable between instances (JSON text of the
        descriptor and of the tools)."""
        return (json.dumps(self.descriptor, sort_keys=True),
                json.dumps(self.tools, sort_keys=True))


@dataclass(frozen=True, kw_only=True)
class Goodbye:
    """An instance saying it stops (``workspace``: ``None`` when it names none: every
    workspace the instance announced in)."""

    id: str
    instance: str
    workspace: str | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"id": self.id, "instance": self.instance, "goodbye": True}
        if self.workspace is not None:
            wire["workspace"] = self.workspace
        return wire


def parse(value: Any) -> Announcement | Goodbye:
    """The announcement or goodbye ``value`` (a decoded message body) is, checked."""
    if not isinstance(value, dict):
        raise AnnouncementError(f"an announcement is a JSON object, not {_kind(value)}")
    id = _name(value, "id")
    instance = _name(value, "instance")
    workspace = value.get("workspace")
    if workspace is not None:
        workspace = _name(value, "workspace")
    goodbye = value.get("goodbye", False)
    if not isinstance(goodbye, bool):
        raise AnnouncementError(f"'goodbye' must be true or false, not {_kind(goodbye)}")
    if goodbye:
        return Goodbye(id=id, instance=instance, workspace=workspace)
    ttl = value.get("ttl")
    if (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl)
            or not MIN_TTL <= ttl <= MAX_TTL):
        raise AnnouncementError(f"'ttl' must be a number of seconds from {MIN_TTL:g} to "
                                f"{MAX_TTL:g}, not {json.dumps(ttl)[:40]}")
    descriptor = _descriptor(id, value.get("descriptor"))
    tools = _tools(id, value.get("tools"))
    host = value.get("host")
    pid = value.get("pid")
    started = value.get("started")
    return Announcement(
        id=id, instance=instance, workspace=workspace or DEFAULT_WORKSPACE,
        descriptor=descriptor, tools=tools, ttl=float(ttl),
        host=host[:MAX_NAME] if isinstance(host, str) else None,
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        started=float(started) if isinstance(started, (int, float))
        and not isinstance(started, bool) and math.isfinite(started) else None)


def _descriptor(id: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise AnnouncementError(f"'descriptor' must be a tool-service item (a JSON object), "
                                f"not {_kind(value)}")
    if value.get("id", id) != id:
        raise AnnouncementError(f"'descriptor' has the id {value['id']!r}, but the "
                                f"announcement is from {id!r}")
    if value.get("enabled", True) is not True:
        raise AnnouncementError("'descriptor' may not disable itself ('enabled' is for "
                                "configured items)")
    descriptor = {**value, "id": id}
    _check_item("tool-service", id, descriptor, where="'descriptor'")
    return descriptor


def _tools(id: str, value: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict):
        raise AnnouncementError(f"'tools' must be an object of tool items by key, not "
                                f"{_kind(value)}")
    if len(value) > MAX_TOOLS:
        raise AnnouncementError(f"'tools' has {len(value)} tools; at most {MAX_TOOLS} may be "
                                "announced")
    tools: dict[str, dict[str, Any]] = {}
    for key, item in value.items():
        where = f"tools[{json.dumps(key)[:MAX_NAME]}]"
        if not key or len(key) > MAX_NAME:
            raise AnnouncementError(f"{where}: a tool key is a name of 1 to {MAX_NAME} "
                                    "characters")
        if not isinstance(item, dict):
            raise AnnouncementError(f"{where} must be a tool item, not {_kind(item)}")
        if item.get("type") != "tool-service" or item.get("service") != id:
            # anything else would let a process on the bus offer tools of other services
            # (an MCP server's, a prompt) under its own name
            raise AnnouncementError(f"{where}: an announced tool must have type "
                                    f"'tool-service' and service {id!r} (its own)")
        if item.get("enabled", True) is not True:
            raise AnnouncementError(f"{where}: may not disable itself ('enabled' is for "
                                    "configured items)")
        _check_item("tool", key, item, where=where)
        tools[key] = item
    return tools


def _check_item(type: str, key: str, item: dict[str, Any], *, where: str) -> None:
    # the config service's own checks: an announced item is held to what a put would be
    from toolmesh.config.errors import ConfigError
    from toolmesh.config.validation import validate

    try:
        validate(type, key, json.dumps(item))
    except ConfigError as e:
        raise AnnouncementError(f"{where}: {e.message}") from None


def _name(value: dict[str, Any], field: str) -> str:
    name = value.get(field)
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME \
            or "\x00" in name:
        raise AnnouncementError(f"{field!r} must be a non-empty string of at most {MAX_NAME} "
                                f"characters, not {json.dumps(name)[:60]}")
    return name


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(type(value), "?")
