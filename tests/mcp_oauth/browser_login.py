"""The person at the authorization server, in a real headless Chromium (:mod:`tests.browser`):
sign in on oidc-provider's devInteractions page and consent, as a person would, until the page
is sent back to the client's ``redirect_uri``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from tests.mcp_oauth.browserless import LoginError, redirect_params

if TYPE_CHECKING:
    from playwright.async_api import Page, Request

try:
    from playwright.async_api import Error as PlaywrightError
except ImportError:  # tests.browser.chromium_missing() says why the browser tests skip
    PlaywrightError = RuntimeError  # type: ignore[assignment,misc]

__all__ = ["log_in_with_browser"]

#: sign-in, consent, and slack for a page the server shows twice
MAX_PAGES = 6


async def log_in_with_browser(page: Page, url: str, *, username: str, password: str = "secret",
                              timeout: float = 10) -> str:
    """Open the authorization ``url`` in ``page``, answer the sign-in form (as ``username``)
    and the consent form, whichever come, until the browser is sent to the client's
    ``redirect_uri``; the URL it was sent to (with ``code``, ``state`` and ``iss``, or
    ``error``).

    Nothing needs to listen at the redirect URI: the browser's request to it is what counts
    (Playwright cannot intercept a request reached by a redirect); if a callback server of the
    client does listen, the page shows its answer."""
    target = redirect_params(url).get("redirect_uri")
    if not target:
        raise ValueError(f"no redirect_uri in {url}")
    ms = timeout * 1000
    sent: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def on_request(request: Request) -> None:
        if (request.is_navigation_request() and request.url.startswith(target)
                and not sent.done()):
            sent.set_result(request.url)

    async def navigate(action: Callable[[], Awaitable[Any]]) -> None:
        # done when a new page is in, or the browser went to the client (which may not answer)
        try:
            async with page.expect_navigation(wait_until="commit", timeout=ms):
                await action()
        except PlaywrightError:
            if not sent.done():
                raise

    page.on("request", on_request)
    try:
        async with asyncio.timeout(timeout * 2):
            await navigate(lambda: page.goto(url, wait_until="commit", timeout=ms))
            for _ in range(MAX_PAGES):
                if sent.done():
                    return sent.result()
                await page.wait_for_load_state("domcontentloaded", timeout=ms)
                login = page.locator('form input[name="login"]')
                consent = page.locator('form:has(input[name="prompt"][value="consent"]) '
                                       'button[type="submit"]')
                if await login.count():
                    await login.fill(username)
                    await page.locator('form input[name="password"]').fill(password)
                    await navigate(page.locator('form button[type="submit"]').click)
                elif await consent.count():
                    await navigate(consent.click)
                else:
                    raise LoginError(f"neither sign-in nor consent at {page.url}: "
                                     f"{(await page.content())[:1000]}")
            if sent.done():
                return sent.result()
            raise LoginError(f"still at {page.url} after {MAX_PAGES} pages")
    finally:
        page.remove_listener("request", on_request)
