"""The Workbench's Tool services page: descriptors and the agent's live view of the joke
service `toolmesh serve` runs, a descriptor stored from the page, and test invocations of the
joke service and of an MCP tool through the WebSocket — in a real browser."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from playwright.async_api import expect

from tests.mcp.servers import ServerProcess
from tests.processes import run_toolmesh
from tests.workbench.conftest import BROWSER_LOOP, MCP_TOKEN, Workbench, open_page, received_text
from toolmesh.tools.services.joke import tell_joke

pytestmark = BROWSER_LOOP

if TYPE_CHECKING:
    from playwright.async_api import Page

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "joke"
HOSTILE = "<img src=x onerror=alert(1)>"


async def open_services(page: Page, workbench: Workbench, token: str | None = None) -> None:
    await open_page(page, workbench, "Tool services", token=token)


def joke_row(page: Page) -> Any:
    return page.get_by_role("table", name="Services").get_by_role("row").filter(
        has_text="joke-service")


async def test_the_announced_joke_service_is_listed_live_and_configured_from_the_page(
        page: Page, workbench: Workbench) -> None:
    await open_services(page, workbench)
    row = joke_row(page)
    await expect(row).to_contain_text("announced")
    await expect(row).to_contain_text("1 live instance")
    await expect(row).to_contain_text("tell-joke")
    await expect(row).to_contain_text("offered")
    await expect(row).not_to_contain_text("configured")
    assert await workbench.stored("tool-service", "joke-service") is None  # announced only

    # store its descriptor from what it announced: the queues come prefilled
    await row.get_by_role("link", name="Configure joke-service").click()
    await page.get_by_role("heading", name="Configure joke-service").wait_for()
    await expect(page.get_by_label("Request queue")).to_have_value(
        "non-persistent://tg/request/joke")
    await expect(page.get_by_label("Response queue")).to_have_value(
        "non-persistent://tg/response/joke")
    # a bad queue: the config service's error beside its field, nothing stored
    await page.get_by_label("Response queue").fill("notify:tg:joke")
    await page.get_by_role("button", name="Add config param").click()
    await page.get_by_label("Config param 1 name").fill("style")
    await page.get_by_role("button", name="Create").click()
    response = page.locator("[data-field='response-queue']")
    await expect(response.get_by_role("alert")).to_contain_text("notify (broadcast) queue")
    assert await workbench.stored("tool-service", "joke-service") is None

    await page.get_by_label("Response queue").fill("non-persistent://tg/response/joke")
    await page.get_by_role("button", name="Create").click()
    await expect(page.get_by_role("status").filter(has_text="Saved")).to_have_text(
        'Saved the descriptor of "joke-service".')
    assert await workbench.stored("tool-service", "joke-service") == \
        json.loads((EXAMPLES / "joke-service.json").read_text())
    await expect(joke_row(page)).to_contain_text("configured")
    await expect(joke_row(page)).to_contain_text("1 live instance")

    # a hostile config param name is stored and shown as text
    await page.get_by_role("button", name="Add config param").click()
    await page.get_by_label("Config param 2 name").fill(HOSTILE)
    await page.get_by_label("Config param 2 required").check()
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status").filter(has_text="Saved")).to_be_visible()
    saved = await workbench.stored("tool-service", "joke-service")
    assert saved["config-params"][1] == {"name": HOSTILE, "required": True}
    await expect(page.get_by_label("Config param 2 name")).to_have_value(HOSTILE)
    await page.get_by_role("button", name="Try joke-service").click()
    await expect(page.get_by_text(f"{HOSTILE} (required)")).to_be_visible()
    assert await page.locator("img").count() == 0

    await page.get_by_role("button", name="Delete").click()
    await page.get_by_role("button", name="Yes, delete joke-service").click()
    await expect(page.get_by_role("status").filter(has_text="Deleted")).to_have_text(
        'Deleted the descriptor of "joke-service".')
    assert await workbench.stored("tool-service", "joke-service") is None
    await expect(joke_row(page)).not_to_contain_text("configured")


async def test_invoking_the_joke_service_and_an_mcp_tool(
        page: Page, workbench: Workbench, mcp_server: ServerProcess) -> None:
    put = await workbench.post("api/v1/config", {"operation": "put", "values": [
        {"type": "mcp", "key": "weather", "value": json.dumps(
            {"url": mcp_server.url, "auth-token": MCP_TOKEN})}]})
    assert "error" not in put, put
    sent: list[str] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: sent.append(str(payload))))
    await open_services(page, workbench)

    await joke_row(page).get_by_role("button", name="Try joke-service").click()
    await page.get_by_label("Config (JSON object)").fill('{"style": "dad-joke"}')
    # bad JSON: the problem beside the field, nothing sent
    await page.get_by_label("Arguments (JSON object)").fill('{"topic": programming}')
    await page.get_by_role("button", name="Invoke").click()
    arguments = page.locator("[data-field='arguments']")
    await expect(arguments.get_by_role("alert")).to_contain_text("Not valid JSON")
    await page.get_by_label("Arguments (JSON object)").fill('["programming"]')
    await page.get_by_role("button", name="Invoke").click()
    await expect(arguments.get_by_role("alert")).to_contain_text("Must be a JSON object")
    await page.wait_for_timeout(300)
    # (the socket carries the sign-in and the watch of what waits for a person too)
    assert not [frame for frame in sent if '"tool-service"' in frame], sent

    await page.get_by_label("Arguments (JSON object)").fill('{"topic": "programming"}')
    await page.get_by_role("button", name="Invoke").click()
    joke = tell_joke("trustgraph", {"style": "dad-joke"}, {"topic": "programming"})
    await expect(page.get_by_role("log", name="Result")).to_have_text(joke)
    await expect(arguments.get_by_role("alert")).to_be_hidden()
    assert any('"tool-service"' in frame for frame in sent)

    # an MCP tool: arguments from its schema, then the answer
    await page.get_by_label("Invoke", exact=True).select_option("mcp")
    await page.get_by_label("MCP tool").select_option("weather")
    await page.get_by_role("button", name="Fill from the tool's schema").click()
    await expect(page.get_by_label("Arguments (JSON object)")).to_have_value(
        json.dumps({"city": "", "days": 1}, indent=2))
    await page.get_by_label("Arguments (JSON object)").fill('{"city": "Oslo", "days": 3}')
    await page.get_by_role("button", name="Invoke").click()
    await expect(page.get_by_role("log", name="Result")).to_have_text("Oslo: sunny for 3 days")
    await expect(page.get_by_role("status").filter(has_text="Done.")).to_be_visible()
    assert MCP_TOKEN not in await received_text(page)


async def test_a_token_that_may_not_invoke_or_write_sees_the_services_only(
        page: Page, workbench: Workbench) -> None:
    code, out, err = await run_toolmesh("token", "create", "-w", "default", "-c", "config:read",
                                        "-c", "agent", "--name", "ro", "-u", workbench.url,
                                        "-t", workbench.token)
    assert code == 0, err
    await open_services(page, workbench, out.strip())
    await expect(page.locator(".read-only-note")).to_contain_text("can only read")
    await expect(joke_row(page)).to_contain_text("1 live instance")
    await expect(page.get_by_text("needs the tools:invoke capability")).to_be_visible()
    for name in ("New descriptor", "Invoke", "Try joke-service"):
        await expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
