"""A whole sign-in from the Workbench: Connect opens a tab (through ``sign-in/go.html``) at a
real authorization server (oidc-provider, :mod:`tests.mcp_oauth.authserver`), the person signs
in and consents there, the gateway's callback page finishes the sign-in with the token the tab
carried from the Workbench, and the MCP servers page, back in focus, says connected; the MCP
server then answers as that person, and Disconnect forgets the grant."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio
from playwright.async_api import expect

from tests.mcp_oauth.authserver import AuthServer, missing_node
from tests.mcp_oauth.protected_server import ProtectedServer
from tests.mcp_oauth.stack import oauth_item
from tests.workbench.conftest import BROWSER_LOOP, Workbench, open_page

pytestmark = BROWSER_LOOP

if TYPE_CHECKING:
    from playwright.async_api import Page

if (_missing := missing_node()) is not None:
    pytest.skip(_missing, allow_module_level=True)

MCP_TOOL = "api/v1/flow/default/service/mcp-tool"


@pytest.fixture(scope="module")
def auth() -> Iterator[AuthServer]:
    with AuthServer() as server:
        yield server


@pytest_asyncio.fixture(loop_scope="session")
async def server(auth: AuthServer) -> AsyncIterator[ProtectedServer]:
    async with ProtectedServer(auth) as protected:
        yield protected


async def logins(workbench: Workbench) -> list[dict[str, object]]:
    answer = await workbench.post(MCP_TOOL, {"operation": "logins"})
    assert "error" not in answer, answer
    return json.loads(answer["object"])


async def test_connect_signs_in_at_the_authorization_server_and_disconnect_forgets_it(
        page: Page, workbench: Workbench, server: ProtectedServer) -> None:
    await workbench.config({"operation": "put", "values": [
        {"type": "mcp", "key": "notes", "value": json.dumps(oauth_item(server, "whoami"))}]})
    await open_page(page, workbench, "MCP servers")
    notes = page.get_by_role("row").filter(has=page.get_by_role("link", name="notes"))
    await expect(notes).to_contain_text("not connected")

    async with page.expect_popup() as popped:
        await notes.get_by_role("button", name="Connect", exact=True).click()
    tab = await popped.value
    await expect(notes.get_by_role("status")).to_contain_text(
        "Sign in at 127.0.0.1:")
    # the person at the authorization server: oidc-provider's sign-in and consent pages
    await tab.locator('form input[name="login"]').fill("wanda")
    await tab.locator('form input[name="password"]').fill("secret")
    await tab.locator('form button[type="submit"]').click()
    await tab.locator('form:has(input[name="prompt"][value="consent"]) '
                      'button[type="submit"]').click()
    # the gateway's callback page found the Workbench's token in this tab: it never asks
    await expect(tab.locator("#status")).to_contain_text("Signed in: you can now use notes")
    await expect(tab.locator("#token-form")).to_be_hidden()
    await tab.close()

    # the person comes back to the Workbench: the page reads the state again
    await page.bring_to_front()
    await page.evaluate("window.dispatchEvent(new Event('focus'))")
    await expect(notes.get_by_role("status")).to_have_text("Connected to notes.")
    await expect(notes).not_to_contain_text("not connected")
    answer = await workbench.post(MCP_TOOL, {"name": "notes", "parameters": {}})
    assert answer.get("text", "").startswith("wanda (scopes:"), answer

    await notes.get_by_role("button", name="Disconnect").click()
    await expect(notes.get_by_role("status")).to_have_text(
        "Disconnected: your sign-in for notes is forgotten.")
    await expect(notes).to_contain_text("not connected")
    await expect(notes.get_by_role("button", name="Disconnect")).to_be_hidden()
    assert await logins(workbench) == []
