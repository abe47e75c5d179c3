"""The Config page: the workspace's raw config (secrets masked), exported as a JSON file and
imported from one in a single put — all of it stored, or on one bad item nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.cli.test_agent_cli import EXAMPLES
from tests.gateway.test_scoped_tokens import create
from tests.workbench.conftest import BROWSER_LOOP, MCP_TOKEN, Workbench, received_text
from tests.workbench.test_prompts_page import open_page

pytestmark = BROWSER_LOOP

if TYPE_CHECKING:
    from playwright.async_api import Page

HOSTILE = "<img src=x onerror=alert(1)>"
TOOL = {"type": "tool-service", "name": "tell-joke", "description": HOSTILE,
        "service": "joke-service", "arguments": []}


async def workspace_config(workbench: Workbench) -> dict[str, dict[str, Any]]:
    """The workspace's config as the API answers it, values parsed (as the export has them)."""
    answer = await workbench.config({"operation": "config"})

    def parsed(text: str) -> Any:
        try:
            return json.loads(text)
        except ValueError:
            return text
    return {t: {k: parsed(v) for k, v in items.items()} for t, items in answer["config"].items()}


async def test_export_downloads_the_workspace_config_with_secrets_masked(
        page: Page, workbench: Workbench, tmp_path: Path) -> None:
    await workbench.config({"operation": "put", "values": [
        {"type": "tool", "key": "tell-joke", "value": json.dumps(TOOL)},
        {"type": "mcp", "key": "weather", "value": json.dumps(
            {"url": "http://127.0.0.1:9/mcp", "auth-token": MCP_TOKEN})}]})
    await open_page(page, workbench, "config")
    view = page.get_by_label("Workspace config")
    await view.filter(has_text=HOSTILE).wait_for()  # hostile text shown as text
    assert await page.locator("main img").count() == 0
    async with page.expect_download() as info:
        await page.get_by_role("button", name="Export").click()
    download = await info.value
    assert download.suggested_filename.startswith("toolmesh-config-default-")
    path = tmp_path / "export.json"
    await download.save_as(path)
    exported = json.loads(path.read_text())
    assert exported == await workspace_config(workbench)
    assert exported["mcp"]["weather"]["auth-token"] == "***"
    assert exported["tool"]["tell-joke"] == TOOL
    assert MCP_TOKEN not in path.read_text()
    assert MCP_TOKEN not in await received_text(page)
    assert MCP_TOKEN not in await page.content()
    await page.get_by_role("status").filter(has_text="Exported.").wait_for()


async def test_import_a_file_stores_its_items(page: Page, workbench: Workbench,
                                             tmp_path: Path) -> None:
    from playwright.async_api import expect  # here: collecting must not need Playwright

    file = tmp_path / "import.json"
    service = json.loads((EXAMPLES / "joke-service.json").read_text())
    file.write_text(json.dumps({"tool-service": {"joke-service": service},
                                "tool": {"tell-joke": TOOL}}))
    await open_page(page, workbench, "config")
    await page.get_by_label("Config file").set_input_files(file)
    await expect(page.get_by_label("Config to import (JSON)")).to_have_value(
        re.compile("joke-service"))
    await page.get_by_role("button", name="Import").click()
    await page.get_by_role("status").filter(has_text="Imported 2 items").wait_for()
    assert await workbench.stored("tool", "tell-joke") == TOOL
    assert await workbench.stored("tool-service", "joke-service") == service
    # the view shows what was imported
    await page.get_by_label("Workspace config").filter(has_text="joke-service").wait_for()


async def test_an_invalid_import_stores_nothing_and_shows_the_error(page: Page,
                                                                   workbench: Workbench) -> None:
    await open_page(page, workbench, "config")
    text = page.get_by_label("Config to import (JSON)")
    await text.fill('["not", "an", "object"]')
    await page.get_by_role("button", name="Import").click()
    await page.get_by_text("The import must be a JSON object of {type: {key: value}}.").wait_for()
    await text.fill(json.dumps({"tool": {"good": TOOL, "bad": {**TOOL, "type": "teleport"}}}))
    await page.get_by_role("button", name="Import").click()
    note = page.get_by_role("status").filter(has_text="Nothing imported")
    await note.wait_for()
    assert "invalid field 'type' of tool/bad" in await note.text_content()
    assert "unknown tool type 'teleport'" in await note.text_content()
    assert await workbench.stored("tool", "good") is None
    assert await workbench.stored("tool", "bad") is None


async def test_a_read_only_token_may_export_but_not_import(page: Page,
                                                          workbench: Workbench) -> None:
    token = await create(workbench.served, "-w", "default", "-c", "config:read", "-c", "agent",
                         "--name", "ro", token=workbench.token)
    await open_page(page, workbench, "config", token)
    await page.locator(".read-only-note").filter(has_text="export only").wait_for()
    await page.get_by_role("button", name="Export").wait_for()
    assert await page.get_by_role("button", name="Import").count() == 0
    assert await page.get_by_label("Config to import (JSON)").count() == 0
