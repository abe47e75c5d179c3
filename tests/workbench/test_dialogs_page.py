"""The Dialogs page: the dialogs the agent recorded, newest first, and one step by step — the
model's thought and call, the joke service's result, the answer; text stays text. A token of
another workspace sees none of them; one without ``agent`` is told why it sees nothing."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tests.cli.test_agent_cli import JOKE
from tests.gateway.test_scoped_tokens import create
from tests.workbench.conftest import BROWSER_LOOP, Workbench
from tests.workbench.test_agent_page import ACT, DONE, HOSTILE, add_joke_tool
from tests.workbench.test_prompts_page import open_page

pytestmark = BROWSER_LOOP

if TYPE_CHECKING:
    from playwright.async_api import Page


async def ask_for_a_joke(workbench: Workbench) -> dict:  # type: ignore[type-arg]
    """One dialog through REST, once the agent offers the joke tool."""
    await add_joke_tool(workbench)
    version = (await workbench.config({"operation": "config"}))["version"]
    tools = await workbench.post("api/v1/flow/default/service/agent-tools", {"version": version})
    assert any(t["name"] == "tell-joke" and t["status"] == "available"
               for t in tools["tools"]), tools
    workbench.llm.add(ACT, DONE)
    return await workbench.post("api/v1/flow/default/service/agent",
                                {"question": "tell me a joke about food", "group": ["fun"]})


async def test_a_recorded_dialog_is_listed_and_shown_step_by_step(
        page: Page, workbench: Workbench) -> None:
    answer = await ask_for_a_joke(workbench)
    assert JOKE in answer["answer"], answer
    await open_page(page, workbench, "dialogs")
    await page.get_by_role("heading", name="Dialogs", exact=True).wait_for()
    table = page.get_by_role("table", name="Recorded dialogs")
    row = table.get_by_role("row").filter(has_text="tell me a joke")
    await row.wait_for()
    assert "answer" in await row.text_content()
    await row.get_by_role("link", name="tell me a joke").click()

    steps = page.get_by_role("list", name="Steps")
    await steps.locator(".message.answer").wait_for()
    assert json.loads(await page.get_by_label("Arguments of tell-joke").text_content()) == {
        "topic": "food"}
    assert "The user wants a joke about food." in await steps.locator(
        ".message.thought").first.text_content()
    assert JOKE in await steps.locator(".message.observation").text_content()
    assert await steps.locator(".message.answer").text_content() == \
        f"Answer Here it is {HOSTILE}: {JOKE}"
    assert await page.locator("main img").count() == 0  # the model's markup stays text


async def test_other_workspaces_and_tokens_without_agent_see_no_dialog(
        page: Page, workbench: Workbench) -> None:
    await ask_for_a_joke(workbench)
    elsewhere = await create(workbench.served, "-w", "other", "-c", "agent", "--name", "o",
                             token=workbench.token)
    await open_page(page, workbench, "dialogs", elsewhere)
    await page.get_by_text("No dialog is recorded in this workspace yet.").wait_for()
    reader = await create(workbench.served, "-w", "default", "-c", "config:read",
                          "--name", "r", token=workbench.token)
    await page.get_by_role("button", name="Sign out").click()
    await open_page(page, workbench, "dialogs", reader)
    await page.get_by_text("needs the agent capability").wait_for()
