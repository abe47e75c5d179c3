"""A hostile template is bounded: it fails with a prompt-error naming it, and nobody else waits.

Templates are written by whoever holds ``config:write``; they render in worker processes with
a time limit, a size limit and a memory limit (toolmesh.prompt.renderer, .sandbox). These
tests render real hostile templates — nested ranges, huge string multiplication, a macro
calling itself — through the real prompt service on the memory bus and through a real
``toolmesh serve``, while another workspace's requests are timed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import Backend
from tests.gateway.test_scoped_tokens import ADMIN, create
from tests.prompt.harness import TIMEOUT, Stack, prompt_stack
from tests.servers import toolmesh_serve
from toolmesh import RequestError
from toolmesh.prompt import PromptError, PromptTemplate, RenderLimits

#: loops a worker cannot finish within any time limit here (each range is within the cap)
NESTED = ("{% for a in range(10000) %}{% for b in range(10000) %}{% for c in range(10000) %}"
          "{% endfor %}{% endfor %}{% endfor %}")
#: a macro that doubles a string each call: past any size limit in ~25 calls
DOUBLING = ("{% macro d(s, n) %}{% if n %}{{ d(s ~ s, n - 1) }}{% else %}{{ s }}{% endif %}"
            "{% endmacro %}{{ d('x', 60) }}")
#: generous bounds for a shared two-core machine; the measured figures are printed
P99_BOUND = 0.25


def p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


@pytest.mark.parametrize(("prompt", "complaint"), [
    ("{{ range(10**6) | length }}", "range() of 1,000,000 items; templates may loop over 10,000"),
    ("{{ 'x' * 10**9 }}", "str * 1,000,000,000 would hold about 1,000,000,000"),
    ("{{ [1, 2] * 10**8 }}", "list * 100,000,000 would hold"),
    ("{{ 10 ** 100000000 }}", "a power would hold about 90,309,000"),
    ("{{ '%999999999s' % 'x' }}", None),  # built, then refused (or out of memory)
    ("{{ 'x'.ljust(10**7) }}", "a call of ljust() would hold about 10,000,000"),
    ("{% for i in range(10000) %}{{ 'y' * 1000 }}{% endfor %}",
     "its output passed 2,000,000 characters"),
])
def test_what_a_template_builds_is_bounded_in_the_sandbox(prompt: str,
                                                          complaint: str | None) -> None:
    t = PromptTemplate(id="greedy", prompt=prompt)
    with pytest.raises(PromptError) as e:
        t.render({})
    assert e.value.type == "prompt-error"
    assert e.value.message.startswith("template 'greedy' is too costly to render: ")
    if complaint:
        assert complaint in e.value.message


def test_a_normal_template_renders_as_before() -> None:
    t = PromptTemplate(id="ok", prompt="{% for i in range(3) %}{{ i * 2 }}{{ 'ab' * 2 }}"
                                       "{% endfor %}{{ '%s!' % name }}")
    assert t.render({"name": "Ana"}) == ("", "0abab2abab4ababAna!")


async def _timed(call: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


async def while_running(hostile: asyncio.Task[Any], call: Callable[[], Awaitable[Any]], *,
                        at_least: int) -> list[float]:
    """The latencies of ``call`` made one after another for as long as ``hostile`` runs (and
    ``at_least`` times)."""
    latencies: list[float] = []
    while not hostile.done() or len(latencies) < at_least:
        latencies.append(await _timed(call))
    return latencies


async def put(stack: Stack, workspace: str, values: dict[str, Any]) -> None:
    version = await stack.config.put(
        {("prompt", k): json.dumps(v) for k, v in values.items()}, workspace=workspace)
    async with asyncio.timeout(TIMEOUT):
        await stack.service.wait_for_config(version, workspace=workspace)


@pytest.mark.parametrize("hostile", [NESTED, DOUBLING], ids=["nested-ranges", "doubling-macro"])
async def test_a_hostile_template_fails_by_name_and_another_workspace_goes_on(
        backend: Backend, tmp_path: Path, hostile: str) -> None:
    limits = RenderLimits(timeout=1.5)
    async with prompt_stack(backend, tmp_path, render_limits=limits) as stack:
        await put(stack, "a", {"template.hostile": {"prompt": hostile},
                               "template.fine": {"prompt": "fine {{ x }}"}})
        await put(stack, "b", {"template.greet": {"prompt": "Hello {{ name }}"}})

        async def b() -> None:
            assert await stack.client.render_and_complete(
                "greet", {"name": "B"}, workspace="b", timeout=TIMEOUT) == "Hello B"

        await b()  # a worker is up
        started = time.perf_counter()
        a = asyncio.create_task(stack.client.render_and_complete(
            "hostile", {}, workspace="a", timeout=TIMEOUT))
        latencies = await while_running(a, b, at_least=20)
        with pytest.raises(RequestError) as e:
            await a
        took = time.perf_counter() - started
        print(f"\n{len(latencies)} requests of workspace b while a hostile template rendered "
              f"for {took:.2f} s: p99 {p99(latencies) * 1000:.1f} ms, "
              f"max {max(latencies) * 1000:.1f} ms")
        assert e.value.type == "prompt-error"
        assert e.value.message.startswith("template 'hostile' "), e.value.message
        assert ("took longer than 1.5 s to render and was stopped (--prompt-render-timeout)"
                in e.value.message or "is too costly to render" in e.value.message)
        assert took < limits.timeout + 3
        assert p99(latencies) < P99_BOUND, latencies
        # the service (and workspace a) keeps working
        assert await stack.client.render_and_complete(
            "fine", {"x": 1}, workspace="a", timeout=TIMEOUT) == "fine 1"
        await b()


async def test_a_shipped_template_with_a_hostile_system_prompt_is_bounded_too(
        backend: Backend, tmp_path: Path) -> None:
    """The templates toolmesh ships render on the loop (their code is toolmesh's); a
    workspace's system prompt put into them is the tenant's code: that goes to a worker."""
    async with prompt_stack(backend, tmp_path, render_limits=RenderLimits(timeout=1.0)) as stack:
        await put(stack, "a", {"system": NESTED})
        with pytest.raises(RequestError) as e:
            await stack.client.render_and_complete("question", {"question": "hi"},
                                                   workspace="a", timeout=TIMEOUT)
        shipped = await stack.client.render_and_complete("question", {"question": "hi"},
                                                         workspace="b", timeout=TIMEOUT)
    assert e.value.type == "prompt-error" and "template 'question'" in e.value.message
    assert "took longer than 1 s" in e.value.message, e.value.message
    assert shipped == "hi"


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_one_workspace_cannot_take_every_worker(backend: Backend, tmp_path: Path) -> None:
    """Three hostile renders at once in workspace a: b still finds a worker at once."""
    async with prompt_stack(backend, tmp_path, render_limits=RenderLimits(timeout=1.0)) as stack:
        await put(stack, "a", {"template.hostile": {"prompt": NESTED}})
        await put(stack, "b", {"template.greet": {"prompt": "Hello {{ name }}"}})
        hostile = [asyncio.create_task(stack.client.render_and_complete(
            "hostile", {}, workspace="a", timeout=TIMEOUT)) for _ in range(3)]
        all_hostile = asyncio.ensure_future(asyncio.gather(*hostile, return_exceptions=True))

        async def b() -> None:
            await stack.client.render_and_complete("greet", {"name": "B"}, workspace="b",
                                                   timeout=TIMEOUT)

        latencies = await while_running(all_hostile, b, at_least=10)
        outcomes = await all_hostile
        assert all(isinstance(o, RequestError) and "took longer than" in o.message
                   for o in outcomes), outcomes
        assert p99(latencies) < P99_BOUND, latencies


async def test_a_template_too_costly_to_compile_is_not_applied_and_names_its_item(
        backend: Backend, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Compiling is done by a worker too: a huge template does not stall the service."""
    huge = "{% for i in range(3) %}{{ i }}{% endfor %}" * 20000  # seconds to compile
    async with prompt_stack(backend, tmp_path, render_limits=RenderLimits(timeout=0.5)) as stack:
        await put(stack, "a", {"template.huge": {"prompt": huge},
                               "template.fine": {"prompt": "fine"}})
        assert "huge" not in stack.service.templates_of("a")
        assert "template 'huge' took longer than 0.5 s" in caplog.text
        assert await stack.client.render_and_complete(
            "fine", {}, workspace="a", timeout=TIMEOUT) == "fine"


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_through_toolmesh_serve_a_config_writer_cannot_stall_the_gateway(
        tmp_path: Path) -> None:
    """The probe of issue 34: a token with only ``config:write`` in workspace a renders hostile
    drafts; workspace b's requests and the health check stay fast; the drafts fail by name."""
    async with toolmesh_serve(tmp_path, "--prompt-render-timeout", "2",
                              extra_env={"TOOLMESH_GATEWAY_TOKEN": ADMIN}) as served:
        writer_a = await create(served, "-w", "a", "-c", "config:write")
        agent_b = await create(served, "-w", "b", "-c", "agent")
        path = served.url + "api/v1/flow/default/service/prompt"
        async with aiohttp.ClientSession() as http:
            async def send(body: dict[str, Any], token: str) -> tuple[int, dict[str, Any]]:
                async with http.post(path, json=body,
                                     headers={"Authorization": f"Bearer {token}"}) as r:
                    return r.status, await r.json()

            async def b() -> None:
                status, body = await send({"operation": "render", "id": "question",
                                           "variables": {"question": "B?"}}, agent_b)
                assert (status, body.get("prompt")) == (200, "B?"), body

            async def health() -> None:
                async with http.get(served.url + "api/v1/health") as r:
                    assert r.status == 200

            await b()
            await health()
            for hostile in (NESTED, "{{ 'x' * 10**10 }}", DOUBLING,
                            "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"):
                draft = asyncio.create_task(send({"operation": "render", "id": "evil",
                                                  "template": {"prompt": hostile}}, writer_a))
                # both at once, for as long as the hostile draft renders
                b_latencies, health_latencies = await asyncio.gather(
                    while_running(draft, b, at_least=10),
                    while_running(draft, health, at_least=10))
                status, body = await draft
                print(f"\n{hostile[:40]!r}: b p99 {p99(b_latencies) * 1000:.1f} ms "
                      f"({len(b_latencies)}), health p99 {p99(health_latencies) * 1000:.1f} ms "
                      f"({len(health_latencies)})")
                assert body["error"]["type"] == "prompt-error", body
                assert body["error"]["message"].startswith("template 'evil' "), body
                assert p99(b_latencies) < P99_BOUND, b_latencies
                assert p99(health_latencies) < P99_BOUND, health_latencies
            # still serving drafts afterwards
            status, body = await send({"operation": "render", "template": {"prompt": "{{ 6*7 }}"}},
                                      writer_a)
            assert (status, body.get("prompt")) == (200, "42"), body
