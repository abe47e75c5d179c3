"""The Prompts page: templates edited as text, previewed as the prompt service renders them
(no LLM call), saved as ``prompt/template.<id>`` items; read-only tokens only look."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from tests.gateway.test_scoped_tokens import create, post
from tests.workbench.conftest import BROWSER_LOOP, Workbench

pytestmark = BROWSER_LOOP

if TYPE_CHECKING:
    from playwright.async_api import Page

HOSTILE = "<img src=x onerror=alert(1)>"


async def put(workbench: Workbench, **items: Any) -> None:
    await workbench.config({"operation": "put", "values": [
        {"type": "prompt", "key": k, "value": json.dumps(v)} for k, v in items.items()]})


async def rendered_once_applied(workbench: Workbench, id: str, variables: dict[str, str],
                                want: tuple[int, str | None, str]
                                ) -> tuple[tuple[int, str | None, str | None], dict[str, Any]]:
    """Render stored template ``id`` until the prompt service answers ``want`` (status,
    system, prompt) or 10 s pass; its last answer and body. Config pushes are asynchronous: a
    render right after a put may be answered from the config before it."""
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        status, body = await post(workbench.served, "api/v1/flow/default/service/prompt", {
            "operation": "render", "id": id, "variables": variables}, workbench.token)
        got = (status, body.get("system"), body.get("prompt"))
        if got == want or asyncio.get_running_loop().time() > deadline:
            return got, body
        await asyncio.sleep(0.1)


async def open_page(page: Page, workbench: Workbench, route: str,
                    token: str | None = None) -> None:
    """Sign in straight onto ``route`` (a template's own page has no link to click)."""
    await page.goto(f"{workbench.page_url}#/{route}")
    await page.get_by_label("Token").fill(token or workbench.token)
    await page.get_by_role("button", name="Sign in").click()
    await page.get_by_role("button", name="Sign out").wait_for()


async def open_template(page: Page, workbench: Workbench, id: str, token: str | None = None) -> None:
    await open_page(page, workbench, f"prompts/{id}", token)
    await page.get_by_role("heading", name=f"Template {id}").wait_for()


async def test_edit_preview_with_variables_then_save(page: Page, workbench: Workbench) -> None:
    await put(workbench, **{"template.greet": {"prompt": "Hello {{ name }}", "response-type": "text"},
                            "system": "Be {{ mood }}."})
    # the preview renders with the system prompt the prompt service has: wait for the push
    # (under load it once came after the preview, which then had no system prompt)
    got, body = await rendered_once_applied(workbench, "greet", {"name": "A", "mood": "m"},
                                            (200, "Be m.", "Hello A"))
    assert got == (200, "Be m.", "Hello A"), body
    await open_template(page, workbench, "greet")
    # the variables box is prefilled with the names the template and the system prompt use
    assert json.loads(await page.get_by_label("Variables (JSON object)").input_value()) == {
        "name": "", "mood": ""}
    await page.get_by_label("Prompt", exact=True).fill("Hi {{ name }} from {{ place }}!")
    await page.get_by_label("Variables (JSON object)").fill(json.dumps(
        {"name": "Ana", "place": HOSTILE, "mood": "kind"}))
    await page.get_by_role("button", name="Preview").click()
    rendered = page.get_by_label("Rendered prompt")
    await rendered.wait_for()
    assert await rendered.text_content() == f"Hi Ana from {HOSTILE}!"
    # the workspace's system prompt applies to a template without its own
    assert await page.get_by_label("Rendered system prompt").text_content() == "Be kind."
    assert await page.locator("main img").count() == 0
    assert await workbench.stored("prompt", "template.greet") == {"prompt": "Hello {{ name }}",
                                                         "response-type": "text"}  # not saved yet

    await page.get_by_label("System prompt of this template").fill("Own system.")
    await page.get_by_label("Response type").select_option("json")
    await page.get_by_role("button", name="Save", exact=True).click()
    await page.get_by_role("status").filter(has_text="Saved prompt/template.greet.").wait_for()
    assert await workbench.stored("prompt", "template.greet") == {
        "prompt": "Hi {{ name }} from {{ place }}!", "response-type": "json", "system": "Own system."}
    # the prompt service serves the saved template once the config push reaches it
    got, body = await rendered_once_applied(workbench, "greet", {"name": "B", "place": "C"},
                                            (200, "Own system.", "Hi B from C!"))
    assert got == (200, "Own system.", "Hi B from C!"), body


async def test_a_syntax_error_is_shown_beside_the_prompt_and_not_saved(
        page: Page, workbench: Workbench) -> None:
    await put(workbench, **{"template.greet": {"prompt": "Hello {{ name }}"}})
    await open_template(page, workbench, "greet")
    await page.get_by_label("Prompt", exact=True).fill("Hello {{ name")
    await page.get_by_role("button", name="Preview").click()
    error = page.locator(".field[data-field=prompt] .field-error")
    await error.filter(has_text="syntax error in prompt at line 1").wait_for()
    await page.get_by_role("status").filter(has_text="Preview failed").wait_for()
    assert await page.get_by_label("Rendered prompt").count() == 0
    assert await page.get_by_label("Prompt", exact=True).get_attribute("aria-invalid") == "true"
    await page.get_by_role("button", name="Save", exact=True).click()
    await page.get_by_role("status").filter(has_text="Not saved").wait_for()
    assert await workbench.stored("prompt", "template.greet") == {"prompt": "Hello {{ name }}"}


async def test_create_a_template_and_delete_it(page: Page, workbench: Workbench) -> None:
    await open_page(page, workbench, "prompts")
    # a fresh workspace lists the shipped templates
    await page.get_by_role("link", name="agent-react").wait_for()
    await page.get_by_role("button", name="New template").click()
    await page.get_by_role("heading", name="New template").wait_for()
    await page.get_by_label("Template id").fill("shout")
    await page.get_by_label("Prompt", exact=True).fill("{{ word | upper }}!")
    await page.get_by_role("button", name="Create").click()
    await page.get_by_role("heading", name="Template shout").wait_for()
    assert await workbench.stored("prompt", "template.shout") == {"prompt": "{{ word | upper }}!",
                                                         "response-type": "text"}
    await page.get_by_label("Variables (JSON object)").fill('{"word": "hey"}')
    await page.get_by_role("button", name="Preview").click()
    await page.get_by_label("Rendered prompt").filter(has_text="HEY!").wait_for()
    page.once("dialog", lambda dialog: dialog.accept())
    await page.get_by_role("button", name="Delete").click()
    await page.get_by_text("Choose a template to view or edit it.").wait_for()
    assert await page.get_by_role("link", name="shout").count() == 0
    assert await workbench.stored("prompt", "template.shout") is None


async def test_the_workspace_system_prompt_is_saved_once_it_compiles(
        page: Page, workbench: Workbench) -> None:
    await open_page(page, workbench, "prompts")
    system = page.get_by_label("Workspace system prompt")
    await system.fill("Be {% if x %}brief.")
    await page.get_by_role("button", name="Save system prompt").click()
    await page.locator(".field[data-field=system] .field-error").filter(
        has_text="syntax error in system").wait_for()
    assert await workbench.stored("prompt", "system") == ""  # the shipped one: none
    await system.fill("Be brief.")
    await page.get_by_role("button", name="Save system prompt").click()
    await page.get_by_role("status").filter(has_text="System prompt saved.").wait_for()
    assert await workbench.stored("prompt", "system") == "Be brief."


async def test_a_read_only_token_sees_templates_read_only_and_previews_the_stored_one(
        page: Page, workbench: Workbench) -> None:
    await put(workbench, **{"template.greet": {"prompt": "Hello {{ name }}"}})
    token = await create(workbench.served, "-w", "default", "-c", "config:read", "-c", "agent",
                         "--name", "ro", token=workbench.token)
    await open_template(page, workbench, "greet", token)
    await page.locator(".read-only-note").filter(has_text="can only read").wait_for()
    assert await page.get_by_label("Prompt", exact=True).get_attribute("readonly") is not None
    assert await page.get_by_label("Response type").is_disabled()
    for name in ("Save", "Delete", "Create", "New template", "Save system prompt"):
        assert await page.get_by_role("button", name=name, exact=True).count() == 0, name
    await page.get_by_label("Variables (JSON object)").fill('{"name": "Ana"}')
    await page.get_by_role("button", name="Preview").click()
    await page.get_by_label("Rendered prompt").filter(has_text="Hello Ana").wait_for()
    # and the gateway refuses this token a save, whatever the page shows
    status, body = await post(workbench.served, "api/v1/config", {"operation": "put", "values": [
        {"type": "prompt", "key": "template.greet", "value": '{"prompt": "x"}'}]}, token)
    assert status == 403, body
