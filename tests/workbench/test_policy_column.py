"""The approval policy in the Workbench: a column and a form field on the Tools and MCP
servers pages (the items' ``approval``: always, never, or not set), an mcp-tool's server's
policy shown on its tool, and the MCP annotations that decide when nothing is set —
``destructiveHint`` asks, ``readOnlyHint`` does not — read from the real server."""

from __future__ import annotations

from typing import TYPE_CHECKING

from playwright.async_api import expect

from tests.mcp.servers import ServerProcess
from tests.workbench.conftest import BROWSER_LOOP, MCP_TOKEN, Workbench, open_page
from tests.workbench.test_tools_page import put, row_of, stored

pytestmark = BROWSER_LOOP

if TYPE_CHECKING:
    from playwright.async_api import Page


async def furnish(workbench: Workbench, mcp_server: ServerProcess) -> None:
    """Three servers (the same MCP server's destructive and read-only tools), one of them
    asking, and a tool item of each policy."""
    for key, remote, more in (("remove", "remove", {}), ("look", "look", {}),
                              ("careful", "remove", {"approval": "always"})):
        await put(workbench, "mcp", key, {"url": mcp_server.url, "auth-token": MCP_TOKEN,
                                          "remote-name": remote, **more})
    await put(workbench, "tool", "remover", {"type": "mcp-tool", "name": "remover",
                                             "mcp-tool": "remove", "description": "removes"})
    await put(workbench, "tool", "careful-remover", {
        "type": "mcp-tool", "name": "careful_remover", "mcp-tool": "careful",
        "description": "removes, asking"})
    await put(workbench, "tool", "looker", {"type": "mcp-tool", "name": "looker",
                                            "mcp-tool": "look", "description": "looks"})
    await put(workbench, "tool", "asker", {"type": "text-completion", "name": "asker",
                                           "description": "asks", "approval": "always"})
    await put(workbench, "tool", "free", {"type": "text-completion", "name": "free",
                                          "description": "free", "approval": "never"})


async def approval_of(page: Page, key: str) -> str:
    return (await row_of(page, key).locator("[data-approval]").text_content() or "").strip()


async def test_the_tools_list_shows_each_policy_and_where_it_comes_from(
        page: Page, workbench: Workbench, mcp_server: ServerProcess) -> None:
    await furnish(workbench, mcp_server)
    await open_page(page, workbench, "Tools")
    header = page.get_by_role("table", name="Tools").get_by_role("columnheader", name="Approval")
    await expect(header).to_be_visible()
    await expect(row_of(page, "asker").locator("[data-approval]")).to_have_text("asks")
    assert await approval_of(page, "free") == "never asks"
    assert await approval_of(page, "careful-remover") == "asks (server careful)"
    assert await approval_of(page, "remover") == "default (or the tool's hints)"
    assert await approval_of(page, "looker") == "default (or the tool's hints)"


async def test_the_tool_form_sets_and_clears_the_policy_and_reads_the_servers_hints(
        page: Page, workbench: Workbench, mcp_server: ServerProcess) -> None:
    await furnish(workbench, mcp_server)
    await open_page(page, workbench, "Tools")
    await page.get_by_role("link", name="looker", exact=True).click()
    policy = page.get_by_label("Approval")
    await expect(policy).to_have_value("")
    # the server's annotations: "look" is read-only, so with nothing set it does not ask
    await page.get_by_role("button", name="Ask the server for its hints").click()
    await expect(page.locator(".hints").get_by_role("status")).to_contain_text(
        "read-only (readOnlyHint): with no policy set, calls do not wait.")
    await policy.select_option("always")
    await page.get_by_role("button", name="Save").click()
    await expect(row_of(page, "looker").locator("[data-approval]")).to_have_text("asks")
    assert (await stored(workbench, "tool"))["looker"]["approval"] == "always"

    await page.get_by_label("Approval").select_option("")
    await page.get_by_role("button", name="Save").click()
    await expect(row_of(page, "looker").locator("[data-approval]")).to_have_text(
        "default (or the tool's hints)")
    assert "approval" not in (await stored(workbench, "tool"))["looker"]

    # the destructive tool's hint, through its server item
    await page.get_by_role("link", name="remover", exact=True).click()
    await page.get_by_role("button", name="Ask the server for its hints").click()
    await expect(page.locator(".hints").get_by_role("status")).to_contain_text(
        "destructive (destructiveHint): with no policy set, each call waits for a person.")


async def test_the_mcp_servers_page_shows_and_edits_a_servers_policy_and_its_tools_hints(
        page: Page, workbench: Workbench, mcp_server: ServerProcess) -> None:
    await furnish(workbench, mcp_server)
    await open_page(page, workbench, "MCP servers")
    table = page.get_by_role("region", name="Configured MCP servers").get_by_role("table")
    await expect(table.get_by_role("columnheader", name="Approval")).to_be_visible()
    careful = table.get_by_role("row").filter(has=page.get_by_role("link", name="careful"))
    await expect(careful.locator("[data-approval]")).to_have_text("asks")
    look = table.get_by_role("row").filter(has=page.get_by_role("link", name="look", exact=True))
    await expect(look.locator("[data-approval]")).to_have_text("default (or the tool's hints)")

    await page.get_by_role("link", name="look", exact=True).click()
    await page.get_by_label("Approval").select_option("never")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status").filter(has_text="Saved")).to_be_visible()
    assert (await stored(workbench, "mcp"))["look"]["approval"] == "never"
    await expect(look.locator("[data-approval]")).to_have_text("never asks")

    # the server's tools, each with the hint its annotations give
    await page.get_by_role("button", name="Test connection").click()
    tools = page.get_by_role("table", name="Tools on the server")
    await expect(tools.get_by_role("columnheader", name="Approval hint")).to_be_visible()
    row = tools.get_by_role("row")
    await expect(row.filter(has_text="Remove a file")).to_contain_text("destructive: asks")
    await expect(row.filter(has_text="Look at a file")).to_contain_text("read-only: does not ask")
    await expect(row.filter(has_text="What this server has seen")).to_contain_text("no hint")


async def test_a_server_whose_policy_asks_is_still_tested_without_asking(
        page: Page, workbench: Workbench, mcp_server: ServerProcess) -> None:
    """Listing a server's tools runs none of them: nobody is asked, even when the item's
    policy is "always" (only a call of the tool waits for a person)."""
    await furnish(workbench, mcp_server)
    await open_page(page, workbench, "MCP servers")
    await page.get_by_role("link", name="careful", exact=True).click()
    await expect(page.get_by_label("Approval")).to_have_value("always")
    await page.get_by_role("button", name="Test connection").click()
    await expect(page.get_by_role("status").filter(has_text="Connected")).to_contain_text(
        "Connected: the server lists")
