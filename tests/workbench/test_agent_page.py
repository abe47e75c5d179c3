"""The Agent page: a chat that streams a dialog — the action (tool and arguments), the
observation from the real joke service, the answer — and its usage; a token without the
``agent`` capability sees the chat disabled, with the reason."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tests.cli.test_agent_cli import EXAMPLES, JOKE
from tests.gateway.test_scoped_tokens import create, post
from tests.llm.openai_server import Answer
from tests.workbench.conftest import BROWSER_LOOP, Workbench
from tests.workbench.test_prompts_page import open_page

pytestmark = BROWSER_LOOP

if TYPE_CHECKING:
    from playwright.async_api import Page

HOSTILE = "<img src=x onerror=alert(1)>"
ACT = 'Thought: The user wants a joke about food.\nAction: tell-joke\nArgs: {"topic": "food"}'
DONE = f"Thought: I have the joke.\nFinal Answer: Here it is {HOSTILE}: {JOKE}"


async def add_joke_tool(workbench: Workbench) -> None:
    status, body = await post(workbench.served, "api/v1/config", {"operation": "put", "values": [
        {"type": "tool-service", "key": "joke-service",
         "value": (EXAMPLES / "joke-service.json").read_text()},
        {"type": "tool", "key": "tell-joke", "value": json.dumps({
            **json.loads((EXAMPLES / "tell-joke.json").read_text()), "group": ["fun"]})}]},
        workbench.token)
    assert status == 200 and "error" not in body, body


async def test_a_dialog_streams_action_observation_answer_and_usage(
        page: Page, workbench: Workbench) -> None:
    await add_joke_tool(workbench)
    workbench.llm.add(ACT, DONE)
    await open_page(page, workbench, "agent")
    await page.get_by_role("heading", name="Agent").wait_for()
    # the groups the tool items name are suggested
    await page.get_by_text("Groups the tools name: fun.").wait_for()
    await page.get_by_label("Groups").fill("fun")
    await page.get_by_label("Question").fill("tell me a joke about food")
    await page.get_by_label("Question").press("Control+Enter")

    log = page.get_by_role("log", name="Transcript")
    await log.locator(".message.answer").filter(has_text=JOKE).wait_for()
    await log.locator(".usage").wait_for()
    assert await log.locator(".message.question").text_content() == \
        "Questiontell me a joke about food"
    assert await log.locator(".message.thought").first.text_content() == \
        "ThoughtThe user wants a joke about food."
    action = log.locator(".message.action")
    assert await action.locator(".tool").text_content() == "tell-joke"
    assert json.loads(await log.get_by_label("Arguments of tell-joke").text_content()) == {
        "topic": "food"}
    # the observation is the joke service's own answer
    assert await log.locator(".message.observation").text_content() == f"Observation{JOKE}"
    answer = log.locator(".message.answer")
    assert await answer.count() == 1
    assert await answer.text_content() == f"AnswerHere it is {HOSTILE}: {JOKE}"
    assert await page.locator("main img").count() == 0
    usage = await log.locator(".usage").text_content()
    assert usage.startswith("Usage: tokens in ") and "model test-model" in usage, usage
    assert "1 tool call (" in usage, usage
    await page.get_by_role("status").filter(has_text="Answered.").wait_for()
    # the dialog asked with the group chosen: the tool was offered to the LLM
    assert "tell-joke" in workbench.llm.requests[0].prompt


async def test_the_tools_a_step_was_shown_and_a_cut_answer_are_shown(
        page: Page, workbench: Workbench) -> None:
    """Issue 41: when a step leaves tools out, the chat shows which it showed and why; an
    answer the model's limit cut short says so."""
    await add_joke_tool(workbench)
    others = [{"type": "tool", "key": name, "value": json.dumps({
        **json.loads((EXAMPLES / "tell-joke.json").read_text()), "name": name,
        "description": description, "arguments": [], "group": ["fun"]})}
        for name, description in (("get-weather", "The weather in a city"),
                                  ("count-words", "Count the words of a text"))]
    status, body = await post(workbench.served, "api/v1/config",
                              {"operation": "put", "values": others}, workbench.token)
    assert status == 200 and "error" not in body, body
    workbench.llm.add(ACT, Answer(text="Thought: done.\nFinal Answer: A long joke story",
                                  finish_reason="length"))
    await open_page(page, workbench, "agent")
    await page.get_by_label("Groups").fill("fun")
    await page.get_by_label("Question").fill("tell me a joke about food")
    await page.get_by_label("Question").press("Control+Enter")
    log = page.get_by_role("log", name="Transcript")
    offer = log.locator(".message.offer")
    await offer.wait_for()
    assert (await offer.text_content()).startswith("Tools shown1 of 3 tools (bm25)")
    assert await offer.get_by_role("listitem").all_text_contents() == [
        "tell-joke — matched: joke, food"]
    # the status line below the answer (the answer's own text ends with the narrator's note)
    await log.get_by_role("status").filter(has_text="The answer was cut short").wait_for()
    answer = await log.locator(".message.answer").text_content()
    assert answer.startswith("AnswerA long joke story") and "model reached its limit" in answer


async def test_an_error_of_the_dialog_is_shown_in_the_transcript(
        page: Page, workbench: Workbench) -> None:
    # the LLM fails: the dialog's error message ends it
    workbench.llm.add({"status": 500, "error": "the model is down"})
    await open_page(page, workbench, "agent")
    await page.get_by_label("Question").fill("hello")
    await page.get_by_role("button", name="Send").click()
    log = page.get_by_role("log", name="Transcript")
    await log.locator(".message.error").wait_for()
    error = await log.locator(".message.error").text_content()
    assert error.startswith("Errorllm-error: ") and "the model is down" in error, error
    await page.get_by_role("status").filter(has_text="The dialog failed").wait_for()
    assert await page.get_by_role("button", name="Send").is_enabled()


async def test_a_token_without_agent_sees_the_chat_disabled(page: Page,
                                                           workbench: Workbench) -> None:
    token = await create(workbench.served, "-w", "default", "-c", "config:read",
                         "--name", "reader", token=workbench.token)
    await open_page(page, workbench, "agent", token)
    await page.get_by_text("it lacks the 'agent' capability").wait_for()
    assert await page.get_by_label("Question").is_disabled()
    assert await page.get_by_role("button", name="Send").is_disabled()
    assert workbench.llm.requests == []
