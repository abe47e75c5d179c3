"""Calls that wait for a person, in the Workbench: the joke tool's policy asks (``"approval":
"always"``), so the dialog pauses before the real joke service runs and the chat shows a card
— the tool, the exact arguments, when it expires — answered on the chat's own WebSocket;
approved, the joke comes; denied, the model is told the reason and the service never runs.
The Dialogs page lists what waits in the workspace, for someone who was not in the chat.

An MCP server's questions (elicitation) come the same way: server-everything (npm, the
TypeScript SDK) asks for a form, whose fields the card builds from the schema, or sends the
person to a page, shown as a link and never as a form."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio
from playwright.async_api import expect

from tests.cli.test_agent_cli import EXAMPLES, JOKE
from tests.gateway.test_scoped_tokens import create
from tests.mcp import everything
from tests.mcp.everything import EverythingServer
from tests.workbench.conftest import BROWSER_LOOP, STEP_MS, Workbench
from tests.workbench.test_agent_page import ACT, DONE, HOSTILE
from tests.workbench.test_prompts_page import open_page

pytestmark = BROWSER_LOOP

if TYPE_CHECKING:
    from playwright.async_api import Browser, Locator, Page

REFUSED = "Thought: I may not tell it.\nFinal Answer: No joke today, sorry."


async def add_asking_joke_tool(workbench: Workbench) -> None:
    """The joke service, and its tell-joke tool (group "fun") whose every call needs approval."""
    await workbench.config({"operation": "put", "values": [
        {"type": "tool-service", "key": "joke-service",
         "value": (EXAMPLES / "joke-service.json").read_text()},
        {"type": "tool", "key": "tell-joke", "value": json.dumps({
            **json.loads((EXAMPLES / "tell-joke.json").read_text()), "group": ["fun"],
            "approval": "always"})}]})


async def ask_in_chat(page: Page, workbench: Workbench, question: str) -> Locator:
    """Open the chat, ask ``question`` with the "fun" group; the transcript."""
    await open_page(page, workbench, "agent")
    await page.get_by_text("Groups the tools name: fun.").wait_for()
    await page.get_by_label("Groups").fill("fun")
    await page.get_by_label("Question").fill(question)
    await page.get_by_role("button", name="Send").click()
    return page.get_by_role("log", name="Transcript")


async def shown_arguments(card: Locator) -> Any:
    return json.loads(await card.get_by_label("Arguments to approve for tell-joke").text_content())


async def test_a_call_approved_in_the_chat_runs_and_the_dialog_answers(
        page: Page, workbench: Workbench) -> None:
    await add_asking_joke_tool(workbench)
    workbench.llm.add(ACT, DONE)
    log = await ask_in_chat(page, workbench, "tell me a joke about food")

    card = log.get_by_role("region", name="Approval needed: tell-joke")
    await card.wait_for()
    assert await shown_arguments(card) == {"topic": "food"}
    assert "Expires at " in await card.text_content()
    assert "(in 5 min)" in await card.text_content()  # the agent's default: 300 s
    await page.get_by_role("status").filter(has_text="The agent waits for an answer").wait_for()
    # nothing has run: the dialog waits for the person
    assert await log.locator(".message.observation").count() == 0
    assert len(workbench.llm.requests) == 1

    await card.get_by_role("button", name="Approve").click()
    await card.get_by_role("status").filter(has_text="Approved: the call runs.").wait_for()
    await log.locator(".message.answer").filter(has_text=JOKE).wait_for()
    # the joke service ran: its joke is the observation, and the model saw it
    assert await log.locator(".message.observation").text_content() == f"Observation{JOKE}"
    assert JOKE in workbench.llm.requests[1].prompt
    for name in ("Approve", "Deny"):
        assert await card.get_by_role("button", name=name).is_disabled()
    await page.get_by_role("status").filter(has_text="Answered.").wait_for()
    assert await page.locator("main img").count() == 0  # the model's markup stays text


async def test_a_call_denied_with_a_reason_is_not_run_and_the_model_hears_why(
        page: Page, workbench: Workbench) -> None:
    await add_asking_joke_tool(workbench)
    workbench.llm.add(ACT, REFUSED)
    log = await ask_in_chat(page, workbench, "tell me a joke about food")
    card = log.get_by_role("region", name="Approval needed: tell-joke")
    await card.wait_for()

    reason = f"not at work {HOSTILE}"
    await card.get_by_role("button", name="Deny", exact=True).click()
    await card.get_by_label("Reason (optional)").fill(reason)
    await card.get_by_role("button", name="Deny call").click()
    await card.get_by_role("status").filter(has_text="Denied: ").wait_for()
    assert await card.get_by_role("status").text_content() == f"Denied: {reason}"

    await log.locator(".message.answer").filter(has_text="No joke today").wait_for()
    observation = await log.locator(".message.observation").text_content()
    assert "the user denied this call of 'tell-joke'; it was not run." in observation
    assert f"Their reason: {reason}" in observation
    # the model's next prompt carries the reason; the joke service never ran
    assert f"Their reason: {reason}" in workbench.llm.requests[1].prompt
    assert JOKE not in workbench.llm.requests[1].prompt
    assert JOKE not in await log.text_content()
    assert await card.get_by_label("Reason (optional)").is_disabled()
    assert await page.locator("main img").count() == 0


@pytest_asyncio.fixture(loop_scope="session")
async def second_page(browser: Browser) -> AsyncIterator[Page]:
    """Another person's browser: its own context, so its own session and WebSocket."""
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(STEP_MS)
    p = await context.new_page()
    problems: list[str] = []
    p.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    p.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    try:
        yield p
        assert not problems, problems
    finally:
        await context.close()


