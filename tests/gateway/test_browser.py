"""A web page of another local origin cannot reach the gateway — shown in a real Chromium.

The attacker is a page served from ``http://127.0.0.1:OTHERPORT``. In a headless Chromium
(Playwright) it tries what a malicious site the user visits could: a "simple" cross-site
``no-cors`` POST (no preflight; the response is opaque but the request is sent), a
preflighted JSON POST, and a WebSocket — against ``localhost`` and ``127.0.0.1`` — to store
an ``mcp`` item that would run ``sh -c 'touch MARKER'``. The gateway under attack allows
``sh`` for stdio MCP servers, so only its access checks stand between the page and the
command. The positive control runs the same page against a gateway started with
``--allow-origin`` for it: there the JSON POST and the WebSocket go through, so the failures
above are the gateway's refusals, not the browser's or the test's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest
from yarl import URL

from tests.browser import Site, chromium, chromium_missing, serve_page
from tests.servers import Served, toolmesh_serve

# slow (tests/conftest.py): a real headless Chromium (Playwright)
pytestmark = pytest.mark.slow

if (_missing := chromium_missing()) is not None:
    pytest.skip(_missing, allow_module_level=True)

if TYPE_CHECKING:
    from playwright.async_api import Page, Request, Response

#: how long one step in the page may take (a refused request fails in milliseconds)
STEP = 10.0
#: how long the page waits for the WebSocket to answer (milliseconds; less than STEP)
SOCKET_MS = 5000

#: the attacker's page: each function returns a promise of a plain result object
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>not the gateway</title></head><body>
<script>
// A "simple" request: no preflight, the response is opaque, but the request is sent.
window.simplePost = async (url, body) => {
  try {
    const r = await fetch(url, {method: "POST", mode: "no-cors", body,
                                headers: {"Content-Type": "text/plain"}});
    return {ok: true, type: r.type, status: r.status};
  } catch (e) {
    return {ok: false, error: e.name, message: e.message};
  }
};
// A JSON request: preflighted (OPTIONS) first; the page may read the response only if the
// gateway's CORS headers allow this origin.
window.jsonPost = async (url, body) => {
  try {
    const r = await fetch(url, {method: "POST", body,
                                headers: {"Content-Type": "application/json"}});
    return {ok: true, status: r.status, body: await r.text()};
  } catch (e) {
    return {ok: false, error: e.name, message: e.message};
  }
};
// The WebSocket: authenticate (no token), then read the config. Every event is recorded.
window.socket = (url, request, ms) => new Promise(resolve => {
  const events = [];
  let ws, finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    try { ws.close(); } catch (e) {}
    resolve(events);
  };
  const timer = setTimeout(() => { events.push({event: "timeout"}); finish(); }, ms);
  try {
    ws = new WebSocket(url);
  } catch (e) {
    events.push({event: "exception", error: e.name, message: e.message});
    finish();
    return;
  }
  ws.onopen = () => {
    events.push({event: "open"});
    ws.send(JSON.stringify({type: "auth", token: ""}));
  };
  ws.onmessage = m => {
    let data;
    try { data = JSON.parse(m.data); } catch (e) { data = m.data; }
    events.push({event: "message", data});
    if (data && data.type === "auth-ok") {
      ws.send(JSON.stringify({id: "r1", service: "config", request}));
    } else {
      finish();  // the config reply, or a refusal
    }
  };
  ws.onerror = () => events.push({event: "error"});
  ws.onclose = e => { events.push({event: "close", code: e.code}); finish(); };
});
</script>
</body></html>
"""


def put(type: str, key: str, value: Any) -> str:
    """The body of a config put of one item (its value as JSON text)."""
    return json.dumps({"operation": "put",
                       "values": [{"type": type, "key": key, "value": json.dumps(value)}]})


async def read_config(served: Served) -> dict[str, Any]:
    """The whole config, read over plain HTTP as a CLI would (JSON, no Origin)."""
    async with aiohttp.ClientSession() as session, session.post(
            served.url + "api/v1/config", json={"operation": "config"},
            timeout=aiohttp.ClientTimeout(total=STEP)) as response:
        assert response.status == 200, await response.text()
        body = await response.json()
    return body["config"]


def gateway_bases(served: Served) -> list[str]:
    port = URL(served.url).port
    return [f"http://localhost:{port}", f"http://127.0.0.1:{port}"]


def ws_url(base: str) -> str:
    return "ws" + base.removeprefix("http") + "/api/v1/socket"


