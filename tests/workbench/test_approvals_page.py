"""The Approvals page and the count in the navigation: what waits for a person, pushed to the
tab by the approvals service's ``watch`` — a dialog started elsewhere (REST) that begins to
wait shows up without the page doing anything, and one answered elsewhere goes, its card
saying who decided. The Dialogs page says which dialog waits for a person, and reads its
table again after the answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio
from playwright.async_api import expect

from tests.cli.test_agent_cli import JOKE
from tests.gateway.test_scoped_tokens import create, post
from tests.workbench.conftest import BROWSER_LOOP, Workbench, open_page
from tests.workbench.test_agent_page import ACT, DONE
from tests.workbench.test_approval_card import REFUSED, add_asking_joke_tool

pytestmark = BROWSER_LOOP

if TYPE_CHECKING:
    from playwright.async_api import Page

QUESTION = "tell me a joke about food"


async def offered(workbench: Workbench) -> None:
    """The asking joke tool, once the agent offers it."""
    await add_asking_joke_tool(workbench)
    version = (await workbench.config({"operation": "config"}))["version"]
    tools = await workbench.post("api/v1/flow/default/service/agent-tools", {"version": version})
    assert any(t["name"] == "tell-joke" and t["status"] == "available"
               for t in tools["tools"]), tools


@pytest_asyncio.fixture(loop_scope="session")
async def elsewhere(workbench: Workbench) -> AsyncIterator[list[asyncio.Task[Any]]]:
    """Dialogs asked through REST, by someone who is not in the browser (awaited at the end)."""
    tasks: list[asyncio.Task[Any]] = []
    yield tasks
    for task in tasks:
        if not task.done():
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def ask_elsewhere(workbench: Workbench, tasks: list[asyncio.Task[Any]]) -> asyncio.Task[Any]:
    task = asyncio.create_task(workbench.post("api/v1/flow/default/service/agent",
                                              {"question": QUESTION, "group": ["fun"]}))
    tasks.append(task)
    return task


async def waiting_now(workbench: Workbench) -> list[dict[str, Any]]:
    answer = await workbench.post("api/v1/flow/default/service/approvals", {"operation": "list"})
    return answer["approvals"]  # type: ignore[no-any-return]


async def test_the_count_follows_requests_that_begin_and_end_elsewhere(
        page: Page, workbench: Workbench, elsewhere: list[asyncio.Task[Any]]) -> None:
    await offered(workbench)
    await open_page(page, workbench, "Tools")
    count = page.get_by_role("navigation", name="Workbench").locator("#waiting-count")
    await expect(count).to_be_hidden()

    # a dialog asked through REST begins to wait: the count appears, the page did nothing
    workbench.llm.add(ACT, REFUSED)
    dialog = ask_elsewhere(workbench, elsewhere)
    await expect(count).to_have_text("1 waiting")
    await expect(count).to_have_attribute("title", "1 call waits for an answer")
    [request] = await waiting_now(workbench)

    # answered elsewhere (a scoped token, through REST): the count goes
    ops = await create(workbench.served, "-w", "default", "-c", "approve", "--name", "ops",
                       token=workbench.token)
    status, body = await post(workbench.served, "api/v1/flow/default/service/approvals", {
        "operation": "deny", "dialog": request["dialog"], "call": request["call"],
        "reason": "not now"}, ops)
    assert status == 200, body
    await expect(count).to_be_hidden()
    answer = await dialog
    assert "No joke today" in answer["answer"], answer
    # the page never asked for the list: the watch brought both changes
    lists = [url for url, body in page.responses  # type: ignore[attr-defined]
             if url.endswith("/service/approvals")]
    assert lists == [], lists


async def test_a_card_answered_elsewhere_says_by_whom_and_a_new_one_appears(
        page: Page, workbench: Workbench, elsewhere: list[asyncio.Task[Any]]) -> None:
    await offered(workbench)
    await open_page(page, workbench, "Approvals")
    section = page.get_by_role("region", name="Waiting for an answer")
    await section.get_by_text("No call waits for an answer in this workspace.").wait_for()

    workbench.llm.add(ACT, REFUSED)
    dialog = ask_elsewhere(workbench, elsewhere)
    card = section.get_by_role("region", name="Approval needed: tell-joke")
    await card.wait_for()
    await expect(section.get_by_text("No call waits for an answer in this workspace.")).to_be_hidden()
    assert "Expires at " in await card.text_content()
    [request] = await waiting_now(workbench)

    ops = await create(workbench.served, "-w", "default", "-c", "approve", "--name", "ops",
                       token=workbench.token)
    status, body = await post(workbench.served, "api/v1/flow/default/service/approvals", {
        "operation": "deny", "dialog": request["dialog"], "call": request["call"],
        "reason": "not today"}, ops)
    assert status == 200, body
    # the card stays, spent: what happened, by whom, through which face — not when it expires
    await card.get_by_role("status").filter(has_text="Denied: not today").wait_for()
    decided = card.locator(".decided")
    await expect(decided).to_contain_text("Decided by ops (rest) at ")
    assert "Expires" not in await card.text_content()
    assert await card.get_by_role("button", name="Approve").is_disabled()
    await section.get_by_text("No call waits for an answer in this workspace.").wait_for()
    await dialog


async def test_the_dialogs_table_says_who_waits_for_a_person_and_reads_again_after_the_answer(
        page: Page, workbench: Workbench, elsewhere: list[asyncio.Task[Any]]) -> None:
    await offered(workbench)
    workbench.llm.add(ACT, DONE)
    dialog = ask_elsewhere(workbench, elsewhere)
    await open_page(page, workbench, "Dialogs")
    table = page.get_by_role("table", name="Recorded dialogs")
    row = table.get_by_role("row").filter(has_text=QUESTION)
    await expect(row.locator(".badge")).to_have_text("waiting for a person")
    assert "so far" in await row.text_content()
    pointer = page.locator(".waiting-pointer")
    await expect(pointer).to_contain_text("1 call waits for an answer.")

    # the dialog's own page: its request's card, answered there
    await row.get_by_role("link", name=QUESTION).click()
    await expect(page.locator(".dialogs-page .badge").first).to_have_text("waiting for a person")
    card = page.get_by_role("region", name="Waiting for an answer in this dialog").get_by_role(
        "region", name="Approval needed: tell-joke")
    await card.get_by_role("button", name="Approve").click()
    await card.get_by_role("status").filter(has_text="Approved: the call runs.").wait_for()
    # the steps are read again at the answer: the decision, and by whom
    steps = page.get_by_role("list", name="Steps")
    await expect(steps.locator(".message.decision")).to_contain_text(
        "Decision approve — by admin (workbench), ")
    answer = await dialog
    assert JOKE in answer["answer"], answer
    # the dialog's end is not pushed: Refresh shows it
    await page.get_by_role("button", name="Refresh").click()
    await steps.locator(".message.answer").filter(has_text=JOKE).wait_for()

    # back on the list: read again, nothing waits; it says so in words, without "null"
    await page.get_by_role("link", name="All dialogs").click()
    await expect(row.locator(".badge")).to_have_text("answer")
    await expect(pointer).to_be_hidden()
    assert "null" not in await page.locator("main").inner_text()


async def test_a_token_without_approve_is_told_why_it_sees_no_list(
        page: Page, workbench: Workbench) -> None:
    reader = await create(workbench.served, "-w", "default", "-c", "agent", "-c", "config:read",
                          "--name", "reader", token=workbench.token)
    await open_page(page, workbench, "Approvals", token=reader)
    await page.get_by_text("needs the approve capability").wait_for()
    await expect(page.locator("#waiting-count")).to_be_hidden()
