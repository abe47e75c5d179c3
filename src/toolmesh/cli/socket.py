"""The gateway's WebSocket for the CLI commands that stream (agent, tool-service --stream)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from toolmesh.cli.http import CliError, gateway_unreachable

if TYPE_CHECKING:
    import aiohttp


def socket_url(url: str) -> str:
    """The WebSocket URL of the gateway at ``url`` (http:// or https://)."""
    base = url.rstrip("/") + "/"
    if base.startswith("https://"):
        return "wss://" + base[len("https://"):] + "api/v1/socket"
    if base.startswith("http://"):
        return "ws://" + base[len("http://"):] + "api/v1/socket"
    raise CliError(f"the gateway URL must start with http:// or https://, not {url!r}")


@asynccontextmanager
async def gateway_socket(url: str, token: str | None
                         ) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    """An authenticated WebSocket to the gateway at ``url``; a refused token, or a gateway
    that cannot be reached (also mid-stream), is a :class:`CliError`."""
    import aiohttp  # here, not at the top: every toolmesh command imports the CLI modules

    address = socket_url(url)
    try:
        async with aiohttp.ClientSession() as session, \
                session.ws_connect(address, heartbeat=30) as ws:
            await ws.send_json({"type": "auth", "token": token or ""})
            auth = json.loads(await ws.receive_str(timeout=30))
            if auth.get("type") != "auth-ok":
                raise CliError(f"the gateway refused the token: {auth.get('error', auth)}")
            yield ws
    except aiohttp.ClientError as e:
        raise CliError(gateway_unreachable(address, e)) from None


async def frames(ws: aiohttp.ClientWebSocketResponse, *, timeout: float
                 ) -> AsyncIterator[dict[str, Any]]:
    """The JSON frames the gateway sends, each within ``timeout`` seconds (else
    ``TimeoutError``); a closed socket is a :class:`CliError`."""
    import aiohttp

    while True:
        raw = await ws.receive(timeout=timeout)
        if raw.type != aiohttp.WSMsgType.TEXT:
            raise CliError("the gateway closed the connection before the answer ended")
        yield json.loads(raw.data)
