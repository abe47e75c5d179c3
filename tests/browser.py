"""A real headless Chromium (driven by Playwright) and a web page served from a local origin.

The browser is Debian's Chromium: Playwright cannot download its own here, so it is always
launched with ``executable_path``. Each launch gets a fresh temporary profile.

Of Debian's Chromium builds, the tests take the headless shell (package
``chromium-headless-shell``, ``/usr/bin/chromium-headless-shell``) where it is installed, as
``.ci/run`` does: the same engine without the full browser's window and extension machinery,
which is what Playwright itself runs for headless tests. A full run's browsers used about 35
CPU-seconds with it and 85 with the full ``/usr/bin/chromium`` (the suite is CPU-bound).
Where only the full browser is installed, they take it, in its ``--headless=new`` mode.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from playwright.async_api import Browser

#: the headless shell if installed, else the full browser (see above)
HEADLESS_SHELL = "/usr/bin/chromium-headless-shell"
FULL_BROWSER = "/usr/bin/chromium"
CHROMIUM = HEADLESS_SHELL if shutil.which(HEADLESS_SHELL) else FULL_BROWSER
CHROMIUM_ARGS = (
    *(() if CHROMIUM == HEADLESS_SHELL else ("--headless=new",)),  # the shell is only headless
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or ``None`` if they can."""
    if shutil.which(CHROMIUM) is None:
        return (f"no Chromium at {HEADLESS_SHELL} or {FULL_BROWSER} "
                "(apt-get install chromium-headless-shell)")
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    return None


@asynccontextmanager
async def chromium(timeout: float = 20) -> AsyncIterator[Browser]:
    """A headless Chromium, closed on exit."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=list(CHROMIUM_ARGS), timeout=timeout * 1000)
        try:
            yield browser
        finally:
            await browser.close()


@dataclass(frozen=True)
class Site:
    """A page served on loopback: its origin (``http://127.0.0.1:PORT``) and port."""

    origin: str
    port: int

    @property
    def url(self) -> str:
        return self.origin + "/"


@asynccontextmanager
async def serve_page(html: str, host: str = "127.0.0.1") -> AsyncIterator[Site]:
    """Serve ``html`` at ``/`` on ``host`` and an ephemeral port."""

    async def page(_: web.Request) -> web.Response:
        return web.Response(text=html, content_type="text/html")

    async def no_icon(_: web.Request) -> web.Response:
        return web.Response(status=204)

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/favicon.ico", no_icon)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, 0)
        await site.start()
        port = runner.addresses[0][1]
        yield Site(f"http://{host}:{port}", port)
    finally:
        await runner.cleanup()