async def test_a_waiting_call_is_listed_on_the_approvals_page_and_answered_there(
        page: Page, second_page: Page, workbench: Workbench) -> None:
    await add_asking_joke_tool(workbench)
    workbench.llm.add(ACT, DONE)
    chat = await ask_in_chat(page, workbench, "tell me a joke about food")
    in_chat = chat.get_by_role("region", name="Approval needed: tell-joke")
    await in_chat.wait_for()

    # someone else, who was not in the chat, opens the Approvals page
    other = second_page
    await open_page(other, workbench, "approvals")
    waiting = other.get_by_role("region", name="Waiting for an answer")
    card = waiting.get_by_role("region", name="Approval needed: tell-joke")
    await card.wait_for()
    assert await waiting.get_by_role("region").count() == 1
    assert await shown_arguments(card) == {"topic": "food"}
    await expect(other.locator("#waiting-count")).to_have_text("1 waiting")
    # the dialog it belongs to is linked, and shows as waiting for a person
    dialogs = (await workbench.post("api/v1/flow/default/service/dialogs",
                                    {"operation": "list"}))["dialogs"]
    assert [d["status"] for d in dialogs] == ["running"]
    await card.get_by_role("link", name=dialogs[0]["id"]).wait_for()

    await card.get_by_role("button", name="Approve").click()
    # spent: it says what happened, and who decided through which face
    await card.get_by_role("status").filter(has_text="Approved: the call runs.").wait_for()
    await expect(card.locator(".decided")).to_contain_text("Decided by admin (workbench) at ")
    assert "Expires" not in await card.text_content()
    # nothing else waits: the count goes
    await waiting.get_by_text("No call waits for an answer in this workspace.").wait_for()
    await expect(other.locator("#waiting-count")).to_be_hidden()
    await waiting.get_by_role("status").filter(
        has_text="tell-joke: Approved: the call runs.").wait_for()

    # the dialog goes on in the chat: the joke service ran, the answer came; the chat's card
    # says who answered
    await chat.locator(".message.answer").filter(has_text=JOKE).wait_for()
    assert await chat.locator(".message.observation").text_content() == f"Observation{JOKE}"
    await in_chat.get_by_role("status").filter(has_text="Approved: the call runs.").wait_for()
    await expect(in_chat.locator(".decided")).to_contain_text("by admin (workbench)")
    assert await in_chat.get_by_role("button", name="Approve").is_disabled()
    answered = await workbench.post("api/v1/flow/default/service/approvals",
                                    {"operation": "list"})
    assert answered["approvals"] == [], answered

    # the dialog's steps show what was asked and who decided
    await other.get_by_role("navigation", name="Workbench").get_by_role(
        "link", name="Dialogs").click()
    await other.get_by_role("table", name="Recorded dialogs").get_by_role(
        "link", name="tell me a joke").click()
    steps = other.get_by_role("list", name="Steps")
    await steps.locator(".message.answer").wait_for()
    decision = steps.locator(".message.decision")
    await expect(decision).to_contain_text("Decision approve — by admin (workbench), ")


