"""Configured items win over announced ones; a workspace may refuse announcements."""

from __future__ import annotations

from typing import Any

from tests.registry.test_wire import announcement
from toolmesh.registry.merge import merge
from toolmesh.registry.wire import Announcement, parse


def announced(id: str = "joke-service", **fields: Any) -> dict[str, Announcement]:
    value = announcement(id=id, **fields)
    value["descriptor"] = {**value["descriptor"], "id": id}
    value["tools"] = {k: {**t, "service": id} for k, t in value["tools"].items()}
    parsed = parse(value)
    assert isinstance(parsed, Announcement)
    return {id: parsed}


def test_announced_items_join_the_configured_ones() -> None:
    config = {"tool": {"mine": {"type": "prompt"}}, "tool-service": {}}
    merged = merge(config, announced())
    assert set(merged.config["tool"]) == {"mine", "tell-joke"}
    assert merged.config["tool-service"]["joke-service"]["request-queue"] == \
        "non-persistent://tg/request/joke"
    assert merged.announced == {"tell-joke": "joke-service"}
    assert config == {"tool": {"mine": {"type": "prompt"}}, "tool-service": {}}  # untouched


def test_a_configured_item_of_the_same_key_wins() -> None:
    mine = {"type": "tool-service", "name": "my-joke", "service": "joke-service",
            "description": "renamed"}
    descriptor = {"id": "joke-service", "request-queue": "request:tg:elsewhere",
                  "response-queue": "response:tg:elsewhere"}
    merged = merge({"tool": {"tell-joke": mine}, "tool-service": {"joke-service": descriptor}},
                   announced())
    assert merged.config["tool"]["tell-joke"] is mine
    assert merged.config["tool-service"]["joke-service"] is descriptor
    assert merged.overridden == {"tell-joke": "joke-service"}
    assert merged.announced == {}


def test_a_tool_key_announced_twice_goes_to_the_first_service_by_id() -> None:
    both = {**announced("b-jokes"), **announced("a-jokes")}
    merged = merge({}, both)
    assert merged.announced == {"tell-joke": "a-jokes"}
    service, why = merged.refused["tell-joke"]
    assert service == "b-jokes" and "announced by tool service 'a-jokes' too" in why


def test_announcements_can_be_refused_by_the_process_or_the_workspace() -> None:
    assert merge({}, announced(), accept=False).config == {}
    settings = {"settings": {"workspace": {"accept-announcements": False}}}
    merged = merge(settings, announced())
    assert merged.config == settings and not merged.accepted
    on = {"settings": {"workspace": {"accept-announcements": True}}}
    assert merge(on, announced()).announced == {"tell-joke": "joke-service"}
