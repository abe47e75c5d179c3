"""Every page of the Workbench, with something on it — tools (one that asks a person), an MCP
server, a finished dialog and one waiting for a person — on a laptop (1280 px) and a phone
(390 px): no "null" or "undefined" written where an optional part is missing, nothing wider
than the screen (a wide table scrolls inside its card), and not one console error."""

from __future__ import annotations

import asyncio
import json
import re
from typing import TYPE_CHECKING, Any

from tests.cli.test_agent_cli import JOKE
from tests.mcp.servers import ServerProcess
from tests.workbench.conftest import BROWSER_LOOP, MCP_TOKEN, Workbench, sign_in
from tests.workbench.test_agent_page import ACT, DONE
from tests.workbench.test_approvals_page import QUESTION, offered
from tests.workbench.test_dialogs_page import ask_for_a_joke

pytestmark = BROWSER_LOOP

if TYPE_CHECKING:
    from playwright.async_api import Page

VIEWPORTS = ({"width": 1280, "height": 800}, {"width": 390, "height": 844})
#: words a page shows when it wrote a missing value instead of leaving it out
MISSING = re.compile(r"\b(null|undefined|NaN|\[object Object\])\b")
#: how wide the page is against the window, and what sticks out (for the failure message)
MEASURE = """() => {
  const root = document.scrollingElement;
  const wide = [...document.querySelectorAll("main *, header *")]
    .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 0.5
      && !e.closest(".table-scroll") && !e.closest(".visually-hidden"))
    .slice(0, 5).map((e) => `${e.tagName}.${e.className}: ${e.getBoundingClientRect().right}`);
  return { scroll: root.scrollWidth, inner: window.innerWidth, wide };
}"""


async def furnish(workbench: Workbench, mcp_server: ServerProcess) -> tuple[str, asyncio.Task[Any]]:
    """The config, a finished dialog (its id) and a dialog waiting for a person (its task)."""
    await workbench.config({"operation": "put", "values": [
        {"type": "mcp", "key": "weather", "value": json.dumps(
            {"url": mcp_server.url, "auth-token": MCP_TOKEN, "remote-name": "remove",
             "approval": "always"})},
        {"type": "tool", "key": "remover", "value": json.dumps(
            {"type": "mcp-tool", "name": "remover", "mcp-tool": "weather",
             "description": "removes a file",
             "arguments": [{"name": "path", "type": "string", "description": "which"}]})}]})
    finished = await ask_for_a_joke(workbench)  # the joke tool asks no one yet
    assert JOKE in finished["answer"], finished
    await offered(workbench)  # now it does
    workbench.llm.add(ACT, DONE)
    waiting = asyncio.create_task(workbench.post(
        "api/v1/flow/default/service/agent", {"question": QUESTION, "group": ["fun"]}))
    dialogs = (await workbench.post("api/v1/flow/default/service/dialogs",
                                    {"operation": "list"}))["dialogs"]
    done = [d["id"] for d in dialogs if d["status"] == "answer"]
    return done[0], waiting


async def check(page: Page, where: str) -> None:
    """The page shown now: no missing value written out, nothing wider than the window."""
    await page.wait_for_load_state("networkidle")
    await page.locator("main#page > .status.busy").wait_for(state="detached")
    text = await page.locator("body").inner_text()
    found = MISSING.findall(text)
    assert not found, (where, found, text[:2000])
    measured = await page.evaluate(MEASURE)
    assert measured["scroll"] <= measured["inner"], (where, measured)
    problems: list[str] = page.problems  # type: ignore[attr-defined]
    assert not problems, (where, problems)


async def test_every_page_at_1280_and_390_px(
        page: Page, workbench: Workbench, mcp_server: ServerProcess) -> None:
    finished, waiting = await furnish(workbench, mcp_server)
    pages = {  # route -> a heading it shows once rendered
        "tools": "Tools", "tools/tell-joke": "Tool tell-joke", "tools/remover": "Tool remover",
        "tools/new": "New tool", "mcp": "MCP servers", "mcp/weather": "MCP server weather",
        "mcp/new": "New MCP server", "services": "Tool services", "prompts": "Prompts",
        "agent": "Agent", "approvals": "Approvals", "dialogs": "Dialogs",
        f"dialogs/{finished}": "tell me a joke about food", "mcp-clients": "MCP clients",
        "config": "Config",
    }
    try:
        await sign_in(page, workbench)
        count = page.locator("#waiting-count")
        await count.wait_for()  # the dialog asked through REST waits for a person
        for viewport in VIEWPORTS:
            await page.set_viewport_size(viewport)
            for route, heading in pages.items():
                await page.goto(f"{workbench.page_url}#/{route}")
                await page.get_by_role("heading", name=heading, exact=True).wait_for()
                await check(page, f"{route} at {viewport['width']} px")
            # the waiting request's card and the chat, where cards are widest
            await page.goto(f"{workbench.page_url}#/approvals")
            await page.get_by_role("region", name="Approval needed: tell-joke").wait_for()
            await check(page, f"the approval card at {viewport['width']} px")
            await page.goto(f"{workbench.page_url}#/dialogs")
            await page.get_by_text("waiting for a person", exact=True).wait_for()
            await check(page, f"the dialogs table with a waiting dialog at {viewport['width']} px")
    finally:
        [request] = (await workbench.post("api/v1/flow/default/service/approvals",
                                          {"operation": "list"}))["approvals"]
        await workbench.post("api/v1/flow/default/service/approvals", {
            "operation": "deny", "dialog": request["dialog"], "call": request["call"]})
        await waiting
