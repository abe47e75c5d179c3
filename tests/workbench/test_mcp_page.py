"""The Workbench's MCP servers page: `mcp` items created, tested, edited and deleted in a real
browser against a real `toolmesh serve` and a real MCP server that requires a bearer token —
which the page must keep without ever showing it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from playwright.async_api import expect

from tests.mcp.servers import ServerProcess
from tests.processes import run_toolmesh
from tests.servers import stored_raw
from tests.workbench.conftest import BROWSER_LOOP, MCP_TOKEN, Workbench, open_page, received_text
from toolmesh.secrets.crypto import is_sealed

pytestmark = BROWSER_LOOP

if TYPE_CHECKING:
    from playwright.async_api import Page

HOSTILE = "<img src=x onerror=alert(1)>"


async def invoke(workbench: Workbench, key: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return await workbench.post("api/v1/flow/default/service/mcp-tool",
                                {"name": key, "parameters": parameters})


def assert_token_stored(workbench: Workbench, key: str) -> dict[str, Any]:
    raw = stored_raw(workbench.served, f"mcp/{key}")
    token = raw.get("auth-token")
    # sealed at rest when the deployment has a secret key; then the calls prove it works
    assert token == MCP_TOKEN or (isinstance(token, str) and is_sealed(token)), raw
    return raw


async def test_a_server_is_created_tested_and_edited_and_its_token_never_shown(
        page: Page, workbench: Workbench, mcp_server: ServerProcess) -> None:
    await open_page(page, workbench, "MCP servers")
    await page.get_by_role("button", name="New MCP server").click()
    await page.get_by_label("Key").fill("forecast")
    await page.get_by_label("URL").fill(mcp_server.url)
    await page.get_by_label("Remote tool name").fill("weather")
    await page.get_by_label("Bearer token").fill(MCP_TOKEN)
    await page.get_by_role("button", name="Create").click()
    await expect(page.get_by_role("status").filter(has_text="Saved")).to_have_text(
        'Saved MCP server "forecast".')

    raw = assert_token_stored(workbench, "forecast")
    assert (raw["url"], raw["remote-name"], raw["transport"]) == \
        (mcp_server.url, "weather", "streamable-http")
    assert (await workbench.stored("mcp", "forecast"))["auth-token"] == "***"
    # the list says a token is stored; the form's token input is empty, with the hint
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name="forecast"))
    await expect(row).to_contain_text("stored")
    await expect(page.get_by_label("Bearer token")).to_have_value("")
    await expect(page.get_by_text("A token is stored; leave empty to keep it.")).to_be_visible()

    await page.get_by_role("button", name="Test connection").click()
    tools = page.get_by_role("table", name="Tools on the server")
    for name in ("add", "echo", "weather"):
        await expect(tools.get_by_text(name, exact=True)).to_be_visible()
    weather = tools.get_by_role("row").filter(has_text="The weather forecast for a city.")
    await expect(weather).to_contain_text("this item's tool")
    await expect(weather).to_contain_text("city: string (required)")
    await expect(weather).to_contain_text("days: integer (default 1)")
    await expect(page.get_by_text("Connected: the server lists")).to_be_visible()

    # a new URL on the same server, the token left empty: the token is kept (the server
    # refuses every call without it)
    edited = mcp_server.url + "?edited=1"
    await page.get_by_label("URL").fill(edited)
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status").filter(has_text="Saved")).to_have_text(
        'Saved MCP server "forecast".')
    raw = assert_token_stored(workbench, "forecast")
    assert raw["url"] == edited
    answer = await invoke(workbench, "forecast", {"city": "Oslo", "days": 2})
    assert answer.get("text") == "Oslo: sunny for 2 days", answer

    # removing the token: stored without one, and the server then turns the page away
    await page.get_by_label("Remove the stored token").check()
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status").filter(has_text="Saved")).to_have_text(
        'Saved MCP server "forecast".')
    assert "auth-token" not in stored_raw(workbench.served, "mcp/forecast")
    await expect(page.get_by_text("A token is stored")).to_have_count(0)
    await page.get_by_role("button", name="Test connection").click()
    await expect(page.get_by_text("Connection failed:")).to_be_visible()

    assert MCP_TOKEN not in await received_text(page)
    assert MCP_TOKEN not in await page.content()


async def test_errors_show_beside_their_field_and_nothing_is_stored(
        page: Page, workbench: Workbench) -> None:
    await open_page(page, workbench, "MCP servers")
    await page.get_by_role("button", name="New MCP server").click()
    await page.get_by_role("button", name="Create").click()
    await expect(page.get_by_text("Give the server a key.").first).to_be_visible()

    await page.get_by_label("Key").fill("ftp-server")
    await page.get_by_label("URL").fill("ftp://files.example.com/mcp")
    await page.get_by_label("Remote tool name").fill(HOSTILE)
    await page.get_by_role("button", name="Create").click()
    url_field = page.locator("[data-field='url']")
    await expect(url_field.get_by_role("alert")).to_contain_text(
        "must be an http:// or https:// URL")
    await expect(page.get_by_label("URL")).to_have_attribute("aria-invalid", "true")
    assert await workbench.stored("mcp", "ftp-server") is None

    # a stdio server: the gateway runs no command it was not told to allow; its error shows
    await page.get_by_label("Transport").select_option("stdio")
    await expect(page.get_by_label("URL")).to_be_hidden()
    await page.get_by_label("Command").fill("python3")
    await page.get_by_label("Arguments").fill("-m\nmcp_server_time")
    await page.get_by_role("button", name="Create").click()
    await expect(page.get_by_role("status").filter(has_text="Not saved")).to_contain_text("python3")
    assert await workbench.stored("mcp", "ftp-server") is None

    # a hostile remote name, stored, reads as text everywhere
    await page.get_by_label("Transport").select_option("streamable-http")
    await page.get_by_label("URL").fill("http://127.0.0.1:9/mcp")
    await page.get_by_role("button", name="Create").click()
    await expect(page.get_by_role("status").filter(has_text="Saved")).to_have_text(
        'Saved MCP server "ftp-server".')
    await expect(page.get_by_role("cell", name=HOSTILE)).to_be_visible()
    assert await page.locator("img").count() == 0
    # an unreachable server: the test says so
    await page.get_by_role("button", name="Test connection").click()
    await expect(page.get_by_text("Connection failed: cannot connect to MCP server")).to_be_visible()

    # deleting asks first, then the item is gone
    await page.get_by_role("button", name="Delete").click()
    await page.get_by_role("button", name="Yes, delete ftp-server").click()
    await expect(page.get_by_role("status").filter(has_text="Deleted")).to_have_text(
        'Deleted MCP server "ftp-server".')
    assert await workbench.stored("mcp", "ftp-server") is None
    await expect(page.get_by_role("link", name="ftp-server")).to_have_count(0)


async def test_a_read_only_token_sees_the_settings_and_cannot_change_them(
        page: Page, workbench: Workbench, mcp_server: ServerProcess) -> None:
    put = await workbench.post("api/v1/config", {"operation": "put", "values": [
        {"type": "mcp", "key": "adder", "value": json.dumps(
            {"url": mcp_server.url, "remote-name": "add", "auth-token": MCP_TOKEN})}]})
    assert "error" not in put, put
    code, out, err = await run_toolmesh("token", "create", "-w", "default", "-c", "config:read",
                                        "-c", "agent", "--name", "ro", "-u", workbench.url,
                                        "-t", workbench.token)
    assert code == 0, err
    await open_page(page, workbench, "MCP servers", token=out.strip())
    await expect(page.locator(".read-only-note")).to_contain_text("can only read")
    await expect(page.get_by_role("button", name="New MCP server")).to_have_count(0)
    await page.get_by_role("link", name="adder").click()
    await page.get_by_role("heading", name="MCP server adder").wait_for()
    await expect(page.get_by_label("URL")).to_have_value(mcp_server.url)
    await expect(page.get_by_label("URL")).not_to_be_editable()
    await expect(page.get_by_label("Bearer token")).to_have_value("")
    await expect(page.get_by_label("Transport")).to_be_disabled()
    for name in ("Save", "Delete", "Test connection"):
        await expect(page.get_by_role("button", name=name)).to_have_count(0)
    await expect(page.get_by_text("needs the tools:invoke capability")).to_be_visible()
    assert MCP_TOKEN not in await received_text(page)
