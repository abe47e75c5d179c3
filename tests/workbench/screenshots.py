"""Screenshots of the Workbench's main pages for the docs, taken from a real ``toolmesh serve``
(with a gateway token, the scripted OpenAI-compatible test LLM, an SDK-written MCP server and
the joke service) in headless Chromium::

    python -m tests.workbench.screenshots docs/workbench

writes ``tools.png``, ``tool-form.png``, ``mcp.png``, ``services.png``, ``prompts.png``,
``agent.png``, ``approvals.png`` (and ``approvals-phone.png``, 390 px wide), ``mcp-clients.png``
and ``config.png`` there. The config is put through the API first, then a dialog is run on
the Agent page, and one through REST waits for a person, so every page has something to
show.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

from tests.browser import chromium
from tests.llm.openai_server import OpenAITestServer
from tests.mcp.servers import running_server
from tests.servers import toolmesh_serve
from tests.workbench.conftest import MCP_TOKEN, TOKEN

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "joke"
VIEWPORT = {"width": 1280, "height": 860}

CONFIG: dict[tuple[str, str], Any] = {
    ("tool-service", "joke-service"): json.loads((EXAMPLES / "joke-service.json").read_text()),
    ("tool", "tell-joke"): {**json.loads((EXAMPLES / "tell-joke.json").read_text()),
                            "group": ["fun"]},
    ("tool", "forecast"): {
        "type": "mcp-tool", "name": "weather", "mcp-tool": "weather",
        "description": "The weather forecast for a city.",
        "arguments": [
            {"name": "city", "type": "string", "description": "The city to forecast, e.g. Oslo",
             "required": True},
            {"name": "days", "type": "integer", "description": "How many days ahead",
             "default": 1}]},
    ("tool", "summarise"): {
        "type": "prompt", "name": "summarise", "template": "question", "approval": "always",
        "description": "Answer a question from the model's own knowledge",
        "arguments": [{"name": "question", "type": "string", "description": "The question",
                       "required": True}]},
    ("prompt", "template.greet"): {
        "prompt": "Hello {{ name }}! What is the weather like in {{ city }}?",
        "response-type": "text"},
    ("prompt", "system"): "You are a helpful assistant. Answer briefly.",
    ("tool", "old-search"): {
        "type": "mcp-tool", "name": "search", "mcp-tool": "search-server",
        "description": "Search the web (its server is not configured)"},
}
DIALOG = (
    ('Thought: The user wants the forecast for Oslo.\nAction: weather\n'
     'Args: {"city": "Oslo", "days": 2}'),
    'Thought: And a joke to go with it.\nAction: tell-joke\nArgs: {"topic": "rain"}',
    ("Thought: I have both.\nFinal Answer: Oslo will be sunny for the next 2 days — and why "
     "did the rain cloud break up with the fog? It needed space."),
)


async def put(session: aiohttp.ClientSession, url: str, items: dict[tuple[str, str], Any]) -> None:
    values = [{"type": t, "key": k, "value": json.dumps(v)} for (t, k), v in items.items()]
    async with session.post(url + "api/v1/config", json={"operation": "put", "values": values},
                            headers={"Authorization": f"Bearer {TOKEN}"}) as r:
        body = await r.json()
    if r.status != 200 or body.get("error"):
        raise SystemExit(f"cannot seed the config: {body}")


async def call(session: aiohttp.ClientSession, url: str, path: str,
               body: dict[str, Any]) -> dict[str, Any]:
    async with session.post(url + path, json=body,
                            headers={"Authorization": f"Bearer {TOKEN}"}) as r:
        return await r.json()  # type: ignore[no-any-return]


async def shoot(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as data:
        async with OpenAITestServer() as llm, \
                running_server("streamable-http", name="weather", token=MCP_TOKEN) as mcp, \
                toolmesh_serve(Path(data), "--llm", llm.base_url, "--model", "test-model",
                               "--tool-calling", "react",
                               extra_env={"TOOLMESH_GATEWAY_TOKEN": TOKEN}) as served, \
                aiohttp.ClientSession() as session:
            await put(session, served.url, {
                ("mcp", "weather"): {"url": mcp.url, "remote-name": "weather",
                                     "auth-token": MCP_TOKEN}, **CONFIG})
            llm.add(*DIALOG)
            async with chromium() as browser:
                context = await browser.new_context(viewport=VIEWPORT)
                context.set_default_timeout(15_000)
                page = await context.new_page()
                await page.goto(served.url + "workbench/")
                await page.get_by_label("Token").fill(TOKEN)
                await page.get_by_role("button", name="Sign in").click()
                await page.get_by_role("button", name="Sign out").wait_for()

                async def visit(hash: str, heading: str, name: str) -> None:
                    await page.goto(f"{served.url}workbench/#/{hash}")
                    await page.get_by_role("heading", name=heading, exact=True).first.wait_for()
                    await page.wait_for_load_state("networkidle")
                    await page.screenshot(path=str(out / f"{name}.png"))
                    print(f"wrote {out / name}.png")

                await visit("tools", "Tools", "tools")
                await page.get_by_role("link", name="forecast", exact=True).click()
                await page.get_by_label("Name of argument 1").wait_for()
                await page.get_by_label("Name of argument 1").scroll_into_view_if_needed()
                await page.screenshot(path=str(out / "tool-form.png"))
                print(f"wrote {out / 'tool-form'}.png")

                await visit("mcp/weather", "MCP servers", "mcp")
                await page.get_by_role("button", name="Test connection").click()
                await page.get_by_text("Connected: the server lists").wait_for()
                await page.screenshot(path=str(out / "mcp.png"), full_page=True)

                await visit("services", "Tool services", "services")
                await page.get_by_role("button", name="Try joke-service").click()
                await page.get_by_label("Config (JSON object)").fill('{"style": "pun"}')
                await page.get_by_label("Arguments (JSON object)").fill('{"topic": "rain"}')
                await page.get_by_role("button", name="Invoke", exact=True).click()
                await page.get_by_role("status").filter(has_text="Done.").wait_for()
                await page.screenshot(path=str(out / "services.png"), full_page=True)

                await visit("prompts/greet", "Prompts", "prompts")
                await page.get_by_label("Variables (JSON object)").fill(
                    '{"name": "Ana", "city": "Oslo"}')
                await page.get_by_role("button", name="Preview").click()
                await page.get_by_label("Rendered prompt").wait_for()
                await page.screenshot(path=str(out / "prompts.png"), full_page=True)

                # tall enough for the whole dialog: the transcript scrolls within 60% of it
                await page.set_viewport_size({"width": 1280, "height": 1500})
                await visit("agent", "Agent", "agent")
                await page.get_by_label("Groups").fill("default, fun")
                await page.get_by_label("Question").fill(
                    "What is the weather in Oslo? Cheer me up too.")
                await page.get_by_role("button", name="Send").click()
                await page.get_by_role("log", name="Transcript").locator(".usage").wait_for()
                await page.screenshot(path=str(out / "agent.png"))
                await page.set_viewport_size(VIEWPORT)

                # a call that waits for a person: the joke tool now asks, and a dialog asked
                # through REST (by someone else) waits
                await put(session, served.url, {("tool", "tell-joke"): {
                    **CONFIG[("tool", "tell-joke")], "approval": "always"}})
                version = (await call(session, served.url, "api/v1/config",
                                      {"operation": "config"}))["version"]
                await call(session, served.url, "api/v1/flow/default/service/agent-tools",
                           {"version": version})
                llm.add('Thought: A joke about cats.\nAction: tell-joke\nArgs: {"topic": "cats"}',
                        "Thought: They said no.\nFinal Answer: No joke today, then.")
                asking = asyncio.create_task(call(
                    session, served.url, "api/v1/flow/default/service/agent",
                    {"question": "tell me a joke about cats", "group": ["fun"]}))
                await visit("approvals", "Approvals", "approvals")
                await page.get_by_role("region", name="Approval needed: tell-joke").wait_for()
                await page.screenshot(path=str(out / "approvals.png"))
                await page.set_viewport_size({"width": 390, "height": 844})
                await page.screenshot(path=str(out / "approvals-phone.png"))
                print(f"wrote {out / 'approvals-phone'}.png")
                await page.set_viewport_size(VIEWPORT)
                [request] = (await call(session, served.url,
                                        "api/v1/flow/default/service/approvals",
                                        {"operation": "list"}))["approvals"]
                await call(session, served.url, "api/v1/flow/default/service/approvals",
                           {"operation": "deny", "dialog": request["dialog"],
                            "call": request["call"], "reason": "not at work"})
                await asking

                await visit("mcp-clients", "MCP clients", "mcp-clients")
                await visit("config", "Config", "config")
                await context.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the folder to write the PNG files to")
    args = parser.parse_args(argv)
    asyncio.run(shoot(args.out))


if __name__ == "__main__":
    sys.exit(main())
