"""`toolmesh serve` killed (SIGKILL) in the middle of a dialog, then started again on the same
data folder: the dialog's client died with the process and no person takes part in it, so the
dialog is not run on for no one — its journal says abandoned, and the tool call that was in
flight is not made again. Then `toolmesh dialogs` reads it back, as a user would. (A dialog
that waits for a person is taken up: tests/approvals/test_serve_restart.py.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest

from tests.processes import run_toolmesh
from tests.servers import toolmesh_serve

SERVICES = Path(__file__).parent / "services"
QUESTION = 'use send with {"to": "bob"}'  # what the offline demo model follows


async def _wait_for(path: Path, lines: int) -> None:
    async with asyncio.timeout(20):
        while not path.exists() or len(path.read_text().splitlines()) < lines:
            await asyncio.sleep(0.05)


async def _offered(url: str, tool: str) -> None:
    """Wait until the agent offers ``tool`` (the service announces itself once started)."""
    async with asyncio.timeout(20):
        while True:
            code, out, err = await run_toolmesh("tools", "--json", "--url", url)
            assert code == 0, err
            if any(t.get("name") == tool and t.get("status") == "available"
                   for t in json.loads(out)["tools"]):
                return
            await asyncio.sleep(0.1)


async def _dialogs(url: str) -> list[dict]:  # type: ignore[type-arg]
    code, out, err = await run_toolmesh("dialogs", "list", "--json", "--url", url)
    assert code == 0, err
    return json.loads(out)["dialogs"]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_killed_serves_dialog_whose_client_is_gone_is_abandoned_not_run_again(
        tmp_path: Path) -> None:
    mail = tmp_path / "mail"
    mail.mkdir()
    env = {"MAILER_DIR": str(mail), "MAILER_SECONDS": "30"}
    args = ("--tool-service", "mailer:Mailer")
    async with toolmesh_serve(tmp_path, *args, extra_env=env, cwd=SERVICES) as first:
        await _offered(first.url, "send")
        async with aiohttp.ClientSession() as http:
            asking = asyncio.ensure_future(http.post(
                f"{first.url}api/v1/flow/default/service/agent", json={"question": QUESTION}))
            await _wait_for(mail / "attempts.log", 1)  # the call is in flight
            first.process.kill()
            await first.process.wait()
            try:
                await asking  # the client's connection died with the process
            except aiohttp.ClientError:
                pass
    assert not (mail / "sent").exists()
    env["MAILER_SECONDS"] = "0"
    async with toolmesh_serve(tmp_path, *args, extra_env=env, cwd=SERVICES) as second:
        async with asyncio.timeout(30):
            while (dialogs := await _dialogs(second.url))[0]["status"] == "running":
                await asyncio.sleep(0.2)
        code, shown, err = await run_toolmesh("dialogs", "show", dialogs[0]["id"], "--url",
                                              second.url)
    assert code == 0, err
    assert [d["status"] for d in dialogs] == ["abandoned"]
    assert len((mail / "attempts.log").read_text().split()) == 1  # not made again
    assert not (mail / "sent").exists()
    assert "call send" in shown and "abandoned" in shown, shown
    assert any("is not taken up: its client's connection died" in line
               for line in second.log), second.log[-20:]
