"""A dialog that waits for a person survives `toolmesh serve` killed (SIGKILL) and started again
on the same data folder: the waiting call is listed again, approving it over REST lets the
dialog end with its answer, and the tool acts once. Approving the wrong call, or with a token
that may not approve, changes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.dialogs.test_embedded_restart import SERVICES, QUESTION, _dialogs, _offered
from tests.servers import toolmesh_serve

ARGS = ("--tool-service", "mailer:Mailer", "--approval", "always")


async def _approvals(http: aiohttp.ClientSession, url: str, body: dict[str, Any]
                     ) -> tuple[int, dict[str, Any]]:
    async with http.post(f"{url}api/v1/flow/default/service/approvals", json=body) as r:
        return r.status, await r.json()


async def _waiting(http: aiohttp.ClientSession, url: str) -> list[dict[str, Any]]:
    async with asyncio.timeout(30):
        while True:
            status, body = await _approvals(http, url, {"operation": "list"})
            if status == 200 and body.get("approvals"):
                return body["approvals"]
            await asyncio.sleep(0.1)


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_dialog_waiting_for_approval_survives_a_killed_serve(tmp_path: Path) -> None:
    mail = tmp_path / "mail"
    mail.mkdir()
    env = {"MAILER_DIR": str(mail)}
    async with toolmesh_serve(tmp_path, *ARGS, extra_env=env, cwd=SERVICES) as first:
        await _offered(first.url, "send")
        async with aiohttp.ClientSession() as http:
            asking = asyncio.ensure_future(http.post(
                f"{first.url}api/v1/flow/default/service/agent", json={"question": QUESTION}))
            [before] = await _waiting(http, first.url)
            first.process.kill()
            await first.process.wait()
            try:
                await asking
            except aiohttp.ClientError:
                pass
    assert not (mail / "attempts.log").exists()  # nothing ran without a person
    async with toolmesh_serve(tmp_path, *ARGS, extra_env=env, cwd=SERVICES) as second, \
            aiohttp.ClientSession() as http:
        [after] = await _waiting(http, second.url)
        stale = await _approvals(http, second.url, {
            "operation": "approve", "dialog": after["dialog"], "call": after["call"],
            "digest": "sha256:" + "0" * 64})
        approved = await _approvals(http, second.url, {
            "operation": "approve", "dialog": after["dialog"], "call": after["call"],
            "digest": after["digest"]})
        async with asyncio.timeout(30):
            while (dialogs := await _dialogs(second.url))[0]["status"] == "running":
                await asyncio.sleep(0.2)
    assert {k: after[k] for k in ("dialog", "call", "digest", "expires", "arguments")} == {
        k: before[k] for k in ("dialog", "call", "digest", "expires", "arguments")}
    assert stale[1]["error"]["type"] == "stale"
    assert approved[0] == 200 and approved[1]["answer"]["decision"] == "approve"
    assert [d["status"] for d in dialogs] == ["answer"]
    assert (mail / "attempts.log").read_text().split() == [after["call"]]
    assert [p.read_text() for p in (mail / "sent").iterdir()] == ["to bob"]
    assert any("taking up 1 unfinished dialog" in line for line in second.log)
