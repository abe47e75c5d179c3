"""Asking the flow's agent what it offers (`toolmesh tools`, `toolmesh services`,
``tg-show-tools``): its ``agent-tools`` and ``agent-services`` answers, read-your-writes."""

from __future__ import annotations

import argparse
from typing import Any

from toolmesh.cli.config_cmd import config_request
from toolmesh.cli.http import GatewayClient


def config_version(args: argparse.Namespace, type: str) -> int | None:
    """The config's version now (read with a list of ``type``): the agent's answer is then
    at least as new, so a put just made is in it."""
    version = config_request(args, {"operation": "list", "type": type}).get("version")
    return version if isinstance(version, int) else None


def agent_answer(args: argparse.Namespace, flow: str, service: str, *, version: int | None,
                 timeout: float | None = None) -> dict[str, Any]:
    """The agent's answer to ``service`` for ``flow`` (raises
    :class:`~toolmesh.cli.http.CliError`), from config ``version`` or later (the agent loads
    it if its tools are older); ``timeout``: seconds to wait (default: the gateway's deadline
    for the route)."""
    client = GatewayClient(args.url, token=args.token, timeout=timeout)
    body: dict[str, Any] = {"workspace": args.workspace}
    if version is not None:
        body["version"] = version
    return client.post(f"api/v1/flow/{flow}/service/{service}", body)
