"""The config service and watcher over every bus backend, with the SQLite store."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Backend
from toolmesh import Bus, Message, RequestError
from toolmesh.config.client import ConfigClient, ConfigSnapshot, ConfigWatcher
from toolmesh.config.service import CONFIG_PUSH_QUEUE, ConfigService, empty_response
from toolmesh.config.store import open_store

JOKE_SERVICE = json.dumps({"id": "joke-service", "request-queue": "non-persistent://tg/request/joke",
                           "response-queue": "non-persistent://tg/response/joke",
                           "config-params": [{"name": "style", "required": False}]})
TELL_JOKE = json.dumps({"type": "tool-service", "name": "tell-joke",
                        "description": "Tell a joke on a given topic", "service": "joke-service",
                        "style": "pun", "arguments": [{"name": "topic", "type": "string",
                                                       "description": "The topic"}]})


@pytest.fixture
async def config(backend: Backend, tmp_path: Path) -> AsyncIterator[tuple[ConfigService, ConfigClient]]:
    # Unique queues per test so tests on a shared broker never see each other's config.
    topic = backend.topic("config")
    queues = {"request_queue": f"request:tg:{topic}", "response_queue": f"response:tg:{topic}"}
    store = await open_store(str(tmp_path / "config.db"))
    service = ConfigService(await backend.connect(), store, push_queue=f"notify:tg:{topic}", **queues)
    async with service, ConfigClient(await backend.connect(), timeout=10, **queues) as client:
        yield service, client
    await store.close()


def queues_of(service: ConfigService) -> dict[str, str]:
    return {"request_queue": str(service.request_queue),
            "response_queue": str(service.response_queue), "push_queue": service.push_queue}


async def test_the_operations_of_spec_section_5(config: tuple[ConfigService, ConfigClient]) -> None:
    _, client = config
    r = await client.request({"operation": "put", "values": [
        {"type": "tool-service", "key": "joke-service", "value": JOKE_SERVICE},
        {"type": "tool", "key": "tell-joke", "value": TELL_JOKE},
        {"type": "other", "key": "anything", "value": "not json at all"}]})
    assert r == {"version": 1, "values": None, "directory": None, "config": None, "error": None}
    r = await client.request({"operation": "get", "keys": [
        {"type": "tool", "key": "tell-joke"}, {"type": "tool", "key": "missing"}]})
    assert r["version"] == 1
    assert r["values"] == [{"type": "tool", "key": "tell-joke", "value": TELL_JOKE},
                           {"type": "tool", "key": "missing", "value": None}]
    assert (await client.request({"operation": "list", "type": "tool"}))["directory"] == ["tell-joke"]
    r = await client.request({"operation": "getvalues", "type": "tool-service"})
    assert r["values"] == [{"type": "tool-service", "key": "joke-service", "value": JOKE_SERVICE}]
    r = await client.request({"operation": "config"})
    assert r["config"] == {"tool-service": {"joke-service": JOKE_SERVICE},
                           "tool": {"tell-joke": TELL_JOKE}, "other": {"anything": "not json at all"}}
    r = await client.request({"operation": "delete", "keys": [{"type": "other", "key": "anything"}]})
    assert r["version"] == 2
    assert "other" not in (await client.request({"operation": "config"}))["config"]


async def test_workspaces_are_separate(config: tuple[ConfigService, ConfigClient]) -> None:
    _, client = config
    await client.put({("tool", "a"): TELL_JOKE}, workspace="team-a")
    assert await client.get("tool", "a", workspace="team-a") == TELL_JOKE
    assert await client.get("tool", "a") is None
    assert (await client.config(workspace="team-b"))[1] == {}


@pytest.mark.parametrize(("type", "value", "complaint"), [
    ("tool-service", {"id": "x", "response-queue": "non-persistent://tg/response/x"},
     "field 'request-queue' of tool-service/bad: is required"),
    ("tool-service", {"id": "x", "request-queue": "joke", "response-queue": "response:tg:x"},
     "field 'request-queue' of tool-service/bad: invalid queue id 'joke'"),
    ("tool", {"type": "tool-service", "name": "n", "description": "d"},
     "field 'service' of tool/bad: is required"),
    ("tool", {"type": "mcp-tool", "name": "n", "description": "d"},
     "field 'mcp-tool' of tool/bad: is required"),
    ("tool", {"type": "teleport", "name": "n", "description": "d"},
     "field 'type' of tool/bad: unknown tool type 'teleport'"),
    ("tool", {"type": "prompt", "name": "n", "description": "d", "template": "t",
              "arguments": [{"name": "a", "type": "str"}]},
     "field 'arguments[0].type' of tool/bad: 'str' is not one of string, number"),
    ("mcp", {"remote-name": "x"}, "field 'url' of mcp/bad: is required"),
    ("mcp", {"transport": "stdio"}, "field 'command' of mcp/bad: is required"),
    # running a program is the operator's decision; by default no stdio command is allowed
    ("mcp", {"transport": "stdio", "command": "sh", "args": ["-c", "id"]},
     "mcp/bad is a stdio MCP server, which runs the command 'sh' on this machine, and the "
     "operator has not allowed that command (allowed: none); to allow it, start the config "
     "and mcp-tool services with --mcp-stdio-allow sh"),
    ("mcp", {"url": "http://h/mcp", "auth-token": "***"},
     "'auth-token' is '***' (a masked secret), but there is no stored value to keep"),
    ("mcp", {"url": "http://h/mcp", "transport": "carrier-pigeon"}, "field 'transport' of mcp/bad"),
    ("tool", [1, 2], "invalid tool/bad: the value must be a JSON object, not an array"),
])
async def test_invalid_items_refuse_the_whole_put(config: tuple[ConfigService, ConfigClient],
                                                  type: str, value: Any, complaint: str) -> None:
    _, client = config
    with pytest.raises(RequestError) as e:
        await client.put({("tool", "fine"): TELL_JOKE, (type, "bad"): json.dumps(value)})
    assert e.value.type == "config-error"
    assert complaint in e.value.message
    version, everything = await client.config()
    assert (version, everything) == (0, {})  # nothing stored, not even the good item


async def test_bad_requests_get_config_errors(config: tuple[ConfigService, ConfigClient]) -> None:
    _, client = config
    for request, complaint in [
        ({"operation": "frobnicate"}, "unknown config operation 'frobnicate'"),
        ({}, "unknown config operation None"),
        ({"operation": "put", "values": []}, "non-empty list"),
        ({"operation": "put", "values": [{"type": "t", "key": "k", "value": {"a": 1}}]},
         "must be a string (JSON text), not dict"),
        ({"operation": "get", "keys": "tool/x"}, "needs 'keys'"),
        ({"operation": "list"}, "needs 'type'"),
        ({"operation": "get", "keys": [{"type": "tool"}]}, "keys[0]"),
        # a falsy non-string is not taken for "no workspace" (the default one)
        ({"operation": "list", "type": "tool", "workspace": 0}, "'workspace' must be a string"),
        ({"operation": "list", "type": "tool", "workspace": []}, "'workspace' must be a string"),
    ]:
        with pytest.raises(RequestError) as e:
            await client.request(request)
        assert e.value.type == "config-error" and complaint in e.value.message, request


async def test_every_change_is_pushed_with_its_version_and_types(
        backend: Backend, config: tuple[ConfigService, ConfigClient]) -> None:
    service, client = config
    pushes: asyncio.Queue[Any] = asyncio.Queue()

    async def on_push(message: Message) -> None:
        pushes.put_nowait(message.json())

    await (await backend.connect()).subscribe(service.push_queue, on_push, subscription="spy")
    await client.put({("tool", "a"): TELL_JOKE, ("tool-service", "joke-service"): JOKE_SERVICE})
    await client.put({("prompt", "p"): "text"}, workspace="w2")
    await client.delete([("tool", "a")], workspace="w2")  # not there: no change, no push
    await client.delete([("tool", "a"), ("prompt", "p")], workspace="w2")
    async with asyncio.timeout(10):
        assert await pushes.get() == {"version": 1, "changes": {"tool": ["default"],
                                                                "tool-service": ["default"]}}
        assert await pushes.get() == {"version": 2, "changes": {"prompt": ["w2"]}}
        assert await pushes.get() == {"version": 3, "changes": {"prompt": ["w2"],
                                                                "tool": ["w2"]}}


# --- a request delivered more than once ----------------------------------------------------


async def listen(bus: Bus, queue: str, *, id: str | None = None) -> asyncio.Queue[Any]:
    """The bodies arriving on ``queue`` (only those with request id ``id``, if given)."""
    bodies: asyncio.Queue[Any] = asyncio.Queue()

    async def on_message(message: Message) -> None:
        if id is None or message.id == id:
            bodies.put_nowait(message.json())

    await bus.subscribe(queue, on_message, subscription=f"spy-{uuid.uuid4().hex[:8]}")
    return bodies


async def pushed_versions(pushes: asyncio.Queue[Any], *, until: int) -> list[int]:
    """The versions of the change pushes (not start-up pushes) up to version ``until``."""
    seen: list[int] = []
    async with asyncio.timeout(10):
        while not seen or seen[-1] < until:
            push = await pushes.get()
            if push["changes"]:
                seen.append(push["version"])
    return seen


async def deliver(bus: Bus, service: ConfigService, body: dict[str, Any], *, id: str,
                  copies: int) -> list[Any]:
    """Send ``body`` with request id ``id`` ``copies`` times straight on the service's request
    queue, as a broker redelivering it would; the answers."""
    answers = await listen(bus, str(service.response_queue), id=id)
    requests = await bus.producer(str(service.request_queue))
    for _ in range(copies):
        await requests.send(body, properties={"id": id})
    async with asyncio.timeout(10):
        return [await answers.get() for _ in range(copies)]


CHANGES = {
    "put": {"operation": "put", "values": [{"type": "tool", "key": "b", "value": TELL_JOKE}]},
    "delete": {"operation": "delete", "keys": [{"type": "tool", "key": "a"}]},
}


@pytest.mark.parametrize("operation", sorted(CHANGES))
async def test_a_change_delivered_twice_is_applied_once_pushed_once_and_answered_alike(
        backend: Backend, config: tuple[ConfigService, ConfigClient], operation: str) -> None:
    service, client = config
    await client.put({("tool", "a"): TELL_JOKE})  # version 1
    bus = await backend.connect()
    pushes = await listen(bus, service.push_queue)
    answers = await deliver(bus, service, CHANGES[operation], id=f"req-{uuid.uuid4()}", copies=2)
    assert answers == [empty_response(2)] * 2
    expected = ({"tool": {"a": TELL_JOKE, "b": TELL_JOKE}} if operation == "put" else {})
    assert await client.config() == (2, expected)
    await client.put({("prompt", "p"): "later"})  # 3: its push comes after any push of a copy
    assert await pushed_versions(pushes, until=3) == [2, 3]


async def test_a_delete_of_items_that_do_not_exist_makes_no_version_and_pushes_nothing(
        backend: Backend, config: tuple[ConfigService, ConfigClient]) -> None:
    service, client = config
    await client.put({("tool", "a"): TELL_JOKE})  # version 1
    bus = await backend.connect()
    pushes = await listen(bus, service.push_queue)
    nothing = {"operation": "delete", "keys": [{"type": "tool", "key": "b"},
                                               {"type": "tool", "key": "a"}]}
    assert await client.request({**nothing, "workspace": "elsewhere"}) == empty_response(1)
    request_id = f"req-{uuid.uuid4()}"
    # in the default workspace tool/a exists: a real delete, though tool/b does not
    assert await client.request(nothing) == empty_response(2)
    await client.put({("tool", "a"): TELL_JOKE})  # 3
    # delivered twice, then again once tool/b exists: each copy gets the first answer, and
    # deletes nothing
    b_only = {"operation": "delete", "keys": [{"type": "tool", "key": "b"}]}
    assert await deliver(bus, service, b_only, id=request_id, copies=2) == [empty_response(3)] * 2
    await client.put({("tool", "b"): TELL_JOKE})  # 4
    assert await deliver(bus, service, b_only, id=request_id, copies=1) == [empty_response(3)]
    assert await client.config() == (4, {"tool": {"a": TELL_JOKE, "b": TELL_JOKE}})
    await client.put({("prompt", "p"): "later"})  # 5: its push comes after any stray push
    assert await pushed_versions(pushes, until=5) == [2, 3, 4, 5]


async def test_a_redelivery_to_another_service_process_answers_the_first_version_and_pushes_again(
        backend: Backend, tmp_path: Path) -> None:
    # The process that applied the request may have died before its push went out: the one
    # that gets the redelivery cannot know, so it pushes again (watchers ignore a repeat).
    topic = backend.topic("config")
    queues = {"request_queue": f"request:tg:{topic}", "response_queue": f"response:tg:{topic}",
              "push_queue": f"notify:tg:{topic}"}
    bus = await backend.connect()
    pushes = await listen(bus, queues["push_queue"])
    request_id = f"req-{uuid.uuid4()}"
    answers = []
    for _ in range(2):  # two processes in turn, each with its own connection to one store
        store = await open_store(str(tmp_path / "config.db"))
        async with ConfigService(await backend.connect(), store, **queues) as service:
            answers += await deliver(bus, service, CHANGES["put"], id=request_id, copies=1)
        await store.close()
    assert answers == [empty_response(1)] * 2
    assert await pushed_versions(pushes, until=1) == [1]
    assert await pushed_versions(pushes, until=1) == [1]
    store = await open_store(str(tmp_path / "config.db"))
    assert await store.version() == 1
    await store.close()


class Recorder:
    def __init__(self) -> None:
        self.snapshots: list[ConfigSnapshot] = []
        self._changed = asyncio.Event()

    async def __call__(self, snapshot: ConfigSnapshot) -> None:
        self.snapshots.append(snapshot)
        self._changed.set()

    async def wait_for_version(self, version: int) -> ConfigSnapshot:
        async with asyncio.timeout(10):
            while not self.snapshots or self.snapshots[-1].version < version:
                self._changed.clear()
                await self._changed.wait()
        return self.snapshots[-1]


async def test_a_watcher_gets_the_full_content_of_its_types_on_every_change(
        backend: Backend, config: tuple[ConfigService, ConfigClient]) -> None:
    service, client = config
    await client.put({("tool-service", "joke-service"): JOKE_SERVICE})
    recorder = Recorder()
    async with ConfigWatcher(await backend.connect(), types=["tool", "tool-service"],
                             on_change=recorder, **queues_of(service)):
        first = await recorder.wait_for_version(1)
        assert dict(first.of("tool-service")) == {"joke-service": JOKE_SERVICE}
        assert dict(first.of("tool")) == {}

        # A change to only `tool` still delivers `tool-service` in full.
        await client.put({("tool", "tell-joke"): TELL_JOKE})
        second = await recorder.wait_for_version(2)
        assert dict(second.of("tool")) == {"tell-joke": TELL_JOKE}
        assert dict(second.of("tool-service")) == {"joke-service": JOKE_SERVICE}

        # Changes to types it does not watch, or to other workspaces, are not delivered.
        await client.put({("prompt", "p"): "text"})
        await client.put({("tool", "x"): TELL_JOKE}, workspace="elsewhere")
        await client.delete([("tool", "tell-joke")])
        third = await recorder.wait_for_version(5)
        assert dict(third.of("tool")) == {}
        assert [s.version for s in recorder.snapshots] == [1, 2, 5]


async def test_a_watcher_started_before_the_service_loads_when_it_comes(
        backend: Backend, tmp_path: Path) -> None:
    topic = backend.topic("config")
    queues = {"request_queue": f"request:tg:{topic}", "response_queue": f"response:tg:{topic}"}
    push = f"notify:tg:{topic}"
    store = await open_store(str(tmp_path / "c.db"))
    await store.put("default", [("tool", "t", TELL_JOKE)])
    recorder = Recorder()
    async with ConfigWatcher(await backend.connect(), types=["tool"], on_change=recorder,
                             timeout=0.5, push_queue=push, **queues):
        assert recorder.snapshots == []  # nobody answered
        async with ConfigService(await backend.connect(), store, push_queue=push, **queues):
            snapshot = await recorder.wait_for_version(1)
            assert dict(snapshot.of("tool")) == {"t": TELL_JOKE}
    await store.close()


async def test_a_failing_on_change_does_not_stop_later_deliveries(
        backend: Backend, config: tuple[ConfigService, ConfigClient]) -> None:
    service, client = config
    recorder = Recorder()

    async def flaky(snapshot: ConfigSnapshot) -> None:
        await recorder(snapshot)
        if snapshot.version == 1:
            raise ValueError("cannot build tools")

    async with ConfigWatcher(await backend.connect(), types=["tool"], on_change=flaky,
                             **queues_of(service)):
        await client.put({("tool", "a"): TELL_JOKE})
        await recorder.wait_for_version(1)
        await client.put({("tool", "b"): TELL_JOKE})
        assert set((await recorder.wait_for_version(2)).of("tool")) == {"a", "b"}


def test_the_default_push_queue_is_trustgraphs() -> None:
    assert CONFIG_PUSH_QUEUE == "notify:tg:config"
