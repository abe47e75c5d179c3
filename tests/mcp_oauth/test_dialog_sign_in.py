"""Signing in inside a dialog: a person asks the agent something that needs an MCP server they
have not signed in to; the dialog shows a link (a URL-mode question), a real headless browser
follows it, signs in at a real authorization server (oidc-provider) and comes back to the
gateway's callback page, and the same dialog answers as that person. A second person is asked
separately and never acts under the first one's grant; one who says no gives the model a
clear observation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest

from tests.browser import chromium, chromium_missing
from tests.mcp_oauth.authserver import AuthServer, missing_node
from tests.mcp_oauth.browser_login import log_in_with_browser
from tests.mcp_oauth.browserless import follow, log_in, redirect_params
from tests.mcp_oauth.protected_server import ProtectedServer
from tests.mcp_oauth.stack import ADMIN, Dialog, mcp_tool, oauth_item, person, post, put_items
from tests.servers import Served, serving

# slow (tests/conftest.py): the npm oidc-provider (and Chromium), on Node
pytestmark = pytest.mark.slow

if (_missing := missing_node() or chromium_missing()) is not None:
    pytest.skip(_missing, allow_module_level=True)

QUESTION = "use whoami with {}"


@pytest.fixture(scope="module")
def auth() -> Iterator[AuthServer]:
    with AuthServer() as server:
        yield server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("oauth-dialogs"), "--token", ADMIN) as running:
        yield running


@pytest.fixture
async def server(auth: AuthServer, served: Served) -> AsyncIterator[ProtectedServer]:
    async with ProtectedServer(auth) as protected:
        await put_items(served, {
            "mcp/whoami": oauth_item(protected, "whoami"),
            "tool/whoami": {"type": "mcp-tool", "name": "whoami", "mcp-tool": "whoami",
                            "description": "says who you are at the notes server"}})
        yield protected


async def test_a_dialog_asks_its_person_to_sign_in_and_answers_as_them(
        served: Served, server: ProtectedServer) -> None:
    alice, bob = await person(served, "alice"), await person(served, "bob")
    dialog = Dialog(served, alice.token, QUESTION)
    asked = await dialog.question()
    assert asked["mode"] == "url" and asked["kind"] == "elicitation"
    assert "127.0.0.1" in asked["message"]  # the host is shown before anything opens
    link = asked["url"]
    query = parse_qs(urlsplit(link).query)
    assert query["code_challenge_method"] == ["S256"] and query["resource"] == [server.url]
    assert query["redirect_uri"] == [served.url.rstrip("/") + "/api/v1/mcp-oauth/callback"]

    async with chromium() as browser:
        page = await browser.new_page()
        await log_in_with_browser(page, link, username="alice")
        # the callback page: this browser holds no toolmesh token, so it asks for one
        await page.wait_for_selector("#token-form:not([hidden])", timeout=10_000)
        await page.fill("#token", alice.token)
        await page.click("#token-form button")
        await page.locator("#status", has_text="Signed in").wait_for(timeout=10_000)
        assert "code=" not in page.url  # the code left the address bar
    await dialog.answer()
    assert "alice (scopes:" in dialog.said()
    assert server.calls == [("alice", "whoami")]

    # bob asks the same: asked to sign in himself, nothing runs for him under alice's grant
    second = Dialog(served, bob.token, QUESTION)
    asked = await second.question()
    assert asked["mode"] == "url" and asked["url"] != link
    assert server.calls == [("alice", "whoami")]
    status, body = await mcp_tool(served, {"name": "whoami", "parameters": {}}, bob.token)
    assert body["error"]["type"] == "login-required"  # nor on the direct route
    # bob signs in as bob (without a browser: the callback is posted as his own identity)
    answer = await follow(asked["url"], username="bob")
    assert answer.status_code == 200  # the callback page
    params = redirect_params(str(answer.url))
    status, body = await mcp_tool(served, {"operation": "login-finish", **params}, bob.token)
    assert status == 200, body
    await second.answer()
    assert "bob (scopes:" in second.said() and "alice" not in second.said()
    assert server.calls == [("alice", "whoami"), ("bob", "whoami")]


async def test_a_person_who_says_no_gives_the_model_a_clear_observation(
        served: Served, server: ProtectedServer) -> None:
    carol = await person(served, "carol")
    dialog = Dialog(served, carol.token, QUESTION)
    asked = await dialog.question()
    status, body = await post(served, "api/v1/flow/default/service/approvals", {
        "operation": "answer", "dialog": asked["dialog"], "call": asked["call"],
        "action": "decline"}, carol.token)
    assert status == 200 and not body.get("error"), body
    await dialog.answer()
    said = dialog.said()
    assert "declined to sign in" in said
    assert server.calls == []


class LinkFollower:
    """An MCP client's person: signs in at the link a URL-mode question brings (as
    ``username``, posting the callback as their own toolmesh identity), or says no."""

    def __init__(self, served: Served, token: str, username: str, *, say_no: bool = False
                 ) -> None:
        self.served, self.token, self.username, self.say_no = served, token, username, say_no
        self.asked: list[Any] = []

    async def __call__(self, context: Any, params: Any) -> Any:
        import mcp_types

        self.asked.append(params)
        if self.say_no or getattr(params, "mode", None) != "url":
            return mcp_types.ElicitResult(action="decline")
        answer = redirect_params(await log_in(params.url, username=self.username))
        status, body = await mcp_tool(self.served, {"operation": "login-finish", **answer},
                                      self.token)
        assert status == 200, body
        return mcp_types.ElicitResult(action="accept")


@asynccontextmanager
async def mcp_session(served: Served, token: str, person: LinkFollower | None
                      ) -> AsyncIterator[Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=60) as http, \
            streamable_http_client(served.url + "mcp", http_client=http) as (read, write, *_), \
            ClientSession(read, write, elicitation_callback=person) as session:
        await session.initialize()
        yield session


async def test_an_mcp_client_at_mcp_gets_the_link_and_its_call_goes_on(
        served: Served, server: ProtectedServer) -> None:
    dora, erik = await person(served, "dora"), await person(served, "erik")
    follower = LinkFollower(served, dora.token, "dora")
    async with mcp_session(served, dora.token, follower) as session:
        result = await session.call_tool("whoami", {})
    assert not result.is_error, result
    assert result.content[0].text.startswith("dora (scopes:")
    [asked] = follower.asked
    assert asked.mode == "url" and "127.0.0.1" in asked.message
    assert parse_qs(urlsplit(asked.url).query)["code_challenge_method"] == ["S256"]

    # a person who says no: the call ends with that, and nothing ran for them
    refuser = LinkFollower(served, erik.token, "erik", say_no=True)
    async with mcp_session(served, erik.token, refuser) as session:
        result = await session.call_tool("whoami", {})
    assert result.is_error and "declined to sign in" in result.content[0].text, result
    assert len(refuser.asked) == 1
    assert server.calls == [("dora", "whoami")]


async def test_an_mcp_client_that_takes_no_links_is_told_how_to_sign_in(
        served: Served, server: ProtectedServer) -> None:
    fay = await person(served, "fay")
    async with mcp_session(served, fay.token, None) as session:  # declares no elicitation
        result = await session.call_tool("whoami", {})
    assert result.is_error and "toolmesh mcp login whoami" in result.content[0].text, result
    assert server.calls == []


async def test_a_person_who_says_no_at_the_sign_in_page_ends_the_wait(
        served: Served, server: ProtectedServer) -> None:
    gus = await person(served, "gus")
    dialog = Dialog(served, gus.token, QUESTION)
    asked = await dialog.question()
    state = parse_qs(urlsplit(asked["url"]).query)["state"][0]
    # what the callback page posts when the authorization server sends the person back with
    # an error (they pressed Cancel there)
    status, body = await mcp_tool(served, {"operation": "login-finish", "state": state,
                                           "error": "access_denied"}, gus.token)
    assert body["error"]["type"] == "login-declined", body
    async with asyncio.timeout(30):  # the dialog does not wait for its deadline
        await dialog.answer()
    assert "declined to sign in" in dialog.said()
    assert server.calls == []
