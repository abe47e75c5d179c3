"""The Workbench's shell: served by the gateway, signed in with a token, walled by its CSP."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.workbench.conftest import Workbench, sign_in

if TYPE_CHECKING:
    from playwright.async_api import Page


async def test_sign_in_with_the_token_shows_the_pages(page: Page, workbench: Workbench) -> None:
    await sign_in(page, workbench)
    nav = page.get_by_role("navigation", name="Workbench")
    for title in ("Tools", "MCP servers", "Tool services", "Prompts", "Agent", "Config"):
        await nav.get_by_role("link", name=title).wait_for()
    await page.get_by_role("heading", name="Tools", exact=True).wait_for()