async def test_a_token_without_approve_sees_the_card_but_cannot_answer(
        page: Page, workbench: Workbench) -> None:
    await add_asking_joke_tool(workbench)
    workbench.llm.add(ACT, DONE)
    token = await create(workbench.served, "-w", "default", "-c", "agent", "-c", "config:read",
                         "--name", "asker", token=workbench.token)
    await open_page(page, workbench, "agent", token)
    await page.get_by_text("Groups the tools name: fun.").wait_for()
    await page.get_by_label("Groups").fill("fun")
    await page.get_by_label("Question").fill("tell me a joke about food")
    await page.get_by_role("button", name="Send").click()
    card = page.get_by_role("log", name="Transcript").get_by_role(
        "region", name="Approval needed: tell-joke")
    await card.get_by_role("status").filter(has_text="lacks the 'approve' capability").wait_for()
    assert await shown_arguments(card) == {"topic": "food"}
    assert await card.get_by_role("button").count() == 0
    # the parts a token without approve does not get are left out, not written as "null"
    assert "null" not in await card.text_content()
    # nor does the Dialogs page list what waits; the call still waits for someone who may
    await page.get_by_role("navigation", name="Workbench").get_by_role("link", name="Dialogs").click()
    await page.get_by_role("table", name="Recorded dialogs").wait_for()
    assert await page.get_by_role("region", name="Waiting for an answer").count() == 0
    waiting = await workbench.post("api/v1/flow/default/service/approvals", {"operation": "list"})
    assert [r["tool"] for r in waiting["approvals"]] == ["tell-joke"]
    assert len(workbench.llm.requests) == 1
    # answered by someone who may, so the dialog does not hold the server's stop
    [request] = waiting["approvals"]
    await workbench.post("api/v1/flow/default/service/approvals", {
        "operation": "deny", "dialog": request["dialog"], "call": request["call"]})

# -- an MCP server's questions ------------------------------------------------------------------

FORM = "Thought: I need their details.\nAction: ask-form\nArgs: {}"
URL = ('Thought: They must consent first.\nAction: ask-url\n'
       'Args: {"url": "https://example.com/consent?step=1&x=<b>", "message": "Please consent"}')
THANKS = "Thought: They answered.\nFinal Answer: Thank you."


@pytest.fixture(scope="module")
def server() -> Iterator[EverythingServer]:
    problem = everything.missing_node()
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    with everything.everything_http() as s:
        yield s


async def add_asking_mcp_tools(workbench: Workbench, server: EverythingServer) -> None:
    """server-everything's two asking tools as ``ask-form`` and ``ask-url`` (group "fun"),
    offered once the agent has read their schemas."""
    tool = {"type": "mcp-tool", "group": ["fun"]}
    await workbench.config({"operation": "put", "values": [
        {"type": "mcp", "key": "form", "value": json.dumps(
            {"url": server.url, "remote-name": "trigger-elicitation-request"})},
        {"type": "mcp", "key": "link", "value": json.dumps(
            {"url": server.url, "remote-name": "trigger-url-elicitation"})},
        {"type": "tool", "key": "ask-form", "value": json.dumps(
            {**tool, "name": "ask-form", "mcp-tool": "form",
             "description": "asks the user for their details"})},
        {"type": "tool", "key": "ask-url", "value": json.dumps(
            {**tool, "name": "ask-url", "mcp-tool": "link",
             "description": "sends the user to a page"})}]})
    version = (await workbench.config({"operation": "config"}))["version"]
    tools = await workbench.post("api/v1/flow/default/service/agent-tools", {"version": version})
    offered = {t["name"]: t["status"] for t in tools["tools"]}
    assert (offered.get("ask-form"), offered.get("ask-url")) == ("available", "available"), tools


