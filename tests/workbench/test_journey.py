"""The Workbench end to end, as a person with no CLI would use it, in a real browser against a
real ``toolmesh serve`` with a token, a real MCP server (``mcp`` SDK, streamable HTTP, bearer
token) and the joke service that ``toolmesh serve`` runs and announces:

sign in; add the MCP server and test its connection; make an ``mcp-tool`` tool whose
arguments are imported from the server, one description edited; test-invoke it; make a
``tool-service`` tool of the announced joke service (its config-param taken from the
announcement); chat with the agent and watch both actions and observations stream in — the
edited description is in what the agent sent the LLM; the MCP token is never in the page or
in anything it received; a read-only token sees the same tools and cannot save."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from playwright.async_api import expect

from tests.mcp.servers import ServerProcess
from tests.processes import run_toolmesh
from tests.servers import stored_raw
from tests.workbench.conftest import BROWSER_LOOP, MCP_TOKEN, Workbench, received_text, sign_in
from toolmesh.tools.services.joke import tell_joke

pytestmark = BROWSER_LOOP

if TYPE_CHECKING:
    from playwright.async_api import Page

#: the description the user gives the city argument: the LLM must be sent it
CITY = "The city to forecast, e.g. Oslo (Workbench-edited)"
#: the agent's two steps and its answer, as the scripted LLM will say them
FORECAST = ('Thought: I need the forecast first.\nAction: weather\n'
            'Args: {"city": "Oslo", "days": 2}')
JOKE_STEP = 'Thought: Now a joke.\nAction: tell_joke\nArgs: {"topic": "rain"}'
JOKE = tell_joke("trustgraph", {"style": "pun"}, {"topic": "rain"})
#: a put of the tool the read-only token may see, from the page, answering the HTTP status
REFUSED_PUT = """async (token) => {
    const r = await fetch("/api/v1/config", {method: "POST",
        headers: {"Authorization": "Bearer " + token, "Content-Type": "application/json"},
        body: JSON.stringify({operation: "put", values: [
            {type: "tool", key: "forecast", value: "{}"}]})});
    return r.status;
}"""
DONE = "Thought: I have both.\nFinal Answer: Sunny in Oslo, and here is a joke."


async def go(page: Page, link: str, heading: str) -> None:
    await page.get_by_role("navigation", name="Workbench").get_by_role(
        "link", name=link, exact=True).click()
    await page.get_by_role("heading", name=heading, exact=True).wait_for()


async def saved(page: Page, text: str) -> None:
    await expect(page.get_by_role("status").filter(has_text="Saved")).to_contain_text(text)


def tool_item(workbench: Workbench, key: str) -> dict[str, Any]:
    """The tool item as the store holds it."""
    return stored_raw(workbench.served, f"tool/{key}")


async def add_mcp_server(page: Page, mcp_server: ServerProcess) -> None:
    await go(page, "MCP servers", "MCP servers")
    await page.get_by_role("button", name="New MCP server").click()
    await page.get_by_label("Key").fill("weather")
    await page.get_by_label("URL").fill(mcp_server.url)
    await page.get_by_label("Remote tool name").fill("weather")
    await page.get_by_label("Bearer token").fill(MCP_TOKEN)
    await page.get_by_role("button", name="Create").click()
    await saved(page, 'Saved MCP server "weather".')
    await page.get_by_role("button", name="Test connection").click()
    await expect(page.get_by_text("Connected: the server lists")).to_be_visible()
    tools = page.get_by_role("table", name="Tools on the server")
    await expect(tools.get_by_text("weather", exact=True)).to_be_visible()


async def add_forecast_tool(page: Page, workbench: Workbench) -> None:
    await go(page, "Tools", "Tools")
    await page.get_by_role("button", name="New tool").click()
    await page.get_by_label("Key").fill("forecast")
    await page.get_by_label("Type", exact=True).select_option("mcp-tool")
    await page.get_by_label("MCP server").select_option("weather")
    await page.get_by_role("button", name="Import from the server").click()
    await expect(page.get_by_label("Name of argument 1")).to_have_value("city")
    await expect(page.get_by_label("Name of argument 2")).to_have_value("days")
    await expect(page.get_by_label("Type of argument 2")).to_have_value("integer")
    await page.get_by_label("Description of argument 1").fill(CITY)
    await page.get_by_role("button", name="Create").click()
    await saved(page, "forecast")
    item = tool_item(workbench, "forecast")
    assert (item["type"], item["mcp-tool"], item["name"]) == ("mcp-tool", "weather", "weather")
    assert item["arguments"][0] == {"name": "city", "type": "string", "description": CITY,
                                    "required": True}, item
    row = page.get_by_role("table", name="Tools").get_by_role("row").filter(
        has=page.get_by_role("link", name="forecast", exact=True))
    await expect(row.locator(".badge.ok")).to_have_text("offered")


async def invoke_forecast(page: Page) -> None:
    await go(page, "Tool services", "Tool services")
    await page.get_by_label("Invoke", exact=True).select_option("mcp")
    await page.get_by_label("MCP tool").select_option("weather")
    await page.get_by_label("Arguments (JSON object)").fill('{"city": "Oslo", "days": 2}')
    await page.get_by_role("button", name="Invoke", exact=True).click()
    await expect(page.get_by_role("log", name="Result")).to_have_text("Oslo: sunny for 2 days")


async def add_joke_tool(page: Page, workbench: Workbench) -> None:
    await go(page, "Tools", "Tools")
    await page.get_by_role("button", name="New tool").click()
    await page.get_by_label("Key").fill("joke")
    await page.get_by_label("Type", exact=True).select_option("tool-service")
    # announced, not configured: its config-param comes from the announcement
    await page.get_by_label("Service", exact=True).select_option("joke-service")
    await page.get_by_label("style", exact=True).fill("pun")
    await page.get_by_label("Name", exact=True).fill("tell_joke")
    await page.get_by_label("Description", exact=True).fill("Tell a joke on a topic")
    await page.get_by_role("button", name="Add argument").click()
    await page.get_by_label("Name of argument 1").fill("topic")
    await page.get_by_label("Description of argument 1").fill("What the joke is about")
    await page.get_by_role("button", name="Create").click()
    await saved(page, "joke")
    assert tool_item(workbench, "joke") == {
        "type": "tool-service", "name": "tell_joke", "description": "Tell a joke on a topic",
        "service": "joke-service", "style": "pun",
        "arguments": [{"name": "topic", "type": "string",
                       "description": "What the joke is about"}]}


async def chat(page: Page, workbench: Workbench) -> None:
    workbench.llm.add(FORECAST, JOKE_STEP, DONE)
    await go(page, "Agent", "Agent")
    await page.get_by_label("Question").fill("Weather in Oslo, and cheer me up")
    await page.get_by_role("button", name="Send").click()
    log = page.get_by_role("log", name="Transcript")
    await log.locator(".message.answer").filter(has_text="Sunny in Oslo").wait_for()
    actions = log.locator(".message.action .tool")
    await expect(actions).to_have_text(["weather", "tell_joke"])
    assert json.loads(await log.get_by_label("Arguments of weather").text_content()) == {
        "city": "Oslo", "days": 2}
    await expect(log.locator(".message.observation")).to_have_text(
        ["ObservationOslo: sunny for 2 days", f"Observation{JOKE}"])
    await expect(log.locator(".usage")).to_contain_text("2 tool calls")
    # what the agent told the LLM about the tool is what the user wrote in the editor
    assert CITY in workbench.llm.requests[0].prompt


async def read_only(page: Page, workbench: Workbench) -> None:
    code, out, err = await run_toolmesh("token", "create", "-w", "default", "-c", "config:read",
                                        "-c", "agent", "--name", "ro", "-u", workbench.url,
                                        "-t", workbench.token)
    assert code == 0, err
    token = out.strip()
    await page.get_by_role("button", name="Sign out").click()
    await sign_in(page, workbench, token)
    await go(page, "Tools", "Tools")
    await page.get_by_role("link", name="forecast", exact=True).click()
    await expect(page.get_by_label("Description of argument 1")).to_have_value(CITY)
    await expect(page.get_by_label("Description of argument 1")).not_to_be_editable()
    for name in ("Save", "Create", "Delete", "New tool"):
        await expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
    # and what the form does not offer, the gateway refuses: the same put, from the page
    problems: list[str] = page.problems  # type: ignore[attr-defined]
    assert not problems, problems
    async with page.expect_console_message(lambda m: "403" in m.text):
        status = await page.evaluate(REFUSED_PUT, token)
    assert status == 403
    # the browser logs the refusal it was asked to make: the one problem this page may have
    assert len(problems) == 1 and "403" in problems[0], problems
    problems.clear()
    assert tool_item(workbench, "forecast")["arguments"][0]["description"] == CITY


async def test_a_user_builds_and_uses_tools_with_no_cli(page: Page, workbench: Workbench,
                                                       mcp_server: ServerProcess) -> None:
    await sign_in(page, workbench)
    await page.get_by_role("heading", name="Tools", exact=True).wait_for()
    await add_mcp_server(page, mcp_server)
    await add_forecast_tool(page, workbench)
    await invoke_forecast(page)
    await add_joke_tool(page, workbench)
    await chat(page, workbench)
    await read_only(page, workbench)
    # the MCP token went in once, as a write: nothing the page showed or received holds it
    assert MCP_TOKEN not in await page.content()
    assert MCP_TOKEN not in await received_text(page)
