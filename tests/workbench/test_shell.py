"""The Workbench's shell: served by the gateway, signed in with a token, walled by its CSP."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from playwright.async_api import expect

from tests.workbench.conftest import BROWSER_LOOP, Workbench, sign_in

pytestmark = BROWSER_LOOP

if TYPE_CHECKING:
    from playwright.async_api import Page, Route


async def test_sign_in_with_the_token_shows_the_pages(page: Page, workbench: Workbench) -> None:
    await sign_in(page, workbench)
    nav = page.get_by_role("navigation", name="Workbench")
    for title in ("Tools", "MCP servers", "Tool services", "Prompts", "Agent", "Approvals",
                  "Dialogs", "MCP clients", "Config"):
        await nav.get_by_role("link", name=title).wait_for()
    await page.get_by_role("heading", name="Tools", exact=True).wait_for()


async def test_a_page_still_loading_does_not_replace_the_one_chosen_after_it(
        page: Page, workbench: Workbench) -> None:
    """The Tools page waits for the agent's view of the tools; held back here, it answers
    only after the user has gone to Config, and must not take Config's place."""
    held: list[Route] = []
    arrived = asyncio.Event()

    async def hold(route: Route) -> None:
        held.append(route)
        arrived.set()

    await page.route("**/service/agent-tools", hold)
    await page.goto(workbench.page_url)
    await page.get_by_label("Token").fill(workbench.token)
    await page.get_by_role("button", name="Sign in").click()
    async with asyncio.timeout(15):
        await arrived.wait()  # the Tools page is waiting for its data
    await page.get_by_role("navigation", name="Workbench").get_by_role(
        "link", name="Config").click()
    await page.get_by_role("heading", name="Config", exact=True).wait_for()
    async with page.expect_response("**/service/agent-tools"):
        for route in held:
            await route.continue_()
    # the Tools page's render has had its data: give it the turns it needs to finish
    await page.evaluate("new Promise((done) => setTimeout(done, 200))")
    await expect(page.get_by_role("heading", name="Config", exact=True)).to_be_visible()
    await expect(page.get_by_role("heading", name="Tools", exact=True)).to_have_count(0)


async def test_signing_in_logs_no_refusal(page: Page, workbench: Workbench) -> None:
    """The page asks whether the gateway needs a token on the WebSocket, where a refusal is a
    frame: no request is refused with a 401 the browser would log — not at the start without
    a token, not for a wrong token, not for the right one (the fixture fails on any console
    error)."""
    statuses: list[int] = []
    page.on("response", lambda r: statuses.append(r.status))
    await page.goto(workbench.page_url)
    await page.get_by_label("Token").fill("not-the-token")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("status")).to_have_text("That token was refused.")
    await page.get_by_label("Token").fill(workbench.token)
    await page.get_by_role("button", name="Sign in").click()
    await page.get_by_role("heading", name="Tools", exact=True).wait_for()
    assert 401 not in statuses, statuses
    # a reload signs in again from the tab's token, as quietly
    await page.reload()
    await page.get_by_role("heading", name="Tools", exact=True).wait_for()
    assert 401 not in statuses, statuses