async def test_a_form_question_is_answered_in_the_chat_with_the_fields_it_asks(
        page: Page, workbench: Workbench, server: EverythingServer) -> None:
    await add_asking_mcp_tools(workbench, server)
    workbench.llm.add(FORM, THANKS)
    log = await ask_in_chat(page, workbench, "who am I?")
    card = log.get_by_role("region", name="Question from ask-form")
    await card.wait_for()
    assert "Please provide inputs for the following fields:" in await card.text_content()
    form = card.get_by_role("form", name="Answer to ask-form")
    # each property as its input: labels from titles, required marked, types kept
    name = form.get_by_label("String (required)")
    assert await name.get_attribute("required") == ""
    assert await form.get_by_label("Boolean").get_attribute("type") == "checkbox"
    integer = form.get_by_label("Integer", exact=True)
    assert (await integer.get_attribute("type"), await integer.input_value()) == ("number", "42")
    assert await form.get_by_label("String with email format").get_attribute("type") == "email"
    legacy = form.get_by_label("Legacy Titled Single Select Enum")
    assert await legacy.locator("option").all_text_contents() == [
        "(none)", "Cats", "Dogs", "Birds", "Fish", "Reptiles"]
    assert await form.get_by_text("Your full, legal name").count() == 1  # descriptions shown

    # the required name missing: the browser refuses to send the form
    await form.get_by_role("button", name="Accept").click()
    assert await name.evaluate("e => e.validity.valueMissing")
    assert await card.get_by_role("status").text_content() == ""

    await name.fill("Ada Lovelace")
    await form.get_by_label("Boolean").check()
    await integer.fill("7")
    await legacy.select_option(label="Dogs")
    await form.get_by_role("button", name="Accept").click()
    await card.get_by_role("status").filter(has_text="Accepted.").wait_for()
    await log.locator(".message.answer").filter(has_text="Thank you.").wait_for()
    # the server received the values, typed as its schema asks
    observation = await log.locator(".message.observation").text_content()
    for line in ("- Name: Ada Lovelace", "- Agreed to terms: true", "- Favorite Integer: 7"):
        assert line in observation, observation
    assert '"legacyTitledEnum": "pet-2"' in observation, observation
    assert "Ada Lovelace" in workbench.llm.requests[1].prompt
    assert await form.get_by_role("button", name="Accept").is_disabled()


async def test_a_url_question_shows_its_link_and_asks_nothing_in_a_form(
        page: Page, workbench: Workbench, server: EverythingServer) -> None:
    await add_asking_mcp_tools(workbench, server)
    workbench.llm.add(URL, THANKS)
    log = await ask_in_chat(page, workbench, "sign me up")
    card = log.get_by_role("region", name="Question from ask-url")
    await card.wait_for()
    assert "Please consent" in await card.text_content()
    address = "https://example.com/consent?step=1&x=<b>"
    # the host and the whole address, as text; nothing opens before the person says so
    await expect(card.locator(".host")).to_have_text("example.com")
    await expect(card.get_by_text(address, exact=True)).to_be_visible()
    assert await card.get_by_role("link").count() == 0
    assert await card.locator("form, input, select, textarea").count() == 0
    assert await card.locator("b").count() == 0
    await card.get_by_role("button", name="Open example.com…").click()
    await expect(card.get_by_text("Open a page at example.com in a new tab?")).to_be_visible()
    await card.get_by_role("button", name="Not now").click()
    await expect(card.get_by_role("button", name="Yes, open example.com")).to_be_hidden()
    # opened through the Workbench's go.html, so a sign-in there can find this tab's token
    await page.context.route("https://example.com/**", lambda route: route.fulfill(
        body="<p>consent page</p>", content_type="text/html"))
    await card.get_by_role("button", name="Open example.com…").click()
    async with page.expect_popup() as popped:
        await card.get_by_role("button", name="Yes, open example.com").click()
    tab = await popped.value
    await tab.wait_for_url("https://example.com/consent?step=1&x=%3Cb%3E")
    await expect(tab.get_by_text("consent page")).to_be_visible()
    await tab.close()
    await expect(card.get_by_text("Opened example.com in a new tab.")).to_be_visible()

    await card.get_by_role("button", name="Done").click()
    await card.get_by_role("status").filter(has_text="Accepted.").wait_for()
    await log.locator(".message.answer").filter(has_text="Thank you.").wait_for()
    assert "User completed the URL elicitation flow" in await log.locator(
        ".message.observation").text_content()
    for name in ("Done", "Decline", "Cancel", "Open example.com…"):
        assert await card.get_by_role("button", name=name).is_disabled()
