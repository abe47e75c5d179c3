"""What the gateway can reach: named endpoints that forward a request to a service on the bus.

An endpoint yields the service's responses as they come (one for config, many for a streaming
agent), each with a flag saying whether it is the final one. Error responses are passed through as they are:
the REST and WebSocket layers decide how to show them.

Endpoints send with ``when_no_consumer="fail"``: when the bus can tell that nothing consumes a
service's queue, the caller hears ``service-unavailable`` at once, with a hint naming the
process to start. How long they wait is the gateway's deadline for the route, set around the
call (:mod:`toolmesh.rpc.deadline`), not theirs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from toolmesh.bus.base import Bus
from toolmesh.errors import ToolmeshError
from toolmesh.rpc.client import RequestClient, default_is_final

Prepare = Callable[[dict[str, Any], str, str], dict[str, Any]]
Present = Callable[[dict[str, Any]], dict[str, Any]]
#: the one body a REST call returns for the responses of a (streamed) call
Combine = Callable[[list[dict[str, Any]]], dict[str, Any]]


class Endpoint(Protocol):
    """A service the gateway forwards to."""

    name: str
    #: True for services addressed per flow (``/api/v1/flow/{flow}/service/{name}``)
    per_flow: bool

    def call(self, request: dict[str, Any], *, workspace: str,
             flow: str) -> AsyncIterator[tuple[dict[str, Any], bool]]:
        """``(response, final)`` for each response to ``request``."""
        ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def without_nulls(response: dict[str, Any]) -> dict[str, Any]:
    """The response as clients see it: top-level ``null`` fields left out.

    TrustGraph's clients treat the mere presence of an ``error`` key as a failure (even
    ``"error": null``), and its own gateway omits empty fields, so ours does too.
    """
    return {k: v for k, v in response.items() if v is not None}


def with_workspace(request: dict[str, Any], workspace: str, flow: str) -> dict[str, Any]:
    """Fill in the frame's workspace when the request names none."""
    if request.get("workspace"):
        return request
    return {**request, "workspace": workspace}


def prompt_request(request: dict[str, Any], workspace: str, flow: str) -> dict[str, Any]:
    """A prompt request as the prompt service takes it: TrustGraph's gateway turns a client's
    ``variables`` (plain values; what its ``Api`` and ``tg-invoke-prompt`` send) into the
    service's ``terms`` (each value as JSON text), replacing any ``terms`` sent beside them."""
    if "variables" in request:
        variables = request["variables"]
        if not isinstance(variables, dict):
            raise ToolmeshError("'variables' must be an object of template variables, not "
                                f"{json.dumps(variables)[:60]}", type="bad-request")
        request = {k: v for k, v in request.items() if k != "variables"}
        request["terms"] = {name: json.dumps(value, ensure_ascii=False)
                            for name, value in variables.items()}
    return with_workspace(request, workspace, flow)


def joined(field: str) -> Combine:
    """REST's body for a streamed text answer: the last response (the end of the stream, with
    the token counts) holding every piece's ``field`` joined; an error as it came."""

    def combine(responses: list[dict[str, Any]]) -> dict[str, Any]:
        last = responses[-1]
        if len(responses) == 1 or last.get("error"):
            return last
        return {**last, field: "".join(r[field] for r in responses
                                       if isinstance(r.get(field), str))}

    return combine


class BusEndpoint:
    """Forwards to a request/response service on the bus through one shared client.

    ``prepare`` turns a client's request into the service's; ``present`` turns each of the
    service's responses into what the client sees (by default: without ``null`` fields).
    """

    def __init__(self, bus: Bus, name: str, *, request_queue: str, response_queue: str,
                 per_flow: bool = False, timeout: float | None = None,
                 is_final: Callable[[dict[str, Any]], bool] = default_is_final,
                 prepare: Prepare = with_workspace, present: Present = without_nulls,
                 hint: str | None = None) -> None:
        self.name = name
        self.per_flow = per_flow
        self.timeout = timeout
        self._prepare = prepare
        self._present = present
        self._is_final = is_final
        self._rpc = RequestClient(bus, request_queue=request_queue, response_queue=response_queue,
                                  subscription=f"gateway-{name}", is_final=is_final,
                                  error_of=lambda response: None, when_no_consumer="fail",
                                  hint=hint)

    async def start(self) -> None:
        await self._rpc.start()

    async def stop(self) -> None:
        await self._rpc.stop()

    async def call(self, request: dict[str, Any], *, workspace: str,
                   flow: str) -> AsyncIterator[tuple[dict[str, Any], bool]]:
        async for response in self._rpc.stream(self._prepare(request, workspace, flow),
                                               timeout=self.timeout):
            yield self._present(response), self._is_final(response)


class FlowEndpoint:
    """A per-flow service: ``{flow}`` in the queue names picks the flow's instance."""

    def __init__(self, bus: Bus, name: str, *, request_queue: str, response_queue: str,
                 timeout: float | None = None,
                 is_final: Callable[[dict[str, Any]], bool] = default_is_final,
                 prepare: Prepare = with_workspace, part: str | None = None,
                 rest_result: Combine | None = None) -> None:
        self.name = name
        self.per_flow = True
        #: how REST joins a streamed answer (None: its last response is the body)
        self.rest_result = rest_result
        self._bus = bus
        self._queues = (request_queue, response_queue)
        self._options: dict[str, Any] = {"timeout": timeout, "is_final": is_final,
                                         "prepare": prepare}
        #: the ``toolmesh run PART`` that serves this endpoint (for hints)
        self._part = part or name
        # one subscription per flow: the gateway calls this only for flows that exist
        self._flows: dict[str, BusEndpoint] = {}
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        return None  # flows are connected on first use

    async def stop(self) -> None:
        for endpoint in self._flows.values():
            await endpoint.stop()
        self._flows.clear()

    async def _for(self, flow: str) -> BusEndpoint:
        endpoint = self._flows.get(flow)
        if endpoint is None:
            async with self._lock:
                endpoint = self._flows.get(flow)
                if endpoint is None:
                    flag = "" if flow == "default" else f" --flow {flow}"
                    endpoint = BusEndpoint(
                        self._bus, self.name, request_queue=self._queues[0].format(flow=flow),
                        response_queue=self._queues[1].format(flow=flow), per_flow=True,
                        hint=f"is `toolmesh run {self._part}{flag}` running?",
                        **self._options)
                    await endpoint.start()
                    self._flows[flow] = endpoint
        return endpoint

    async def call(self, request: dict[str, Any], *, workspace: str,
                   flow: str) -> AsyncIterator[tuple[dict[str, Any], bool]]:
        endpoint = await self._for(flow)
        async for item in endpoint.call(request, workspace=workspace, flow=flow):
            yield item
