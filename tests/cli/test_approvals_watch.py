"""`toolmesh approvals approve --watch`: the person at a terminal answers each request of the
workspace as it comes — y approves, anything else denies with the reason typed next — and a
request someone else answers first is dropped with a line that says by whom. The watch goes
on past the gateway's deadline for one watch (renewed), and ends when stdin does. Every answer
is recorded as given with the CLI. A real `toolmesh serve` (the offline demo model, the mailer
tool service, `--approval always`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.cli.test_approvals_cli import listed, waiting
from tests.dialogs.test_embedded_restart import SERVICES
from tests.forkserver import spawn
from tests.gateway.test_approvals_route import ROUTE, Mailer, approving_serve, ask, offered
from tests.processes import env, run_toolmesh
from tests.servers import Served, toolmesh_serve

#: the gateway's deadline for one watch (the watch ends 2 s before it, and is asked again)
WATCH_DEADLINE = "4"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Served, Mailer]]:
    async with approving_serve(tmp_path) as s:
        yield s


class Watch:
    """`toolmesh approvals approve --watch`, its stdin a pipe, its stderr read line by line."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.raw = b""
        self.read = 0  # how much of it :meth:`until` has looked at

    async def until(self, text: str) -> str:
        """Read stderr until ``text`` shows after what was looked at before (a prompt has no
        line end: it is read byte by byte)."""
        assert self.process.stderr is not None
        wanted = text.encode()
        async with asyncio.timeout(30):
            while wanted not in self.raw[self.read:]:
                chunk = await self.process.stderr.read(1)
                assert chunk, self.raw.decode(errors="replace")
                self.raw += chunk
        self.read = self.raw.index(wanted, self.read) + len(wanted)
        return self.raw.decode(errors="replace")

    def type(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text.encode())

    async def end(self) -> tuple[int, str]:
        assert self.process.stdin is not None
        self.process.stdin.close()
        _, rest = await asyncio.wait_for(self.process.communicate(), 30)
        assert self.process.returncode is not None
        return self.process.returncode, (self.raw + rest).decode(errors="replace")


async def watch(served: Served) -> Watch:
    process = await spawn(
        "toolmesh.cli.main", "approvals", "approve", "--watch", "-u",
        served.url, env=env(), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    return Watch(process)


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_watch_answers_each_request_as_it_comes(tmp_path: Path) -> None:
    mail = tmp_path / "mail"
    mail.mkdir()
    async with toolmesh_serve(tmp_path, "--tool-service", "mailer:Mailer", "--approval",
                              "always", "--deadline", f"approvals={WATCH_DEADLINE}",
                              extra_env={"MAILER_DIR": str(mail)}, cwd=SERVICES) as served:
        await offered(served, "send", None)
        mailer = Mailer(mail)
        w = await watch(served)
        try:
            await w.until("watching workspace 'default': nothing waits now")
            await asyncio.sleep(float(WATCH_DEADLINE))  # past the first watch's end
            async with aiohttp.ClientSession() as http:
                url = f"{served.url}api/v1/flow/default/service/agent"
                first = asyncio.ensure_future(http.post(url, json={"question": ask("fay")}))
                await w.until("Approve? [y/N] ")
                w.type("y\n")
                fay = await (await first).json()
                second = asyncio.ensure_future(http.post(url, json={"question": ask("gus")}))
                await w.until("Approve? [y/N] ")
                w.type("n\n")
                await w.until("Reason (optional): ")
                w.type("not gus\n")
                gus = await (await second).json()
                third = asyncio.ensure_future(http.post(url, json={"question": ask("hal")}))
                await w.until("Approve? [y/N] ")
                [request] = await listed(served)
                async with http.post(served.url + ROUTE, json={
                        "operation": "approve", "call": request["call"],
                        "digest": request["digest"]}) as r:
                    assert r.status == 200
                await w.until(f"(call {request['call']})")
                hal = await (await third).json()
        finally:
            code, err = await w.end()
        dialogs = json.loads((await run_toolmesh("dialogs", "list", "--json", "-u",
                                                 served.url))[1])["dialogs"]
        shown = {}
        for d in dialogs:
            result = await run_toolmesh("dialogs", "show", d["id"], "-u", served.url)
            assert result[0] == 0, result[2]
            shown[d["question"]] = result[1]
    assert code == 0, err
    assert fay["answer"] == "sent to fay", fay
    assert "denied" in gus["answer"] and "not gus" in gus["answer"], gus
    assert hal["answer"] == "sent to hal", hal
    assert mailer.sent() == ["to fay", "to hal"]
    assert 'send {"to": "fay"}  waits for your approval' in err
    assert "✔ approved\n" in err and "✔ denied\n" in err
    # the third was answered elsewhere: its prompt ended, and the line says by whom
    assert (f"Approve? [y/N] \n✔ approved by local over REST (call {request['call']})"
            in err), err
    assert "✔ approved by local with the CLI" in shown[ask("fay")]
    assert "✘ denied by local with the CLI" in shown[ask("gus")]
    assert "; reason: not gus" in shown[ask("gus")]
    assert "✔ approved by local over REST" in shown[ask("hal")]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_answers_piped_in_are_used_and_the_watch_ends_with_them(
        served: tuple[Served, Mailer]) -> None:
    server, mailer = served
    async with waiting(server, ask("ida")) as agent:
        [request] = await listed(server)
        code, out, err = await run_toolmesh("approvals", "approve", "--watch", "-u", server.url,
                                            stdin_text="y\n")
        ended = await agent.end()
        nothing = await run_toolmesh("approvals", "approve", "--watch", "-u", server.url,
                                     stdin_text="")
        shown = await run_toolmesh("dialogs", "show", request["dialog"], "-u", server.url)
    assert code == 0, err
    assert "watching workspace 'default': 1 request waiting" in err
    assert 'send {"to": "ida"}  waits for your approval' in err and "✔ approved" in err
    assert ended[0] == 0 and ended[1] == "sent to ida\n", ended[2]
    assert mailer.sent() == ["to ida"]
    assert nothing[0] == 0, nothing[2]  # nothing waits, nothing to answer with: it ends
    assert shown[0] == 0 and "✔ approved by local with the CLI" in shown[1], shown
    assert "--watch answers every request" in (await run_toolmesh(
        "approvals", "approve", "--watch", request["call"], "-u", server.url))[2]
