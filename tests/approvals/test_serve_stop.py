"""Stopping `toolmesh serve` (SIGTERM) does not wait out the drain for a dialog that only waits
for a person: the process ends at once, well within `--drain-timeout`, whether the dialog was
asked for or taken up after a restart; the journal keeps it, and after the next start the
same call is still listed and answerable, and the answer finishes the dialog. A dialog whose
tool call runs is still drained: the stop waits for the call, which completes."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import aiohttp
import pytest

from tests.approvals.test_serve_restart import ARGS, _approvals, _waiting
from tests.dialogs.test_embedded_restart import QUESTION, SERVICES, _dialogs, _offered
from tests.servers import Served, toolmesh_serve

#: far longer than a stop that lets the dialog go takes
DRAIN = "30"


async def _stopped(served: Served) -> float:
    """SIGTERM to ``served``: the seconds until it exited (which it did, with status 0)."""
    started = time.monotonic()
    served.process.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(served.process.wait(), 40)
    assert code == 0, "".join(served.log[-20:])
    return time.monotonic() - started


async def _logged(served: Served, text: str) -> None:
    """Wait until ``served`` logged a line with ``text``."""
    async with asyncio.timeout(20):
        while not any(text in line for line in served.log):
            await asyncio.sleep(0.05)


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_stop_lets_a_dialog_waiting_for_a_person_go_and_the_restart_takes_it_up(
        tmp_path: Path) -> None:
    mail = tmp_path / "mail"
    mail.mkdir()
    env = {"MAILER_DIR": str(mail)}
    args = (*ARGS, "--drain-timeout", DRAIN)
    async with toolmesh_serve(tmp_path, *args, extra_env=env, cwd=SERVICES) as first:
        await _offered(first.url, "send")
        async with aiohttp.ClientSession() as http:
            asking = asyncio.ensure_future(http.post(
                f"{first.url}api/v1/flow/default/service/agent", json={"question": QUESTION}))
            [before] = await _waiting(http, first.url)
            asked_for = await _stopped(first)
            async with asyncio.timeout(10):
                answered = await (await asking).json()
    async with toolmesh_serve(tmp_path, *args, extra_env=env, cwd=SERVICES) as second, \
            aiohttp.ClientSession() as http:
        [taken_up] = await _waiting(http, second.url)
        await _logged(second, "waits for a person; answer it with")  # taken up, and waiting
        taken_up_stop = await _stopped(second)
    async with toolmesh_serve(tmp_path, *args, extra_env=env, cwd=SERVICES) as third, \
            aiohttp.ClientSession() as http:
        [after] = await _waiting(http, third.url)
        approved = await _approvals(http, third.url, {
            "operation": "approve", "call": after["call"], "digest": after["digest"]})
        async with asyncio.timeout(30):
            while (dialogs := await _dialogs(third.url))[0]["status"] == "running":
                await asyncio.sleep(0.2)
    assert asked_for < 5.0, f"the stop took {asked_for:.1f} s with --drain-timeout {DRAIN}"
    assert taken_up_stop < 5.0, f"the stop took {taken_up_stop:.1f} s after the take-up"
    # the client heard why, and that the dialog is kept
    assert answered["error"]["type"] == "service-stopping", answered
    assert "waited for a person" in answered["error"]["message"]
    assert any("AgentService: 1 request(s) waiting for a person let go without draining"
               in line for line in first.log), first.log[-10:]
    assert any("AgentService (dialogs taken up): 1 request(s) waiting for a person let go"
               in line for line in second.log), second.log[-10:]
    same = ("dialog", "call", "digest", "expires", "arguments")
    assert {k: taken_up[k] for k in same} == {k: before[k] for k in same}
    assert {k: after[k] for k in same} == {k: before[k] for k in same}
    assert approved[0] == 200 and approved[1]["answer"]["decision"] == "approve"
    assert [d["status"] for d in dialogs] == ["answer"]
    assert (mail / "attempts.log").read_text().split() == [after["call"]]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_stop_still_drains_a_dialog_whose_call_runs(tmp_path: Path) -> None:
    mail = tmp_path / "mail"
    mail.mkdir()
    env = {"MAILER_DIR": str(mail), "MAILER_SECONDS": "2"}
    # (the dialog's next step cannot finish: the LLM's service stops at the same time, and
    # the drain runs out; what matters is that the call in flight was waited for)
    async with toolmesh_serve(tmp_path, "--tool-service", "mailer:Mailer", "--drain-timeout",
                              "5", extra_env=env, cwd=SERVICES) as served:
        await _offered(served.url, "send")
        async with aiohttp.ClientSession() as http:
            asking = asyncio.ensure_future(http.post(
                f"{served.url}api/v1/flow/default/service/agent", json={"question": QUESTION}))
            async with asyncio.timeout(20):
                while not (mail / "attempts.log").exists():
                    await asyncio.sleep(0.05)
            took = await _stopped(served)
            asking.cancel()
    assert took > 1.5, f"the stop took {took:.1f} s: it did not wait for the 2 s call"
    assert [p.read_text() for p in (mail / "sent").iterdir()] == ["to bob"]
    assert not any("let go without draining" in line for line in served.log)
