"""The MCP clients page: this gateway's /mcp URL and client configs to paste — streamable
HTTP with a bearer token, and the stdio bridge — that hold exactly what the client needs
and no secret; the copy buttons put them on the clipboard."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from playwright.async_api import expect

from tests.workbench.conftest import BROWSER_LOOP, Workbench, open_page

pytestmark = BROWSER_LOOP

if TYPE_CHECKING:
    from playwright.async_api import Page


async def test_the_url_and_the_configs_to_paste(page: Page, workbench: Workbench) -> None:
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await open_page(page, workbench, "MCP clients")
    url = workbench.url + "mcp"
    await expect(page.get_by_label("MCP URL", exact=True)).to_have_text(url)
    http = json.loads(await page.get_by_label("HTTP client config", exact=True).text_content() or "")
    assert http == {"mcpServers": {"toolmesh": {
        "type": "http", "url": url, "headers": {"Authorization": "Bearer YOUR_TOKEN"}}}}
    stdio = json.loads(await page.get_by_label("Stdio bridge config", exact=True).text_content() or "")
    assert stdio == {"mcpServers": {"toolmesh": {
        "command": "toolmesh", "args": ["mcp", "serve", "--stdio"],
        "env": {"TOOLMESH_URL": workbench.url, "TOOLMESH_TOKEN": "YOUR_TOKEN"}}}}
    await expect(page.get_by_label("Command that creates a token", exact=True)).to_have_text(
        "toolmesh token create -w default -c tools:invoke -c approve --name my-assistant")
    assert workbench.token not in await page.locator("main").inner_text()

    await page.get_by_role("button", name="Copy the HTTP client config").click()
    await expect(page.get_by_text("Copied.")).to_be_visible()
    assert json.loads(await page.evaluate("navigator.clipboard.readText()")) == http
