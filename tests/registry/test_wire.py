"""The announcement wire: what is an announcement, and every way one is refused."""

from __future__ import annotations

from typing import Any

import pytest

from toolmesh.registry.wire import Announcement, AnnouncementError, Goodbye, parse
from toolmesh.tools.services.joke import DEFINITION


def announcement(**fields: Any) -> dict[str, Any]:
    """The joke service's announcement, as its process sends it, with ``fields`` changed."""
    items = DEFINITION.items()
    return {"id": "joke-service", "instance": "host-1-abc", "workspace": "default",
            "descriptor": items[("tool-service", "joke-service")],
            "tools": {"tell-joke": items[("tool", "tell-joke")]}, "ttl": 15,
            "host": "host", "pid": 1, "started": 1764700000.5, **fields}


def test_an_announcement_round_trips() -> None:
    parsed = parse(announcement())
    assert isinstance(parsed, Announcement)
    assert (parsed.id, parsed.instance, parsed.workspace, parsed.ttl) == \
        ("joke-service", "host-1-abc", "default", 15.0)
    assert parsed.tools["tell-joke"]["style"] == "pun"
    assert parse(parsed.to_wire()) == parsed


def test_only_the_required_fields_are_needed() -> None:
    bare = announcement()
    for optional in ("workspace", "host", "pid", "started"):
        del bare[optional]
    parsed = parse(bare)
    assert isinstance(parsed, Announcement)
    assert (parsed.workspace, parsed.host, parsed.pid, parsed.started) == \
        ("default", None, None, None)


def test_a_goodbye_needs_only_id_and_instance() -> None:
    assert parse({"id": "joke-service", "instance": "i", "goodbye": True}) == \
        Goodbye(id="joke-service", instance="i")


def test_the_descriptor_may_leave_out_its_id() -> None:
    value = announcement()
    del value["descriptor"]["id"]
    parsed = parse(value)
    assert isinstance(parsed, Announcement) and parsed.descriptor["id"] == "joke-service"


REFUSED = [
    ([], "a JSON object, not an array"),
    (announcement(id=""), "'id' must be a non-empty string"),
    (announcement(id=7), "'id' must be a non-empty string"),
    (announcement(instance=None), "'instance' must be a non-empty string"),
    (announcement(workspace="x" * 201), "'workspace' must be a non-empty string"),
    (announcement(ttl=0), "'ttl' must be a number of seconds from 1 to 3600"),
    (announcement(ttl=True), "'ttl' must be a number"),
    (announcement(ttl="15"), "'ttl' must be a number"),
    (announcement(ttl=float("nan")), "'ttl' must be a number"),
    (announcement(goodbye="yes"), "'goodbye' must be true or false"),
    (announcement(descriptor=[]), "'descriptor' must be a tool-service item"),
    (announcement(descriptor={"id": "other", "request-queue": "request:tg:x",
                              "response-queue": "response:tg:x"}),
     "'descriptor' has the id 'other'"),
    (announcement(descriptor={"request-queue": "not a queue", "response-queue": "response:tg:x"}),
     "'descriptor': invalid field 'request-queue'"),
    (announcement(descriptor={"request-queue": "notify:tg:tool-descriptors",
                              "response-queue": "response:tg:x"}),
     "is a notify (broadcast) queue"),
    (announcement(descriptor={"enabled": False}), "may not disable itself"),
    (announcement(tools=[]), "'tools' must be an object of tool items by key"),
    (announcement(tools={"t": "text"}), 'tools["t"] must be a tool item'),
    (announcement(tools={"t": {"type": "mcp-tool", "name": "t", "description": "d",
                               "mcp-tool": "x"}}),
     "an announced tool must have type 'tool-service' and service 'joke-service'"),
    (announcement(tools={"t": {"type": "tool-service", "name": "t", "description": "d",
                               "service": "someone-else"}}),
     "service 'joke-service' (its own)"),
    (announcement(tools={"t": {"type": "tool-service", "service": "joke-service",
                               "description": "no name"}}),
     "invalid field 'name' of tool/t: is required"),
    (announcement(tools={f"t{i}": {} for i in range(257)}), "at most 256 may be announced"),
]


@pytest.mark.parametrize(("value", "problem"), REFUSED)
def test_a_malformed_announcement_is_refused_with_the_field_named(value: Any,
                                                                  problem: str) -> None:
    with pytest.raises(AnnouncementError) as refused:
        parse(value)
    assert problem in refused.value.message
    assert refused.value.type == "malformed-announcement"
