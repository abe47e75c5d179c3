"""``ToolServiceClient``: call a tool service and get its observation."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal

from toolmesh.bus.base import Bus
from toolmesh.rpc.client import (
    DEFAULT_TIMEOUT,
    RequestClient,
    RpcClient,
    default_is_final,
)
from toolmesh.schema import tool_service as wire


class ToolServiceClient(RpcClient):
    """Calls one tool service by its queues; one client serves any number of concurrent calls.

    Errors from the service raise :class:`toolmesh.RequestError` (``.type``, ``.message``);
    a missed deadline raises :class:`toolmesh.RequestTimeout`.
    """

    def __init__(self, bus: Bus, *, request_queue: str, response_queue: str,
                 subscription: str | None = None,
                 when_no_consumer: Literal["wait", "fail"] = "wait",
                 hint: str | None = None) -> None:
        """``when_no_consumer`` and ``hint``: see :class:`~toolmesh.rpc.client.RequestClient`."""
        self._rpc = RequestClient(bus, request_queue=request_queue,
                                  response_queue=response_queue, subscription=subscription,
                                  when_no_consumer=when_no_consumer, hint=hint)

    async def call(self, *, user: str, config: Mapping[str, Any] | None = None,
                   arguments: Mapping[str, Any] | None = None,
                   timeout: float | None = DEFAULT_TIMEOUT, workspace: str | None = None,
                   key: str | None = None) -> str:
        """The whole observation (the pieces of a streamed answer, joined); ``key``: the
        call's idempotency key."""
        body = wire.request(user=user, config=config or {}, arguments=arguments or {},
                            workspace=workspace, key=key)
        return "".join([_text(response)
                        for response in await self._rpc.collect(body, timeout=timeout)])

    async def stream(self, *, user: str, config: Mapping[str, Any] | None = None,
                     arguments: Mapping[str, Any] | None = None,
                     timeout: float | None = DEFAULT_TIMEOUT,
                     workspace: str | None = None) -> AsyncIterator[str]:
        """The observation piece by piece as the service sends it (empty pieces skipped)."""
        async for text, _ in self.responses(user=user, config=config, arguments=arguments,
                                            timeout=timeout, workspace=workspace):
            if text:
                yield text

    async def responses(self, *, user: str, config: Mapping[str, Any] | None = None,
                        arguments: Mapping[str, Any] | None = None,
                        timeout: float | None = DEFAULT_TIMEOUT,
                        workspace: str | None = None, key: str | None = None,
                        ) -> AsyncIterator[tuple[str, bool]]:
        """``(text, end_of_stream)`` for every response, the final (often empty) one included.

        For relays (the gateway) that forward the service's own stream boundaries.
        """
        body = wire.request(user=user, config=config or {}, arguments=arguments or {},
                            workspace=workspace, key=key)
        async for response in self._rpc.stream(body, timeout=timeout):
            yield _text(response), default_is_final(response)


def _text(response: dict[str, Any]) -> str:
    """A response's piece of the observation (``""`` for none)."""
    text = response.get("response") or ""
    return text if isinstance(text, str) else wire.observation(text)
