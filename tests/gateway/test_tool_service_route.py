"""The gateway's ``tool-service`` route over real HTTP and WebSocket, with the real config
service and the built-in joke services on every bus backend."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import Backend
from toolmesh.bus import Bus
from toolmesh.config.client import ConfigClient
from toolmesh.config.service import ConfigService
from toolmesh.config.store import open_store
from toolmesh.gateway import Gateway, GatewayOptions
from toolmesh.gateway.tool_service import ToolServiceEndpoint
from toolmesh.tools.queues import topic_queues
from toolmesh.tools.services.joke import JokeService, StreamingJokeService, pick_joke


def descriptor(id: str, topic: str, **extra: Any) -> str:
    request_queue, response_queue = topic_queues(topic)
    return json.dumps({"id": id, "request-queue": request_queue,
                       "response-queue": response_queue,
                       "config-params": [{"name": "style", "required": False}], **extra})


@dataclass
class Route:
    gateway: Gateway
    http: aiohttp.ClientSession
    config: ConfigClient

    @property
    def rest_url(self) -> str:
        return self.gateway.url + "api/v1/flow/default/service/tool-service"

    async def post(self, body: Any, *, status: int = 200, **kwargs: Any) -> dict[str, Any]:
        async with self.http.post(self.rest_url, json=body, **kwargs) as r:
            assert r.status == status, await r.text()
            return await r.json()


async def private_config_service(stack: AsyncExitStack, bus: Bus, tmp_path: Path,
                                 topic: str) -> dict[str, str]:
    """A config service of the test's own (SQLite in ``tmp_path``, queues named after
    ``topic``), running until ``stack`` closes; the queues a client needs."""
    queues = {"request_queue": f"request:tg:{topic}-config",
              "response_queue": f"response:tg:{topic}-config"}
    store = await open_store(str(tmp_path / "config.db"))
    stack.push_async_callback(store.close)
    await stack.enter_async_context(ConfigService(bus, store, **queues,
                                                  push_queue=push_queue(topic)))
    return queues


def push_queue(topic: str) -> str:
    """Where :func:`private_config_service` says that its config changed."""
    return f"notify:tg:{topic}-config"


@pytest.fixture
async def route(backend: Backend, tmp_path: Path) -> AsyncIterator[Route]:
    """A gateway whose tool-service route reads descriptors from a private config service:
    ``joke-service`` and ``streaming-joke`` are served, ``silent`` (nobody consumes its
    queue) and ``strict`` (a required config-param) are only configured."""
    t = backend.topic("tsr")
    bus = await backend.connect()
    async with AsyncExitStack() as stack:
        queues = await private_config_service(stack, bus, tmp_path, t)
        await stack.enter_async_context(JokeService(await backend.connect(), topic=f"{t}-joke"))
        await stack.enter_async_context(
            StreamingJokeService(await backend.connect(), topic=f"{t}-stream"))
        config = await stack.enter_async_context(ConfigClient(bus, timeout=10, **queues))
        await config.put({
            ("tool-service", "joke-service"): descriptor("joke-service", f"{t}-joke"),
            ("tool-service", "streaming-joke"): descriptor("streaming-joke", f"{t}-stream"),
            ("tool-service", "silent"): descriptor("silent", f"{t}-nobody"),
            ("tool-service", "strict"): descriptor(
                "strict", f"{t}-joke", **{"config-params": [{"name": "style", "required": True}]}),
        })
        endpoint = ToolServiceEndpoint(await backend.connect(),
                                       config_queues={**queues, "push_queue": push_queue(t)})
        gateway = await stack.enter_async_context(
            Gateway(await backend.connect(), GatewayOptions(port=0, extra_endpoints=(endpoint,))))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        yield Route(gateway, http, config)


def joke(user: str, style: str, topic: str) -> str:
    return f"Hey {user}! Here's a {style} for you:\n\n{pick_joke(topic, style)}"


async def socket(route: Route) -> aiohttp.ClientWebSocketResponse:
    ws = await route.http.ws_connect(route.gateway.url + "api/v1/socket")
    await ws.send_json({"type": "auth", "token": ""})
    assert (await ws.receive_json(timeout=10))["type"] == "auth-ok"
    return ws


async def frames(ws: aiohttp.ClientWebSocketResponse, id: str) -> list[dict[str, Any]]:
    """Every frame answering request ``id``, up to the complete one."""
    got: list[dict[str, Any]] = []
    while not got or not got[-1]["complete"]:
        frame = await ws.receive_json(timeout=10)
        assert frame["id"] == id
        got.append(frame)
    return got


# -- success ------------------------------------------------------------------------------


async def test_rest_calls_the_configured_service(route: Route) -> None:
    body = await route.post({"id": "joke-service", "config": {"style": "dad-joke"},
                             "arguments": {"topic": "animals"}, "user": "alice"})
    assert body == {"response": joke("alice", "dad-joke", "animals"), "end_of_stream": True}
    # config and arguments as JSON text, as the tool-service wire carries them; defaults apply
    body = await route.post({"id": "joke-service", "config": "{}",
                             "arguments": json.dumps({"topic": "food"})})
    assert body == {"response": joke("trustgraph", "pun", "food"), "end_of_stream": True}
    body = await route.post({"id": "joke-service"})
    assert body["response"].startswith("Hey trustgraph! Here's a pun for you:\n\n")


async def test_rest_joins_a_streaming_service_into_one_response(route: Route) -> None:
    expected = joke("bob", "one-liner", "programming")
    request = {"id": "streaming-joke", "config": {"style": "one-liner"},
               "arguments": {"topic": "programming"}, "user": "bob"}
    assert await route.post(request) == {"response": expected, "end_of_stream": True}
    # asking REST to stream changes nothing: it has one body to give
    assert await route.post({**request, "streaming": True}) == {"response": expected,
                                                                "end_of_stream": True}


async def test_the_websocket_streams_every_piece(route: Route) -> None:
    ws = await socket(route)
    async with ws:
        await ws.send_json({"id": "s1", "service": "tool-service", "flow": "default",
                            "request": {"id": "streaming-joke", "user": "carol",
                                        "arguments": {"topic": "food"}}})
        got = await frames(ws, "s1")
        await ws.send_json({"id": "p1", "service": "tool-service",
                            "request": {"id": "joke-service", "arguments": {"topic": "food"}}})
        plain = await frames(ws, "p1")
    expected = joke("carol", "pun", "food")
    pieces = [f["response"]["response"] for f in got]
    assert len(got) == len(expected.split(" ")) + 1  # a piece per word, then the end
    assert "".join(pieces) == expected and all(pieces[:-1])
    assert [f["complete"] for f in got] == [False] * (len(got) - 1) + [True]
    assert [f["response"]["end_of_stream"] for f in got] == [f["complete"] for f in got]
    assert all("error" not in f and "error" not in f["response"] for f in got)
    # a service that answers at once gives one complete frame
    assert plain == [{"id": "p1", "complete": True,
                      "response": {"response": joke("trustgraph", "pun", "food"),
                                   "end_of_stream": True}}]


async def test_the_descriptor_is_read_from_the_request_workspace(route: Route) -> None:
    value = await route.config.get("tool-service", "joke-service")
    assert value is not None
    await route.config.put({("tool-service", "elsewhere"): value}, workspace="other")
    request = {"id": "elsewhere", "arguments": {"topic": "food"}}
    body = await route.post(request)
    assert body["error"]["type"] == "unknown-tool-service"
    assert "workspace 'default'" in body["error"]["message"]
    assert (await route.post({**request, "workspace": "other"}))["response"] == \
        joke("trustgraph", "pun", "food")
    assert "response" in await route.post(request, headers={"X-Workspace": "other"})


# -- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(("request_body", "type", "says"), [
    ({}, "bad-request", "needs 'id'"),
    ({"id": ""}, "bad-request", "needs 'id'"),
    ({"id": 7}, "bad-request", "needs 'id'"),
    ({"id": "nope"}, "unknown-tool-service", "no config item tool-service/nope"),
    ({"id": "joke-service", "config": [1]}, "bad-request", "'config' must be a JSON object"),
    ({"id": "joke-service", "config": "{not json"}, "bad-request", "'config' is not valid JSON"),
    ({"id": "joke-service", "arguments": "[1, 2]"}, "bad-request",
     "'arguments' must be a JSON object, not list"),
    ({"id": "joke-service", "arguments": 5}, "bad-request", "'arguments' must be a JSON object"),
    # JSON text inside a string is not seen by the gateway's body check: decoded and checked
    ({"id": "joke-service", "arguments": "[" * 5000 + "]" * 5000}, "bad-request",
     "'arguments' is nested more than 100 levels deep"),
    ({"id": "joke-service", "config": '{"a":' * 101 + "1" + "}" * 101}, "bad-request",
     "'config' is nested more than 100 levels deep"),
    ({"id": "joke-service", "arguments": '{"topic": "\\ud800"}'}, "bad-request",
     "'arguments' holds a string that is not valid Unicode (a lone surrogate, like \\ud800) "
     'at ["topic"]'),
    ({"id": "joke-service", "config": '{"n": 1' + "0" * 5000 + "}"}, "bad-request",
     "'config' holds an integer of more than 4300 digits"),
    ({"id": "joke-service", "user": 0}, "bad-request", "'user' must be a string, not int"),
    ({"id": "joke-service", "workspace": 5}, "bad-request",
     "'workspace' must be a string, not int"),
    ({"id": "joke-service", "timeout": 0}, "bad-request", "'timeout' must be a number"),
    ({"id": "joke-service", "timeout": "soon"}, "bad-request", "'timeout' must be a number"),
    ({"id": "joke-service", "timeout": 10_000}, "bad-request", "at most 600"),
    ({"id": "strict"}, "bad-request", "requires config 'style'"),
    ({"id": "joke-service", "config": {"style": "limerick"}}, "tool-service-error",
     "unknown joke style 'limerick'"),
    ({"id": "streaming-joke", "arguments": {"topic": 3}}, "tool-service-error",
     "'topic' must be a string"),
])
async def test_rest_errors_name_the_problem(route: Route, request_body: dict[str, Any],
                                            type: str, says: str) -> None:
    body = await route.post(request_body)
    assert body == {"error": {"type": type, "message": body["error"]["message"]},
                    "end_of_stream": True}
    assert says in body["error"]["message"]


async def test_a_workspace_the_store_cannot_hold_is_a_refused_field_not_a_failed_service(
        route: Route) -> None:
    # found by schemathesis: a NUL in the body's workspace came back as a 502 config-error
    # (from reading that workspace's approval policies, before the call)
    for workspace, says in (("a\x00b", "must not contain NUL"),
                            ("lone \ud800 surrogate", "not valid Unicode")):
        body = await route.post({"id": "joke-service", "workspace": workspace}, status=400)
        assert body["error"]["type"] == "bad-request", body
        assert says in body["error"]["message"], body
    # and the route goes on answering
    assert "response" in await route.post({"id": "joke-service", "arguments": {"topic": "x"}})


async def test_an_unknown_id_says_how_to_configure_it(route: Route) -> None:
    message = (await route.post({"id": "nope"}))["error"]["message"]
    assert message == ("no tool service 'nope' in workspace 'default': no config item "
                       "tool-service/nope and no running instance announces it; start it "
                       "(toolmesh run MODULE:CLASS) or store its descriptor, e.g. "
                       "'toolmesh config put tool-service/nope descriptor.json'")


async def test_a_service_nobody_consumes_is_unavailable_at_once_where_the_bus_can_tell(
        route: Route, backend: Backend) -> None:
    # On the memory bus and RabbitMQ (no queue bound) the gateway knows at once; a Pulsar
    # producer cannot tell, so there the call waits out its timeout.
    expected = (504, "timeout") if backend.name == "pulsar" else (503, "service-unavailable")
    body = await route.post({"id": "silent", "timeout": 0.3}, status=expected[0])
    assert body["error"]["type"] == expected[1]
    assert "tool service 'silent'" in body["error"]["message"]
    ws = await socket(route)
    async with ws:
        await ws.send_json({"id": "t1", "service": "tool-service",
                            "request": {"id": "silent", "timeout": 0.2}})
        [frame] = await frames(ws, "t1")
    assert frame["error"]["type"] == expected[1]
    if backend.name == "pulsar":
        assert "0.2 s" in frame["error"]["message"]
    else:
        assert "nothing is consuming" in frame["error"]["message"]
    # the route still serves
    assert "response" in await route.post({"id": "joke-service"})


async def test_websocket_errors_are_complete_error_frames(route: Route) -> None:
    ws = await socket(route)
    async with ws:
        await ws.send_json({"id": "e1", "service": "tool-service", "request": {"id": "nope"}})
        await ws.send_json({"id": "e2", "service": "tool-service",
                            "request": {"id": "streaming-joke",
                                        "config": {"style": "limerick"}}})
        got = {}
        for _ in range(2):
            frame = await ws.receive_json(timeout=10)
            got[frame["id"]] = frame
    assert got["e1"]["complete"] is True and got["e1"]["error"]["type"] == "unknown-tool-service"
    assert got["e2"]["complete"] is True and got["e2"]["error"]["type"] == "tool-service-error"
    assert got["e2"]["response"]["error"] == got["e2"]["error"]


async def test_many_concurrent_calls_each_get_their_own_answer(route: Route) -> None:
    topics = ["programming", "animals", "food", "space"] * 5
    users = [f"u{i}" for i in range(len(topics))]
    bodies = await asyncio.gather(*(
        route.post({"id": "joke-service", "user": u, "arguments": {"topic": t}})
        for u, t in zip(users, topics)))
    assert [b["response"] for b in bodies] == [joke(u, "pun", t) for u, t in zip(users, topics)]


class AnnouncedJokes(JokeService):
    """The joke service under an id no config item has: reachable only by its announcement."""

    definition = dataclasses.replace(JokeService.definition, id="announced-jokes",
                                     topic="announced-jokes")


async def test_a_service_that_announces_itself_is_called_with_no_config_item(
        memory: Backend, tmp_path: Path) -> None:
    bus = await memory.connect()
    async with AsyncExitStack() as stack:
        queues = await private_config_service(stack, bus, tmp_path, "announced")
        # the endpoint hears the private service's pushes: descriptors it keeps go stale
        endpoint = ToolServiceEndpoint(
            bus, config_queues={**queues, "push_queue": push_queue("announced")})
        gateway = await stack.enter_async_context(
            Gateway(bus, GatewayOptions(port=0, extra_endpoints=(endpoint,))))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        route = Route(gateway, http, await stack.enter_async_context(
            ConfigClient(bus, timeout=10, **queues)))
        service = AnnouncedJokes(bus)
        await service.start()
        assert endpoint.registry is not None
        async with asyncio.timeout(10):
            await endpoint.registry.wait_for(lambda: bool(endpoint.registry.offered("default")))
        body = await route.post({"id": "announced-jokes", "arguments": {"topic": "food"},
                                 "user": "bob"})
        assert body == {"response": joke("bob", "pun", "food"), "end_of_stream": True}
        # only in the workspace it announced in
        other = await route.post({"id": "announced-jokes", "workspace": "elsewhere"})
        assert other["error"]["type"] == "unknown-tool-service"

        # a configured item of its id wins: here, it switches the service off
        await route.config.put({("tool-service", "announced-jokes"): '{"enabled": false}'})
        off = await route.post({"id": "announced-jokes"})
        assert off["error"] == {"type": "bad-request", "message": "tool service "
                                "'announced-jokes' is disabled by its config item "
                                '("enabled": false)'}
        await route.config.delete([("tool-service", "announced-jokes")])

        await service.stop()  # its goodbye: no longer reachable by its announcement
        async with asyncio.timeout(10):
            await endpoint.registry.wait_for(lambda: not endpoint.registry.offered("default"))
        gone = await route.post({"id": "announced-jokes"})
        assert gone["error"]["type"] == "unknown-tool-service"

        # configured, on the queue it announced: no live instance, so 503 at once
        await route.config.put({("tool-service", "announced-jokes"): descriptor(
            "announced-jokes", "announced-jokes")})
        started = asyncio.get_running_loop().time()
        refused = await route.post({"id": "announced-jokes", "timeout": 30}, status=503)
        assert asyncio.get_running_loop().time() - started < 1.0
        assert refused["error"]["type"] == "service-unavailable"
        assert "no live instance of tool service 'announced-jokes'" in \
            refused["error"]["message"]


async def test_a_stored_descriptor_naming_a_broadcast_queue_is_refused(memory: Backend,
                                                                       tmp_path: Path) -> None:
    # written around the config service's validation (an old store, another writer): the
    # route must not turn a call into a notice on the announcement queue
    store = await open_store(str(tmp_path / "old.db"))
    await store.put("default", [("tool-service", "loud", json.dumps({
        "id": "loud", "request-queue": "notify:tg:tool-descriptors",
        "response-queue": "response:tg:loud"}))])
    await store.close()
    bus = await memory.connect()
    heard: list[bytes] = []

    async def listen(message: Any) -> None:
        heard.append(message.body)

    await bus.subscribe("notify:tg:tool-descriptors", listen, subscription="test")
    async with AsyncExitStack() as stack:
        queues = {"request_queue": "request:tg:old-config", "response_queue":
                  "response:tg:old-config"}
        reopened = await open_store(str(tmp_path / "old.db"))
        stack.push_async_callback(reopened.close)
        await stack.enter_async_context(ConfigService(bus, reopened, **queues,
                                                      push_queue="notify:tg:old-push"))
        endpoint = ToolServiceEndpoint(bus, config_queues={**queues,
                                                           "push_queue": "notify:tg:old-push"})
        gateway = await stack.enter_async_context(
            Gateway(bus, GatewayOptions(port=0, extra_endpoints=(endpoint,))))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        route = Route(gateway, http, await stack.enter_async_context(
            ConfigClient(bus, timeout=10, **queues)))
        body = await route.post({"id": "loud", "arguments": {"id": "x", "instance": "y"}})
    assert body["error"]["type"] == "config-error"
    assert "a notify (broadcast) queue is no tool service's queue" in body["error"]["message"]
    assert heard == []
