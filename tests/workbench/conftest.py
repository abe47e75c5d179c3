"""The Workbench in a real headless Chromium against a real ``toolmesh serve`` with a token.

Fixtures:

* ``workbench`` — ``toolmesh serve`` (its own config store in ``tmp_path``) with the gateway
  token :data:`TOKEN`, the LLM an :class:`OpenAITestServer` (``workbench.llm``: queue answers
  with ``add``, read what the agent sent in ``requests``), the joke service among its parts;
* ``mcp_server`` — an MCP server written with the ``mcp`` SDK (``tests/mcp/servers.py``),
  over streamable HTTP with the bearer token :data:`MCP_TOKEN`;
* ``page`` — a fresh browser page (1280×800). Every response the page receives is kept in
  ``page.responses`` (URL and body text) and every console error (a script error, a CSP
  violation, a failed request the browser reports) in ``page.problems``; a test fails at
  teardown if the page had any.

:func:`sign_in` logs a page in with a token, as a user would.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest
import pytest_asyncio

from tests.browser import chromium, chromium_missing
from tests.gateway.conftest import guarded, http  # noqa: F401 - the gateway's, here too
from tests.llm.openai_server import OpenAITestServer
from tests.mcp.servers import ServerProcess, running_server
from tests.servers import Served, toolmesh_serve

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page, Response

#: the gateway's own token (every capability, every workspace)
TOKEN = "wb-gateway-s3cret"
#: the bearer token the MCP server requires: the Workbench must never show it
MCP_TOKEN = "mcp-bearer-XYZZY-4417"
#: how long one UI step may take (milliseconds)
STEP_MS = 15_000


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    missing = chromium_missing()
    if missing is None:
        return  # the browser tests run (this hook sees every item of the session)
    for item in items:
        if {"page", "browser"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.skip(reason=missing))


@dataclass
class Workbench:
    """A served toolmesh with its Workbench."""

    served: Served
    llm: OpenAITestServer
    token: str = TOKEN

    @property
    def url(self) -> str:
        """The gateway's root URL (``http://127.0.0.1:PORT/``)."""
        return self.served.url

    @property
    def page_url(self) -> str:
        return self.served.url + "workbench/"

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """``POST`` ``body`` to ``path`` of the gateway with its own token; the JSON answer."""
        async with aiohttp.ClientSession() as session, \
                session.post(self.url + path, json=body,
                          headers={"Authorization": f"Bearer {self.token}"}) as r:
            return await r.json()

    async def config(self, body: dict[str, Any]) -> dict[str, Any]:
        """A config request; its answer, which must not be an error."""
        answer = await self.post("api/v1/config", body)
        assert not answer.get("error"), answer
        return answer

    async def stored(self, type: str, key: str) -> Any:
        """The value of config item ``type/key`` as the API reads it (secrets masked),
        parsed; ``None`` if there is none."""
        answer = await self.config({"operation": "get", "keys": [{"type": type, "key": key}]})
        values = answer.get("values") or [{}]
        value = values[0].get("value")
        return json.loads(value) if value is not None else None


#: the browser tests' event loop: the worker's session loop, which the one Chromium of the worker
#: (:func:`browser`) belongs to. Each test still gets its own browser context (its own cookies,
#: storage and sockets) and its own served toolmesh; launching Chromium and Playwright's driver
#: once a worker instead of once a test saves about a CPU-second a test on the 2-core CI machine.
#: A module whose tests use ``page`` or ``browser`` says ``pytestmark = BROWSER_LOOP``.
BROWSER_LOOP = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(loop_scope="session")
async def workbench(tmp_path: Path) -> AsyncIterator[Workbench]:
    async with OpenAITestServer() as llm, \
            toolmesh_serve(tmp_path, "--llm", llm.base_url, "--model", "test-model",
                           "--tool-calling", "react",
                           extra_env={"TOOLMESH_GATEWAY_TOKEN": TOKEN}) as served:
        yield Workbench(served, llm)


@pytest_asyncio.fixture(loop_scope="session")
async def mcp_server() -> AsyncIterator[ServerProcess]:
    async with running_server("streamable-http", name="weather", token=MCP_TOKEN) as server:
        yield server


@dataclass
class Seen:
    """What a page received and what went wrong in it."""

    responses: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser() -> AsyncIterator[Browser]:
    """One headless Chromium for the worker's browser tests (see :data:`BROWSER_LOOP`)."""
    async with chromium() as b:
        yield b


@pytest_asyncio.fixture(loop_scope="session")
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(STEP_MS)
    p = await context.new_page()
    seen = Seen()

    async def keep(response: Response) -> None:
        with contextlib.suppress(Exception):  # redirects and aborted loads have no body
            seen.responses.append((response.url, await response.text()))

    def console(message: Any) -> None:
        # every error counts: a start without a token asks on the WebSocket, so even a
        # sign-in logs no 401
        if message.type == "error":
            seen.problems.append(f"console: {message.text}")

    p.on("response", keep)
    p.on("console", console)
    p.on("pageerror", lambda e: seen.problems.append(f"page error: {e}"))
    p.responses = seen.responses  # type: ignore[attr-defined]
    p.problems = seen.problems  # type: ignore[attr-defined]
    try:
        yield p
        assert not seen.problems, seen.problems
    finally:
        await context.close()


async def sign_in(page: Page, workbench: Workbench, token: str | None = None) -> None:
    """Open the Workbench and sign in with ``token`` (default: the gateway's)."""
    await page.goto(workbench.page_url)
    await page.get_by_label("Token").fill(token or workbench.token)
    await page.get_by_role("button", name="Sign in").click()
    await page.get_by_role("button", name="Sign out").wait_for()


async def open_page(page: Page, workbench: Workbench, link: str, heading: str | None = None,
                    token: str | None = None) -> None:
    """Sign in (with ``token``, default the gateway's) and go to the page the navigation's
    ``link`` names, once its ``heading`` (default: the link's text) shows."""
    await sign_in(page, workbench, token)
    await page.get_by_role("navigation", name="Workbench").get_by_role(
        "link", name=link, exact=True).click()
    await page.get_by_role("heading", name=heading or link, exact=True).wait_for()


async def received_text(page: Page) -> str:
    """Every response body the page has received so far, joined."""
    await page.wait_for_timeout(0)
    return "\n".join(body for _, body in page.responses)  # type: ignore[attr-defined]
