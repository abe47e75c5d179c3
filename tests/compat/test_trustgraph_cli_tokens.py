"""Scoped tokens through the real trustgraph-cli: ``-t`` and ``TRUSTGRAPH_TOKEN`` on REST
(tg-show-config) and on the WebSocket's first-frame auth (tg-invoke-agent), and the ``iam``
answers tg-whoami, tg-list-workspaces and tg-list-my-workspaces read."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from tests.cli.test_agent_cli import JOKE
from tests.forkserver import spawn_script
from tests.gateway.test_scoped_tokens import ADMIN, EXAMPLES, create, post
from tests.servers import toolmesh_serve
from toolmesh.config.tokens import token_id


async def tg(bin: Path, command: str, *args: str, env_token: str | None = None) -> str:
    """stdout and stderr of a trustgraph-cli command (it exits 0 even when it fails)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRUSTGRAPH_")}
    if env_token is not None:
        env["TRUSTGRAPH_TOKEN"] = env_token
    proc = await spawn_script(
        bin / command, *args, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return out.decode() + err.decode()


async def test_trustgraph_cli_works_with_a_scoped_token(tg_bin: Path, tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path, extra_env={"TOOLMESH_GATEWAY_TOKEN": ADMIN}) as served:
        status, body = await post(served, "api/v1/config", {
            "operation": "put", "workspace": "ws2", "values": [
                {"type": "tool-service", "key": "joke-service",
                 "value": (EXAMPLES / "joke-service.json").read_text()},
                {"type": "tool", "key": "tell-joke",
                 "value": (EXAMPLES / "tell-joke.json").read_text()}]}, ADMIN)
        assert status == 200, body
        reader = await create(served, "-w", "ws2", "-c", "config:read")
        agent = await create(served, "-w", "ws2", "-c", "agent", "--name", "chat")
        u = ["-u", served.url]

        shown = await tg(tg_bin, "tg-show-config", *u, "-w", "ws2", "-t", reader)
        from_env = await tg(tg_bin, "tg-show-config", *u, "-w", "ws2", env_token=reader)
        no_token = await tg(tg_bin, "tg-show-config", *u, "-w", "ws2")
        no_capability = await tg(tg_bin, "tg-show-config", *u, "-w", "ws2", "-t", agent)
        other_workspace = await tg(tg_bin, "tg-show-config", *u, "-w", "ws1", "-t", reader)

        dialog = await tg(tg_bin, "tg-invoke-agent", *u, "-w", "ws2", "-t", agent,
                          "-q", "Tell me a joke about food")
        # naming no workspace: the socket's auth-ok says the token's, and the client uses it
        default = await tg(tg_bin, "tg-invoke-agent", *u, "-q", "Tell me a joke about food",
                           env_token=agent)
        refused = await tg(tg_bin, "tg-invoke-agent", *u, "-w", "ws1", "-t", agent,
                           "-q", "Tell me a joke")
        wrong = await tg(tg_bin, "tg-invoke-agent", *u, "-w", "ws2", "-t", agent + "x",
                         "-q", "hi")

        whoami = await tg(tg_bin, "tg-whoami", *u, "-t", agent)
        admin_whoami = await tg(tg_bin, "tg-whoami", *u, "-t", ADMIN)
        listed = await tg(tg_bin, "tg-list-workspaces", *u, "-t", ADMIN)
        not_admin = await tg(tg_bin, "tg-list-workspaces", *u, "-t", agent)
        mine = await tg(tg_bin, "tg-list-my-workspaces", *u, "-t", agent)

    assert shown.startswith("Version: 1\n") and '"tell-joke"' in shown, shown
    assert from_env == shown
    assert "Exception" in no_token and "401" in no_token
    assert "Exception" in no_capability and "403" in no_capability
    assert "Exception" in other_workspace and "403" in other_workspace
    assert dialog.strip() == JOKE
    assert default.strip() == JOKE
    assert "Exception" in refused and "may not use workspace 'ws1'" in refused, refused
    assert "Exception" in wrong and "auth failure" in wrong, wrong
    rows = dict(line.split(None, 1) for line in whoami.splitlines() if " " in line.strip())
    assert rows["id"].strip() == token_id(agent)
    assert rows["name"].strip() == "chat" and rows["workspace"].strip() == "ws2"
    assert rows["roles"].strip() == "agent" and rows["enabled"].strip() == "yes"
    assert ("admin, agent, approve, config:read, config:write, metrics:read, tools:invoke"
            in admin_whoami)
    assert "| ws2 " in listed and "Exception" not in listed, listed
    assert "Exception" in not_admin and "403" in not_admin
    assert "| ws2 " in mine and "Exception" not in mine, mine
