"""Calls that wait for a person, from the terminal: `toolmesh agent` asks at its prompt (or,
with nothing on stdin, says how to answer and waits), `toolmesh approvals` lists and answers
— all as processes against a real `toolmesh serve` (the offline demo model, the mailer tool
service that counts its attempts, `--approval always`); an MCP server's questions come from
server-everything (npm), the MCP project's own test server."""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.forkserver import spawn
from tests.gateway.test_approvals_route import Mailer, approving_serve, ask, offered
from tests.mcp import everything as everything_mcp
from tests.mcp.everything import EverythingServer
from tests.processes import env, run_toolmesh
from tests.servers import Served

#: the line `toolmesh agent` writes when it cannot ask: how to answer from elsewhere
HINT = "answer from another terminal with: "


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Served, Mailer]]:
    async with approving_serve(tmp_path) as s:
        yield s


@dataclass
class Agent:
    """`toolmesh agent` run with nothing on stdin, once it said how to answer."""

    process: asyncio.subprocess.Process
    #: the command it said answers the call (without ``toolmesh`` and "(or deny)")
    command: list[str]
    err: list[str] = field(default_factory=list)

    async def end(self) -> tuple[int, str, str]:
        out, rest = await asyncio.wait_for(self.process.communicate(), 30)  # stdin left open
        assert self.process.returncode is not None
        if self.process.stdin is not None:
            self.process.stdin.close()
        return self.process.returncode, out.decode(), "".join(self.err) + rest.decode()