class Network:
    """What the browser itself saw of the page's requests to the gateway (via Playwright)."""

    def __init__(self, page: Page) -> None:
        self.responses: list[tuple[str, str, int]] = []
        self.failures: list[tuple[str, str, str]] = []
        page.on("response", self._response)
        page.on("requestfailed", self._failed)

    def _response(self, response: Response) -> None:
        request = response.request
        self.responses.append((request.method, request.url, response.status))

    def _failed(self, request: Request) -> None:
        self.failures.append((request.method, request.url, request.failure or ""))


async def call(page: Page, function: str, *args: Any) -> Any:
    """``window[function](...args)`` in the page, awaited with a deadline."""
    return await asyncio.wait_for(
        page.evaluate(f"args => window.{function}(...args)", list(args)), STEP)


@pytest.fixture
async def attacker() -> AsyncIterator[Site]:
    async with serve_page(PAGE) as site:
        yield site


@pytest.fixture
async def page(attacker: Site) -> AsyncIterator[Page]:
    async with chromium() as browser:
        context = await browser.new_context()
        try:
            page = await context.new_page()
            page.set_default_timeout(STEP * 1000)
            await page.goto(attacker.url)
            assert await page.evaluate("location.origin") == attacker.origin
            yield page
        finally:
            await context.close()


async def test_a_page_of_another_origin_cannot_reach_the_gateway(
        tmp_path: Path, attacker: Site, page: Page) -> None:
    marker = tmp_path / "pwned"
    attack = put("mcp", "pwn", {"transport": "stdio", "command": "sh",
                                "args": ["-c", f"touch {marker}"]})
    network = Network(page)
    async with toolmesh_serve(tmp_path, "--mcp-stdio-allow", "sh") as served:
        for base in gateway_bases(served):
            endpoint = base + "/api/v1/config"

            # (a) sent by the browser without a preflight; the page cannot see the answer
            simple = await call(page, "simplePost", endpoint, attack)
            assert simple == {"ok": True, "type": "opaque", "status": 0}, simple

            # (b) preflighted: the OPTIONS is refused, so the POST is never sent
            preflighted = await call(page, "jsonPost", endpoint, attack)
            assert preflighted["ok"] is False, preflighted
            assert preflighted["error"] == "TypeError", preflighted

            # (c) the upgrade is refused: the socket never opens, no frame arrives
            events = await call(page, "socket", ws_url(base), {"operation": "config"}, SOCKET_MS)
            kinds = [e["event"] for e in events]
            assert "open" not in kinds and "message" not in kinds, events
            assert kinds[-1] == "close" and events[-1]["code"] == 1006, events

        # The browser did send the simple POSTs, and the gateway answered them 403.
        simple_posts = [(url, status) for method, url, status in network.responses
                        if method == "POST"]
        assert simple_posts == [(b + "/api/v1/config", 403) for b in gateway_bases(served)], \
            network.responses
        assert {(m, u) for m, u, _ in network.failures} == {
            ("POST", b + "/api/v1/config") for b in gateway_bases(served)}, network.failures

        config = await read_config(served)
        assert "mcp" not in config or "pwn" not in config["mcp"], config
        assert served.process.returncode is None
    assert not marker.exists()


async def test_the_same_page_gets_through_when_its_origin_is_allowed(
        tmp_path: Path, attacker: Site, page: Page) -> None:
    network = Network(page)
    async with toolmesh_serve(tmp_path, "--allow-origin", attacker.origin) as served:
        for n, base in enumerate(gateway_bases(served)):
            endpoint = base + "/api/v1/config"

            done = await call(page, "jsonPost", endpoint, put("note", f"x{n}", {"a": n}))
            assert done["ok"] is True and done["status"] == 200, done

            events = await call(page, "socket", ws_url(base), {"operation": "config"}, SOCKET_MS)
            assert [e["event"] for e in events[:3]] == ["open", "message", "message"], events
            assert events[1]["data"]["type"] == "auth-ok", events
            reply = events[2]["data"]
            assert reply["id"] == "r1" and reply["complete"] is True, events
            assert reply["response"]["config"]["note"][f"x{n}"] == json.dumps({"a": n}), events

            # allowed or not, a text/plain body is still refused (415)
            simple = await call(page, "simplePost", endpoint, put("note", "plain", {}))
            assert simple == {"ok": True, "type": "opaque", "status": 0}, simple

        posts = [(url, status) for method, url, status in network.responses if method == "POST"]
        assert [status for _, status in posts] == [200, 415, 200, 415], posts

        config = await read_config(served)
        assert config["note"] == {"x0": json.dumps({"a": 0}), "x1": json.dumps({"a": 1})}, config
