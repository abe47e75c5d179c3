"""The wire is the contract: the shell announcement in docs/announcements.md, sent with
``amqp-publish`` (no toolmesh code at all), makes a registry on RabbitMQ offer its tool."""

from __future__ import annotations

import asyncio
import os
import re
import shutil

import pytest

from tests.conftest import RUN_MARKER
from tests.processes import ROOT
from tests.rabbit import own_vhost
from toolmesh.bus import connect
from toolmesh.registry.registry import Registry

pytestmark = pytest.mark.rabbitmq


def shell_example() -> str:
    text = (ROOT / "docs" / "announcements.md").read_text()
    (block,) = re.findall(r"```sh\n(.*?)```", text, re.S)
    return block


async def test_the_documented_shell_announcement_is_honoured() -> None:
    if shutil.which("amqp-publish") is None:
        pytest.skip("amqp-publish is not installed (Debian package amqp-tools; .ci/run "
                    "installs it)")
    async with own_vhost(f"{RUN_MARKER}-shell") as url:
        bus = await connect(url)
        registry = Registry(bus)
        await registry.start()
        shell = await asyncio.create_subprocess_exec(
            "sh", "-c", shell_example(), env={**os.environ, "AMQP_URL": url})
        try:
            async with asyncio.timeout(15):
                await registry.wait_for(lambda: "shell-echo" in registry.offered("default"))
            offered = registry.offered("default")["shell-echo"]
            assert offered.tools["echo"]["arguments"][0]["required"] is True
            assert offered.descriptor["request-queue"] == "request:tg:shell-echo"
            assert offered.ttl == 15
            assert registry.live_instances("shell-echo", "non-persistent://tg/request/shell-echo") == 1
        finally:
            shell.terminate()
            await shell.wait()
            await registry.stop()
            await bus.close()
