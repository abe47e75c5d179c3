"""The Workbench's Tools page: `tool` items created and edited in a real browser against a real
`toolmesh serve` (and a real MCP server for the import), with what got stored read back
through the API and the agent's own view of each tool in the list."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from playwright.async_api import expect

from tests.mcp.servers import ServerProcess
from tests.processes import run_toolmesh
from tests.workbench.conftest import BROWSER_LOOP, MCP_TOKEN, Workbench, open_page

pytestmark = BROWSER_LOOP

if TYPE_CHECKING:
    from playwright.async_api import Locator, Page

HOSTILE = "<img src=x onerror=alert(1)>"


async def stored(workbench: Workbench, type: str) -> dict[str, Any]:
    """Every item of ``type`` as the config service answers getvalues: {key: value}."""
    body = await workbench.config({"operation": "getvalues", "type": type})
    return {v["key"]: json.loads(v["value"]) for v in body.get("values") or []}


async def put(workbench: Workbench, type: str, key: str, value: dict[str, Any]) -> None:
    await workbench.config({"operation": "put", "values": [
        {"type": type, "key": key, "value": json.dumps(value)}]})


async def open_tools(page: Page, workbench: Workbench, token: str | None = None) -> None:
    await open_page(page, workbench, "Tools", token=token)


def row_of(page: Page, key: str) -> Locator:
    return page.get_by_role("table", name="Tools").get_by_role("row").filter(
        has=page.get_by_role("link", name=key, exact=True))


async def test_a_prompt_tool_with_two_arguments_is_created_and_offered(
        page: Page, workbench: Workbench) -> None:
    await open_tools(page, workbench)
    # how the agent calls tools, and why (the workbench's serve is told: react)
    await expect(page.locator("[data-tool-calling]")).to_have_text(
        "Tool calling: react (agent: set on the agent (--tool-calling react))", timeout=5000)
    await page.get_by_role("button", name="New tool").click()
    await page.get_by_label("Key").fill("unit-facts")
    await page.get_by_label("Type", exact=True).select_option("prompt")
    await page.get_by_label("Name", exact=True).fill("unit_facts")
    await page.get_by_label("Description", exact=True).fill("Facts about units")
    # the shipped templates are offered although none is stored
    await page.get_by_label("Template").select_option("question")

    await page.get_by_role("button", name="Add argument").click()
    await page.get_by_label("Name of argument 1").fill("count")
    await page.get_by_label("Type of argument 1").select_option("integer")
    await page.get_by_label("Description of argument 1").fill("How many facts")
    await page.get_by_label("Argument 1 is required").check()
    await page.get_by_role("button", name="Add argument").click()
    await page.get_by_label("Name of argument 2").fill("system")
    await page.get_by_label("Allowed values of argument 2").fill("metric, imperial")
    # a row added and left empty is not an argument
    await page.get_by_role("button", name="Add argument").click()
    # reordering: the second goes first, then back
    await page.get_by_role("button", name="Move argument 2 up").click()
    await expect(page.get_by_label("Name of argument 1")).to_have_value("system")
    await page.get_by_role("button", name="Move argument 1 down").click()
    await expect(page.get_by_label("Name of argument 1")).to_have_value("count")
    await page.get_by_role("button", name="Create").click()
    await expect(page.get_by_role("status").filter(has_text="Saved tool")).to_contain_text("unit-facts")

    tool = (await stored(workbench, "tool"))["unit-facts"]
    assert tool == {
        "type": "prompt", "name": "unit_facts", "description": "Facts about units",
        "template": "question",
        "arguments": [
            {"name": "count", "type": "integer", "description": "How many facts", "required": True},
            {"name": "system", "type": "string", "description": "", "enum": ["metric", "imperial"]},
        ]}, tool
    row = row_of(page, "unit-facts")
    await expect(row).to_contain_text("unit_facts")
    await expect(row).to_contain_text("prompt")
    await expect(row.locator(".badge.ok")).to_have_text("offered")
    # the saved arguments come back into the form as they were written
    await expect(page.get_by_label("Allowed values of argument 2")).to_have_value("metric, imperial")
    await expect(page.get_by_label("Argument 1 is required")).to_be_checked()


async def test_an_mcp_tool_imports_its_arguments_from_the_server(
        page: Page, workbench: Workbench,
        mcp_server: ServerProcess) -> None:
    await put(workbench, "mcp", "weather", {
        "url": mcp_server.url, "remote-name": "weather", "auth-token": MCP_TOKEN})
    await open_tools(page, workbench)
    await page.get_by_role("button", name="New tool").click()
    await page.get_by_label("Key").fill("forecast")
    await page.get_by_label("Type", exact=True).select_option("mcp-tool")
    await page.get_by_label("MCP server").select_option("weather")
    await page.get_by_role("button", name="Import from the server").click()
    await expect(page.get_by_role("status").filter(has_text="Imported")).to_contain_text("2 arguments")
    await expect(page.get_by_label("Name of argument 1")).to_have_value("city")
    await expect(page.get_by_label("Type of argument 1")).to_have_value("string")
    await expect(page.get_by_label("Argument 1 is required")).to_be_checked()
    await expect(page.get_by_label("Name of argument 2")).to_have_value("days")
    await expect(page.get_by_label("Type of argument 2")).to_have_value("integer")
    await expect(page.get_by_label("Argument 2 is required")).not_to_be_checked()
    # the empty name and description were filled from the server's
    await expect(page.get_by_label("Name", exact=True)).to_have_value("weather")
    await expect(page.get_by_label("Description", exact=True)).to_have_value(
        "The weather forecast for a city.")

    # importing again over rows asks first; keeping them keeps them
    await page.get_by_label("Description of argument 1").fill("The city")
    await page.get_by_role("button", name="Import from the server").click()
    await expect(page.get_by_role("alert").filter(has_text="Replace the 2 arguments")).to_be_visible()
    await page.get_by_role("button", name="Keep mine").click()
    await expect(page.get_by_text("Replace the 2 arguments")).to_be_hidden()
    await expect(page.get_by_label("Description of argument 1")).to_have_value("The city")

    await page.get_by_role("button", name="Create").click()
    await expect(page.get_by_role("status").filter(has_text="Saved tool")).to_be_visible()
    tool = (await stored(workbench, "tool"))["forecast"]
    assert tool["type"] == "mcp-tool" and tool["mcp-tool"] == "weather", tool
    assert tool["arguments"] == [
        {"name": "city", "type": "string", "description": "The city", "required": True},
        {"name": "days", "type": "integer", "description": "", "default": 1},
    ], tool
    await expect(row_of(page, "forecast").locator(".badge.ok")).to_have_text("offered")
    assert MCP_TOKEN not in await page.content()


async def test_the_config_services_refusal_shows_beside_the_argument(
        page: Page, workbench: Workbench) -> None:
    await open_tools(page, workbench)
    await page.get_by_role("button", name="New tool").click()
    await page.get_by_label("Key").fill("bad-one")
    await page.get_by_label("Type", exact=True).select_option("prompt")
    await page.get_by_label("Name", exact=True).fill("bad_one")
    await page.get_by_label("Description", exact=True).fill("Refused")
    await page.get_by_label("Template").select_option("question")
    await page.get_by_role("button", name="Add argument").click()
    await page.get_by_label("Name of argument 1").fill("n")
    await page.get_by_label("Type of argument 1").select_option("integer")
    # "two" is no integer: the form passes it on, the config service refuses it
    await page.get_by_label("Allowed values of argument 1").fill("1, two")
    await page.get_by_role("button", name="Create").click()

    values = page.get_by_label("Allowed values of argument 1")
    await expect(values).to_have_attribute("aria-invalid", "true")
    beside = values.locator("xpath=..").get_by_role("alert")
    await expect(beside).to_contain_text("'two' does not fit the argument")
    await expect(page.get_by_role("status").filter(has_text="Not saved")).to_be_visible()

    # fixed; now a second argument without a name: the error goes to row 2's name
    await values.fill("1, 2")
    await page.get_by_role("button", name="Add argument").click()
    await page.get_by_label("Description of argument 2").fill("nameless")
    await page.get_by_role("button", name="Create").click()
    name2 = page.get_by_label("Name of argument 2")
    await expect(name2).to_have_attribute("aria-invalid", "true")
    await expect(name2.locator("xpath=..").get_by_role("alert")).to_contain_text("is required")
    await expect(values).not_to_have_attribute("aria-invalid", "true")
    assert "bad-one" not in await stored(workbench, "tool")


async def test_hostile_text_shows_as_text_and_unknown_fields_survive_a_save(
        page: Page, workbench: Workbench) -> None:
    await put(workbench, "tool", "odd", {
        "type": "text-completion", "name": HOSTILE, "description": HOSTILE,
        "x-owner": {"team": "blue"}, "group": ["a", "b"]})
    await open_tools(page, workbench)
    row = row_of(page, "odd")
    await expect(row).to_contain_text(HOSTILE)
    await expect(row).to_contain_text("a, b")
    await row.get_by_role("link", name="odd").click()
    await expect(page.get_by_label("Description", exact=True)).to_have_value(HOSTILE)
    assert await page.locator("img").count() == 0
    await page.get_by_label("State after use").fill("done")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status").filter(has_text="Saved tool")).to_be_visible()
    assert (await stored(workbench, "tool"))["odd"] == {
        "type": "text-completion", "name": HOSTILE, "description": HOSTILE,
        "x-owner": {"team": "blue"}, "group": ["a", "b"], "state": "done"}
    assert await page.locator("img").count() == 0

    await page.get_by_role("button", name="Delete").click()
    await page.get_by_role("button", name="Yes, delete odd").click()
    await expect(page.get_by_role("status").filter(has_text="Deleted tool")).to_be_visible()
    await expect(row_of(page, "odd")).to_have_count(0)
    assert "odd" not in await stored(workbench, "tool")


async def test_a_read_only_token_sees_the_tools_but_cannot_change_them(
        page: Page, workbench: Workbench) -> None:
    await put(workbench, "tool", "joke", {
        "type": "prompt", "name": "joke", "description": "Tell a joke", "template": "question",
        "arguments": [{"name": "topic", "type": "string", "description": "About what"}]})
    # config:read only: not even the agent's view of the tools
    code, out, err = await run_toolmesh("token", "create", "-w", "default", "-c", "config:read",
                                        "--name", "ro", "-u", workbench.url, "-t", workbench.token)
    assert code == 0, err
    await open_tools(page, workbench, out.strip())
    await expect(page.locator(".read-only-note")).to_contain_text("can only read")
    await expect(page.get_by_role("button", name="New tool")).to_have_count(0)
    row = row_of(page, "joke")
    await expect(row.locator(".badge.warn")).to_have_text("unknown")
    await expect(row).to_contain_text("lacks the agent capability")

    await row.get_by_role("link", name="joke").click()
    await page.get_by_role("heading", name="Tool joke").wait_for()
    await expect(page.get_by_label("Name", exact=True)).to_have_attribute("readonly", "")
    await expect(page.get_by_label("Type", exact=True)).to_be_disabled()
    await expect(page.get_by_label("Name of argument 1")).to_have_attribute("readonly", "")
    await expect(page.get_by_label("Type of argument 1")).to_be_disabled()
    for name in ("Save", "Delete", "Add argument", "Remove argument 1", "Import from the server"):
        await expect(page.get_by_role("button", name=name)).to_have_count(0)
