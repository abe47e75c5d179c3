"""The real trustgraph-cli's status commands against a running `toolmesh serve`:
`tg-list-models`, `tg-show-flow-state` and `tg-verify-system-status`.

Each asks what TrustGraph's gateway answers (a text-completion ``list-models``, a flow's
``blueprint-name``, ``/api/metrics/query``, the flow blueprints, the library, the Workbench);
toolmesh answers from what it has, and what it lacks (a library) is honestly empty. The
processor count is the services toolmesh really runs: the CLI's default minimum of 15 (a
TrustGraph deployment's size) is not met, and toolmesh does not pretend it is.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.test_trustgraph_cli_llm import tg_run
from tests.forkserver import spawn_script
from tests.servers import Served, serving

#: services every `toolmesh serve` runs (each a TrustGraph "processor")
CORE = {"config", "agent", "prompt", "text-completion", "mcp-tool", "joke"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server for the module's tests: they only read."""
    with serving(tmp_path_factory.mktemp("status")) as s:
        yield s


async def query(served: Served, expression: str) -> tuple[int, dict[str, object]]:
    import aiohttp

    async with aiohttp.ClientSession() as http, http.get(
            served.url + "api/metrics/query", params={"query": expression}) as response:
        return response.status, await response.json()


async def test_tg_list_models_lists_the_model_the_llm_service_answers_with(
        tg_bin: Path, served: Served) -> None:
    out, _ = await tg_run(tg_bin, "tg-list-models", "-u", served.url, "-j")
    assert json.loads(out) == [{"id": "scripted", "owned_by": "toolmesh",
                                "description": "answers from a script (for tests and demos)"}]
    out, _ = await tg_run(tg_bin, "tg-list-models", "-u", served.url)
    assert out == "scripted  [toolmesh]\n"


async def test_tg_show_flow_state_shows_the_running_services_of_the_flow(
        tg_bin: Path, served: Served) -> None:
    out, _ = await tg_run(tg_bin, "tg-show-flow-state", "-u", served.url,
                          "-m", served.url + "api/metrics")
    flow, blueprint = out.split("Blueprint ")
    running = {line.split()[1] for line in flow.splitlines() if line.startswith("- ")}
    assert {"agent", "prompt", "text-completion", "mcp-tool"} <= running, out
    assert all(line.endswith("\U0001f49a") for line in flow.splitlines() if line.startswith("- "))
    assert blueprint.startswith("toolmesh\n"), out


async def test_the_metrics_query_answers_selectors_and_refuses_the_rest(served: Served) -> None:
    status, body = await query(served, 'consumer_state{consumer_state="running",flow=~"def.*"}')
    assert status == 200 and body["status"] == "success", body
    result = body["data"]["result"]  # type: ignore[index]
    assert {m["metric"]["processor"] for m in result} >= {"agent", "prompt"}
    assert all(m["value"][1] in ("0", "1") for m in result)
    status, body = await query(served, "rate(processor_info[5m])")
    assert status == 400 and body["errorType"] == "bad_data", body


async def test_tg_verify_system_status_passes_every_check(tg_bin: Path, served: Served) -> None:
    status, body = await query(served, "processor_info")
    processors = {m["metric"]["processor"] for m in body["data"]["result"]}  # type: ignore[index]
    assert status == 200 and CORE <= processors, body
    common = ["--ui-url", served.url, "--global-timeout", "20", "--retry-delay", "1"]
    out, _ = await tg_run(tg_bin, "tg-verify-system-status", *common,
                          "--min-processors", str(len(processors)))
    assert "Checks passed: 7/7" in out and "Library responding (0 document(s))" in out, out

    # one processor more than toolmesh runs: the check fails, it is not made to pass
    proc = await spawn_script(
        tg_bin / "tg-verify-system-status", "--ui-url", served.url, "--global-timeout", "1",
        "--retry-delay", "1", "--min-processors", str(len(processors) + 1),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out_bytes, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1, out_bytes.decode()
    assert "Checks failed: 1/7" in out_bytes.decode()