@asynccontextmanager
async def waiting(served: Served, question: str, *, until: str = HINT,
                  stdin: int = asyncio.subprocess.DEVNULL) -> AsyncIterator[Agent]:
    """`toolmesh agent QUESTION` with ``stdin`` (default: at its end, ``/dev/null``), until
    it writes a line with ``until`` on stderr (default: how the call it waits for is
    answered)."""
    process = await spawn(
        "toolmesh.cli.main", "agent", question, "-u", served.url,
        env=env(), stdin=stdin, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert process.stderr is not None
    err: list[str] = []
    try:
        async with asyncio.timeout(30):
            while until not in (err[-1] if err else ""):
                line = (await process.stderr.readline()).decode()
                assert line, "".join(err)
                err.append(line)
        words = shlex.split(err[-1].split(HINT, 1)[1].removesuffix(" (or deny)\n")) \
            if HINT in err[-1] else ["toolmesh"]
        assert words[0] == "toolmesh", err[-1]
        yield Agent(process, words[1:], err)
    finally:
        if process.returncode is None:
            process.kill()
            await process.communicate()


async def listed(served: Served) -> list[dict[str, str]]:
    code, out, err = await run_toolmesh("approvals", "list", "--json", "-u", served.url)
    assert code == 0, err
    return json.loads(out)["approvals"]  # type: ignore[no-any-return]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_agent_asks_and_y_approves_the_call(served: tuple[Served, Mailer]) -> None:
    server, mailer = served
    code, out, err = await run_toolmesh("agent", ask("bob"), "-u", server.url,
                                        stdin_text="y\n")
    assert code == 0, err
    assert out == "sent to bob\n"
    assert '✋ send {"to": "bob"}  waits for your approval' in err
    assert "Approve? [y/N] y\n✔ approved" in err
    assert len(mailer.attempts()) == 1 and mailer.sent() == ["to bob"]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_agent_anything_but_yes_denies_and_the_tool_does_not_run(
        served: tuple[Served, Mailer]) -> None:
    server, mailer = served
    plain = await run_toolmesh("agent", ask("bob"), "-u", server.url, stdin_text="n\n")
    reasoned = await run_toolmesh("agent", ask("carol"), "-u", server.url,
                                  stdin_text="nope\ncarol is away\n")
    assert plain[0] == 0 and reasoned[0] == 0, plain[2] + reasoned[2]
    assert "the user denied this call of 'send'" in plain[1]
    assert "They gave no reason" in plain[1]
    assert "Reason (optional): carol is away\n✔ denied" in reasoned[2]
    assert "Their reason: carol is away" in reasoned[1]
    assert mailer.attempts() == [] and mailer.sent() == []


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_agent_with_nothing_on_stdin_says_how_to_answer_and_waits(
        served: tuple[Served, Mailer]) -> None:
    server, mailer = served
    async with waiting(server, ask("dave")) as agent:
        [request] = await listed(server)
        # the call's key alone names it (it holds the dialog's id)
        assert request["call"].startswith(request["dialog"] + "/")
        assert agent.command == ["approvals", "approve", request["call"], "-u", server.url]
        assert mailer.attempts() == []
        code, out, err = await run_toolmesh(*agent.command)  # the command, as it was printed
        assert code == 0, err
        ended = await agent.end()
    assert ended[0] == 0, ended[2]
    assert ended[1] == "sent to dave\n"
    assert 'approving send {"to": "dave"}' in err
    assert out == (f"approved call {request['call']} of dialog {request['dialog']}: "
                   'send {"to": "dave"}\n')
    assert "nothing to read on stdin: the dialog waits" in ended[2]
    # the waiting command heard who answered
    assert f"✔ approved by local with the CLI (call {request['call']})" in ended[2]
    assert mailer.attempts() == [request["call"]] and mailer.sent() == ["to dave"]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_agent_answered_from_elsewhere_ends_while_its_prompt_waits(
        served: tuple[Served, Mailer]) -> None:
    """A person at the terminal who never answers: the dialog answered meanwhile (another
    terminal, the Workbench), the command ends with it — its stdin still open."""
    server, mailer = served
    async with waiting(server, ask("frank"), until="waits for your approval",
                       stdin=asyncio.subprocess.PIPE) as agent:
        [request] = await listed(server)
        code, _, err = await run_toolmesh("approvals", "approve", request["dialog"],
                                          request["call"], "-u", server.url)
        assert code == 0, err
        ended = await agent.end()  # (its stdin is still open: nothing was written to it)
    assert ended[0] == 0, ended[2]
    assert ended[1] == "sent to frank\n"
    # the prompt left open is ended, and the command says who answered instead
    assert (f"Approve? [y/N] \n✔ approved by local with the CLI (call {request['call']})\n"
            in ended[2]), ended[2]
    assert ended[2].count("Approve? [y/N]") == 1
    assert mailer.attempts() == [request["call"]]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_approvals_list_approve_and_deny(served: tuple[Served, Mailer]) -> None:
    server, mailer = served
    u = ("-u", server.url)
    code, _, nothing = await run_toolmesh("approvals", "list", *u)
    assert code == 0 and "nothing waits for an answer in workspace 'default'" in nothing
    async with waiting(server, ask("erin")) as agent:
        [request] = await listed(server)
        dialog, call = request["dialog"], request["call"]
        code, table, err = await run_toolmesh("approvals", "list", *u, extra_env={"TZ": "UTC"})
        assert code == 0, err
        unknown = await run_toolmesh("approvals", "approve", dialog, "nope", *u)
        unknown_alone = await run_toolmesh("approvals", "deny", f"{dialog}/9/nope", *u)
        other_dialog = await run_toolmesh("approvals", "deny", "not-" + dialog, call, *u)
        stale = await run_toolmesh("approvals", "approve", dialog, call, "--digest",
                                   "sha256:" + "0" * 64, *u)
        wrong_field = await run_toolmesh("approvals", "answer", dialog, call, "decline",
                                         "--field", "x=1", *u)
        not_a_question = await run_toolmesh("approvals", "answer", dialog, call, "accept", *u)
        assert mailer.attempts() == []
        denied = await run_toolmesh("approvals", "deny", call, "--reason", "erin left", *u)
        ended = await agent.end()
        twice = await run_toolmesh("approvals", "deny", dialog, call, *u)
    header, row = table.splitlines()
    assert header.split() == ["CALL", "TOOL", "ARGUMENTS", "EXPIRES"]
    assert row.split()[:4] == [call, "send", '{"to":', '"erin"}']
    # TZ=UTC: the local time is the recorded one
    assert " ".join(row.split()[4:]) == request["expires"][:19].replace("T", " ")
    assert unknown[0] == 1 and "not-found: no call 'nope'" in unknown[2]
    assert unknown_alone[0] == 1 and f"not-found: no call '{dialog}/9/nope'" in unknown_alone[2]
    assert other_dialog[0] == 1 and "not-found: " in other_dialog[2]
    assert stale[0] == 1 and "stale: " in stale[2] and request["digest"] in stale[2]
    assert wrong_field[0] == 1 and "--field goes with accept" in wrong_field[2]
    assert not_a_question[0] == 1 and "bad-request: " in not_a_question[2]
    assert denied[0] == 0, denied[2]
    assert denied[1] == f"denied call {call} of dialog {dialog} (reason: erin left)\n"
    assert ended[0] == 0 and "Their reason: erin left" in ended[1]
    assert twice[0] == 1 and ("not-found: " in twice[2] or "answered: " in twice[2])
    assert "Traceback" not in twice[2]
    assert mailer.attempts() == [] and mailer.sent() == []


# -- an MCP server's questions: server-everything's form and URL elicitations ------------------

@pytest.fixture(scope="module")
def everything() -> Iterator[EverythingServer]:
    problem = everything_mcp.missing_node()
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    with everything_mcp.everything_http() as s:
        yield s


@pytest.fixture
async def asking(served: tuple[Served, Mailer], everything: EverythingServer) -> Served:
    """The server of ``served`` with server-everything's tools that ask the person: ask-form
    and ask-url (approved in advance: the questions are what these tests are about)."""
    server = served[0]
    for item, value in {
            "mcp/form": {"url": everything.url, "remote-name": "trigger-elicitation-request"},
            "mcp/link": {"url": everything.url, "remote-name": "trigger-url-elicitation"},
            "tool/ask-form": {"type": "mcp-tool", "name": "ask-form", "mcp-tool": "form",
                              "description": "asks for details", "approval": "never"},
            "tool/ask-url": {"type": "mcp-tool", "name": "ask-url", "mcp-tool": "link",
                             "description": "sends to a page", "approval": "never"}}.items():
        code, _, err = await run_toolmesh("config", "put", item, "-u", server.url,
                                          stdin_text=json.dumps(value))
        assert code == 0, err
    await offered(server, "ask-form", None)
    return server


FORM = "use ask-form with {}"
LINK = 'use ask-url with {"url": "https://example.com/consent", "message": "Please consent"}'


async def test_agent_asks_each_field_of_a_form(asking: Served) -> None:
    # name; check (a boolean: "maybe" is asked again); firstLine, email, homepage, birthdate
    # left empty; integer (1..100: 500 is asked again); the rest their defaults
    typed = "Ada Lovelace\nmaybe\nyes\n\n\n\n\n500\n7\n" + "\n" * 10
    code, out, err = await run_toolmesh("agent", FORM, "-u", asking.url, stdin_text=typed)
    declined = await run_toolmesh("agent", FORM, "-u", asking.url, stdin_text="\n")
    cancelled = await run_toolmesh("agent", FORM, "-u", asking.url,
                                   stdin_text="Ada\ncancel\n")
    assert code == 0, err
    assert "❓ ask-form asks: Please provide inputs for the following fields:" in err
    assert "  String (name) — Your full, legal name (required): Ada Lovelace\n" in err
    assert "[y/n]: maybe\n   y or n is expected\n" in err
    assert "[a whole number, 1..100] (default: 42): 500\n   100 or less is expected\n" in err
    assert "✔ accepted" in err
    assert "- Name: Ada Lovelace" in out and "- Favorite Integer: 7" in out
    assert '"check": true' in out and '"legacyTitledEnum": "pet-1"' in out  # a default
    assert declined[0] == 0 and "User declined" in declined[1], declined[2]
    assert cancelled[0] == 0, cancelled[2]
    assert "✔ cancelled" in cancelled[2] and "User cancelled" in cancelled[1]
    assert "Ada" not in cancelled[1]


async def test_agent_shows_a_url_and_asks_if_it_is_done(asking: Served) -> None:
    code, out, err = await run_toolmesh("agent", LINK, "-u", asking.url, stdin_text="y\n")
    declined = await run_toolmesh("agent", LINK, "-u", asking.url, stdin_text="no\n")
    assert code == 0, err
    assert "❓ ask-url asks: Please consent\n   open https://example.com/consent\n" in err
    assert "Done? [y/N] y\n✔ accepted" in err
    assert "User completed the URL elicitation flow" in out
    assert declined[0] == 0 and "✔ declined" in declined[2], declined[2]
    assert "completed" not in declined[1]


async def test_a_form_answered_with_toolmesh_approvals_answer(asking: Served) -> None:
    async with waiting(asking, FORM) as agent:
        [question] = await listed(asking)
        assert agent.command[:4] == ["approvals", "answer", question["call"],
                                     "accept|decline|cancel"]
        which = (question["dialog"], question["call"])
        unfit = await run_toolmesh("approvals", "answer", *which, "accept", "--field",
                                   "integer=many", "-u", asking.url)
        missing = await run_toolmesh("approvals", "answer", *which, "accept", "--field",
                                     "check=y", "-u", asking.url)
        code, out, err = await run_toolmesh(
            "approvals", "answer", *which, "accept", "--field", "name=Ada", "--field",
            "check=yes", "--field", "integer=7", "--field", "titledSingleSelectEnum=wonder woman",
            "--field", "untitledMultipleSelectEnum=Piano, Drums", "-u", asking.url)
        ended = await agent.end()
    assert unfit[0] == 1 and "--field integer: a whole number is expected" in unfit[2]
    assert missing[0] == 1 and "bad-request: " in missing[2] and "'name'" in missing[2]
    assert code == 0, err
    assert out == f"accepted call {question['call']} of dialog {question['dialog']}\n"
    assert ended[0] == 0, ended[2]
    assert "- Name: Ada" in ended[1] and "- Favorite Integer: 7" in ended[1]
    assert '"titledSingleSelectEnum": "hero-3"' in ended[1]
    assert '"untitledMultipleSelectEnum": [\n      "Piano",\n      "Drums"\n    ]' in ended[1]
