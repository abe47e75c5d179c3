"""The Workbench's side of signing in to MCP servers with OAuth, in a real headless Chromium
against a real ``toolmesh serve``: the Connect and Disconnect buttons of the MCP servers page,
and ``sign-in/go.html``, the page a new tab starts at so that it carries the Workbench tab's
token (a copy of its sessionStorage) to the gateway's sign-in callback page.

The sites the browser is sent to are aiohttp servers on loopback; a whole sign-in at a real
authorization server is in :mod:`tests.workbench.test_connect_sign_in`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from aiohttp import web
from playwright.async_api import expect

from tests.processes import run_toolmesh
from tests.workbench.conftest import BROWSER_LOOP, Workbench, open_page, sign_in

pytestmark = BROWSER_LOOP

if TYPE_CHECKING:
    from playwright.async_api import Page

GO = "workbench/sign-in/go.html"
THERE = "the authorization server stand-in"


@dataclass
class Elsewhere:
    """A site of another origin: every path answers a page that says :data:`THERE` (and 404
    to what an OAuth client would look for, so a sign-in cannot start there); the paths and
    queries asked are kept in ``asked``."""

    origin: str
    asked: list[str] = field(default_factory=list)

    def url(self, path: str) -> str:
        return self.origin + path


@asynccontextmanager
async def elsewhere() -> AsyncIterator[Elsewhere]:
    site = Elsewhere("")

    async def any_path(request: web.Request) -> web.Response:
        site.asked.append(request.path_qs)
        if request.method != "GET" or request.path.startswith("/.well-known/") \
                or request.path.startswith("/mcp"):
            return web.Response(status=404, text="nothing here")
        return web.Response(text=f"<!doctype html><title>elsewhere</title>"
                            f"<link rel=icon href='data:,'><p>{THERE}</p>",
                            content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", any_path)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        tcp = web.TCPSite(runner, "127.0.0.1", 0)
        await tcp.start()
        site.origin = f"http://127.0.0.1:{runner.addresses[0][1]}"
        yield site
    finally:
        await runner.cleanup()


async def put_mcp(workbench: Workbench, items: dict[str, dict[str, Any]]) -> None:
    await workbench.config({"operation": "put", "values": [
        {"type": "mcp", "key": key, "value": json.dumps(value)} for key, value in items.items()]})


def row(page: Page, key: str) -> Any:
    return page.get_by_role("row").filter(has=page.get_by_role("link", name=key, exact=True))


async def test_only_oauth_items_can_be_connected_and_refusals_are_shown(
        page: Page, workbench: Workbench) -> None:
    async with elsewhere() as site:
        await put_mcp(workbench, {
            "plain": {"url": site.url("/mcp"), "remote-name": "echo"},
            "notes": {"url": site.url("/mcp"), "remote-name": "whoami",
                      "auth": {"type": "oauth", "per": "user"}},
            "team": {"url": site.url("/mcp-team"), "remote-name": "whoami",
                     "auth": {"type": "oauth", "per": "workspace"}},
        })
        opened: list[Any] = []
        page.context.on("page", lambda p: opened.append(p))
        await open_page(page, workbench, "MCP servers")
        table = page.get_by_role("table")
        await expect(table.get_by_role("columnheader", name="Sign-in")).to_be_visible()

        plain, notes, team = row(page, "plain"), row(page, "notes"), row(page, "team")
        await expect(notes).to_contain_text("not connected")
        await expect(notes).to_contain_text("OAuth, per user")
        await expect(team).to_contain_text("shared by the workspace")
        await expect(plain.get_by_role("button")).to_have_count(0)
        await expect(plain).not_to_contain_text("connected")
        await expect(notes.get_by_role("button", name="Connect", exact=True)).to_be_visible()
        await expect(team.get_by_role("button", name="Connect", exact=True)).to_be_visible()
        # nothing to forget yet
        await expect(notes.get_by_role("button", name="Disconnect")).to_be_hidden()

        # the server cannot be signed in to (no OAuth metadata anywhere): the gateway's own
        # words are shown, and no tab opens
        direct = await workbench.post("api/v1/flow/default/service/mcp-tool",
                                      {"operation": "login", "name": "notes"})
        refusal = direct["error"]["message"]
        await notes.get_by_role("button", name="Connect", exact=True).click()
        await expect(notes.get_by_role("status")).to_have_text(f"Cannot connect: {refusal}")
        assert opened == []

        # a person who is no admin is told that only an admin connects the workspace's item,
        # and the server's refusal is shown when they try
        code, out, err = await run_toolmesh(
            "token", "create", "-w", "default", "-c", "config:read", "-c", "tools:invoke",
            "--name", "member", "-u", workbench.url, "-t", workbench.token)
        assert code == 0, err
        await page.get_by_role("button", name="Sign out").click()
        await open_page(page, workbench, "MCP servers", token=out.strip())
        await expect(team).to_contain_text("Only an admin may connect or disconnect it.")
        await expect(notes).not_to_contain_text("Only an admin")
        await team.get_by_role("button", name="Connect", exact=True).click()
        await expect(team.get_by_role("status")).to_contain_text(
            "Cannot connect: MCP item 'team' signs in once for the whole workspace: only an "
            "admin may sign in for it")
        assert opened == []


async def test_go_sends_a_tab_the_workbench_opens_on_with_the_token(
        page: Page, workbench: Workbench) -> None:
    async with elsewhere() as site:
        await sign_in(page, workbench)
        target = site.url("/authorize?client_id=toolmesh&state=s1")
        # what Connect and a URL question do: window.open of go.html, the address in its hash
        async with page.expect_popup() as popped:
            assert await page.evaluate(
                "async (u) => (await import('/workbench/js/links.js')).openThroughGo(new URL(u))",
                target)
        tab = await popped.value
        await tab.wait_for_url(target)
        await expect(tab.get_by_text(THERE)).to_be_visible()
        assert site.asked == ["/authorize?client_id=toolmesh&state=s1"]
        assert await tab.evaluate("window.opener === null")
        # back at the gateway (where the callback page is) the tab still holds the token: the
        # Workbench there is signed in without asking
        await tab.goto(workbench.page_url)
        await expect(tab.get_by_role("button", name="Sign out")).to_be_visible()
        await tab.close()

        # reached any other way (a link someone sent), it shows the host and waits for a click
        host = site.origin.removeprefix("http://")
        await page.goto(workbench.url + GO + "#" + quote(target, safe=""))
        await expect(page.get_by_role("status")).to_have_text(
            f"You are going to sign in at {host}")
        await expect(page.get_by_text(target, exact=True)).to_be_visible()
        await page.get_by_role("button", name=f"Continue to {host}").click()
        await page.wait_for_url(target)
        await expect(page.get_by_text(THERE)).to_be_visible()
        assert len(site.asked) == 2


#: what go.html must not follow
REFUSED = ["javascript:alert(document.domain)", "data:text/html,<script>alert(1)</script>",
           "http://127.0.0.1@evil.example/", "not a url"]


async def test_go_refuses_what_is_not_a_plain_web_address(
        page: Page, workbench: Workbench) -> None:
    dialogs: list[str] = []
    page.context.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    await sign_in(page, workbench)
    refused = "not a web page (only http: and https: addresses are opened)"
    for address in REFUSED:
        go = workbench.url + GO + "#" + quote(address, safe="")
        # opened by the Workbench, which would go on at once for a web address
        async with page.expect_popup() as popped:
            await page.evaluate("(u) => { window.open(u, '_blank'); }", go)
        tab = await popped.value
        await expect(tab.get_by_role("status")).to_contain_text(refused)
        assert tab.url == go, address
        await expect(tab.get_by_role("button")).to_be_hidden()
        await tab.close()

    # reached without the Workbench, for a web address first; then only the hash changes (the
    # page is not loaded again), to each address to refuse
    await page.goto(workbench.url + GO + "#" + quote("https://example.com/", safe=""))
    await expect(page.get_by_role("button", name="Continue to example.com")).to_be_visible()
    for address in REFUSED:
        go = workbench.url + GO + "#" + quote(address, safe="")
        await page.goto(go)
        await expect(page.get_by_role("status")).to_contain_text(refused)
        await expect(page.get_by_role("button")).to_be_hidden()
        assert page.url == go, address
    assert dialogs == []
