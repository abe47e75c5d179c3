"""`toolmesh serve` killed (SIGKILL) in the middle of a dialog, then started again on the same
data folder: the dialog is taken up from its journal and ends with its answer, the tool call
that was in flight is made again with the same idempotency key, and the tool's side effect
happens once. Then `toolmesh dialogs` reads it back, as a user would."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import aiohttp

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


async def test_a_dialog_survives_a_killed_serve_and_its_call_acts_once(tmp_path: Path) -> None:
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
    assert [d["status"] for d in dialogs] == ["answer"]
    attempts = (mail / "attempts.log").read_text().split()
    assert len(attempts) == 2 and attempts[0] == attempts[1], attempts  # the same key twice
    assert [p.read_text() for p in (mail / "sent").iterdir()] == ["to bob"]  # one mail
    assert "call send" in shown
    assert re.search(r"result of send  \(\+[\d.]+ s\): sent to bob", shown), shown
    assert re.search(r"\nanswer  \(\+[\d.]+ s\): sent to bob", shown), shown
    assert any("taking up 1 unfinished dialog" in line for line in second.log)
