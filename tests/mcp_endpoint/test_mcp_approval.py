"""A tool that waits for a person, called through ``/mcp``: the MCP client's person is asked
(form elicitation) with the exact call, and the call runs only on their yes — the ``mcp``
SDK's own client against a real ``toolmesh serve --approval always``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.dialogs.test_embedded_restart import _offered
from tests.mcp_endpoint.test_endpoint import _offered_with
from tests.servers import toolmesh_serve


class Person:
    """Answers the server's questions as told, and remembers them."""

    def __init__(self, *answers: mcp_types.ElicitResult) -> None:
        self.answers = list(answers)
        self.asked: list[mcp_types.ElicitRequestParams] = []

    async def __call__(self, context: Any, params: mcp_types.ElicitRequestParams,
                       ) -> mcp_types.ElicitResult:
        self.asked.append(params)
        return self.answers.pop(0)


def yes() -> mcp_types.ElicitResult:
    return mcp_types.ElicitResult(action="accept", content={"approve": True})


@asynccontextmanager
async def session(url: str, person: Person | None, token: str | None = None,
                  ) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            streamable_http_client(url, http_client=http) as (read, write, *_), \
            ClientSession(read, write, elicitation_callback=person) as opened:
        await opened.initialize()
        yield opened


async def test_the_clients_person_approves_each_call_and_sees_exactly_what_runs(
        tmp_path: Path) -> None:
    person = Person(yes(), mcp_types.ElicitResult(
        action="accept", content={"approve": False, "reason": "not <b>food</b> again"}),
        mcp_types.ElicitResult(action="decline"), mcp_types.ElicitResult(action="cancel"))
    async with toolmesh_serve(tmp_path, "--approval", "always") as served:
        await _offered(served.url, "tell-joke")
        async with session(served.url + "mcp", person) as client:
            approved = await client.call_tool("tell-joke", {"topic": "cats"})
            denied = await client.call_tool("tell-joke", {"topic": "food"})
            declined = await client.call_tool("tell-joke", {"topic": "food"})
            cancelled = await client.call_tool("tell-joke", {"topic": "food"})
            # arguments the tool refuses are refused before anyone is asked
            wrong = await client.call_tool("tell-joke", {"topic": 7})
    assert not approved.is_error and approved.content[0].text.startswith("Hey trustgraph! ")
    assert denied.is_error and denied.content[0].text == (
        "the person did not approve the call of 'tell-joke': not <b>food</b> again")
    assert declined.is_error and "declined" in declined.content[0].text
    assert cancelled.is_error and "cancelled" in cancelled.content[0].text
    assert wrong.is_error and "invalid arguments" in wrong.content[0].text
    # each call was asked about, once, with its exact arguments, in form mode
    assert len(person.asked) == 4
    first = person.asked[0]
    assert isinstance(first, mcp_types.ElicitRequestFormParams)
    assert 'arguments: {"topic": "cats"}' in first.message and "tell-joke" in first.message
    assert first.requested_schema["required"] == ["approve"]
    assert 'arguments: {"topic": "food"}' in person.asked[1].message


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_no_one_to_ask_means_the_call_does_not_run_and_says_why(tmp_path: Path) -> None:
    from tests.gateway.test_scoped_tokens import ADMIN, create

    env = {"TOOLMESH_GATEWAY_TOKEN": ADMIN}
    async with toolmesh_serve(tmp_path, "--approval", "always", extra_env=env) as served:
        await _offered_with(served.url, "tell-joke", ADMIN)
        approver = await create(served, "-w", "default", "-c", "tools:invoke,approve")
        invoker = await create(served, "-w", "default", "-c", "tools:invoke")
        mute = Person()
        async with session(served.url + "mcp", None, approver) as client:
            no_elicitation = await client.call_tool("tell-joke", {"topic": "food"})
        async with session(served.url + "mcp", mute, invoker) as client:
            no_capability = await client.call_tool("tell-joke", {"topic": "food"})
        asked = Person(yes())
        async with session(served.url + "mcp", asked, approver) as client:
            allowed = await client.call_tool("tell-joke", {"topic": "food"})
    for refused in (no_elicitation, no_capability):
        assert refused.is_error and "waits for a person's approval" in refused.content[0].text
        assert "Hey" not in refused.content[0].text
    assert mute.asked == []  # a token that may not approve is never asked to
    assert not allowed.is_error and len(asked.asked) == 1
