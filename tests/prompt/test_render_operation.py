"""The prompt service's ``render`` operation: a stored or a draft template rendered without
asking the LLM; and at the gateway, a draft needs ``config:write`` (an ``agent`` token may not
run Jinja text of its own)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.test_scoped_tokens import ADMIN, create, post
from tests.prompt.harness import TIMEOUT, Stack
from tests.servers import Served, toolmesh_serve
from toolmesh.gateway.scopes import need

NULLS = {"text": None, "object": None, "in_token": None, "out_token": None, "model": None}


async def render(stack: Stack, **request: Any) -> dict[str, Any]:
    return await stack.raw.request({"operation": "render", **request}, timeout=TIMEOUT)


async def test_a_stored_template_is_rendered_without_asking_the_llm(stack: Stack) -> None:
    await stack.put({"template.greet": {"prompt": "Hello {{ name }}!", "system": "Be {{ mood }}."}})
    r = await render(stack, id="greet", variables={"name": "Ana", "mood": "kind"})
    assert r == {"error": None, "system": "Be kind.", "prompt": "Hello Ana!",
                 "end_of_stream": True, **NULLS}
    # terms (JSON text values) as well, and a shipped template
    r = await render(stack, id="question", terms={"question": json.dumps("Why?")})
    assert (r["error"], r["system"], r["prompt"]) == (None, "", "Why?")
    assert stack.llm.requests == []


async def test_a_draft_is_rendered_with_the_workspace_system_prompt_unless_it_has_its_own(
        stack: Stack) -> None:
    await stack.put({"system": json.dumps("You speak {{ lang }}.")})
    draft = {"prompt": "{% for t in topics %}- {{ t | upper }}\n{% endfor %}"}
    r = await render(stack, template=draft, variables={"topics": ["a", "b"], "lang": "Welsh"})
    assert (r["error"], r["system"], r["prompt"]) == (None, "You speak Welsh.", "- A\n- B\n")
    r = await render(stack, template={**draft, "system": "Own {{ lang }}", "response-type": "json"},
                     variables={"topics": [], "lang": "x"})
    assert (r["error"], r["system"], r["prompt"]) == (None, "Own x", "")
    # a draft is not stored: the id it may name stays unknown
    await render(stack, id="mine", template={"prompt": "p"})
    r = await stack.raw.request({"id": "mine"}, timeout=TIMEOUT)
    assert "unknown prompt template 'mine'" in r["error"]["message"]
    assert stack.llm.requests == []


@pytest.mark.parametrize(("template", "variables", "message"), [
    ({"prompt": "Hello {{ name"}, {}, "template 'draft': syntax error in prompt at line 1"),
    ({"prompt": "Hello {{ name }}"}, {}, "template 'draft': 'name' is undefined"),
    ({"prompt": ""}, {}, "'prompt' is required"),
    ({"prompt": "x", "response-type": "xml"}, {}, "response-type must be one of text, json"),
    ({"prompt": "{{ ''.__class__.__mro__ }}"}, {}, "template 'draft' failed"),  # the sandbox
    ("Hello", {}, "'template' must be an object"),
])
async def test_a_bad_draft_is_the_requests_error_in_the_templates_words(
        stack: Stack, template: Any, variables: dict[str, Any], message: str) -> None:
    r = await render(stack, template=template, variables=variables)
    assert r["error"]["type"] == "prompt-error"
    assert message in r["error"]["message"], r["error"]
    assert r.get("prompt") is None


async def test_unknown_ids_and_operations_are_refused(stack: Stack) -> None:
    r = await render(stack, id="nope")
    assert "unknown prompt template 'nope'" in r["error"]["message"]
    r = await stack.raw.request({"operation": "complete", "id": "question"}, timeout=TIMEOUT)
    assert "unknown operation 'complete'" in r["error"]["message"]
    assert stack.llm.requests == []


def test_a_draft_needs_config_write_and_a_stored_id_needs_agent() -> None:
    assert need("prompt", {"operation": "render", "id": "x"}).capability == "agent"
    for request in ({"operation": "render", "template": {"prompt": "x"}},
                    {"template": {"prompt": "x"}, "id": "question"}):
        needed = need("prompt", request)
        assert (needed.capability, needed.also) == ("config:write", None)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with toolmesh_serve(tmp_path, extra_env={"TOOLMESH_GATEWAY_TOKEN": ADMIN}) as s:
        yield s


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_through_the_gateway_an_agent_token_renders_stored_templates_not_drafts(
        served: Served) -> None:
    path = "api/v1/flow/default/service/prompt"
    draft = {"operation": "render", "template": {"prompt": "{{ 6 * 7 }}"}}
    agent = await create(served, "-w", "default", "-c", "agent", "-c", "config:read")
    status, body = await post(served, path, {"operation": "render", "id": "question",
                                             "variables": {"question": "Hi?"}}, agent)
    assert (status, body.get("prompt")) == (200, "Hi?"), body
    status, body = await post(served, path, draft, agent)
    assert status == 403, body
    assert "prompt render of a draft template needs the 'config:write' capability" \
        in body["error"]["message"]
    writer = await create(served, "-w", "default", "-c", "config:write")
    status, body = await post(served, path, draft, writer)
    assert (status, body.get("prompt"), body.get("error")) == (200, "42", None), body
