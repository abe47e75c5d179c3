"""The trace context an MCP server receives: ``traceparent`` in the ``tools/call`` request's
``_meta``, beside the ``progressToken`` — through the whole deployment, and never when tracing
is off.

A dialog goes to the gateway of real ``toolmesh run PART`` processes (as in
:mod:`tests.telemetry.test_traces_across_processes`, with the mcp-tool service instead of the
joke one); the scripted LLM calls ``show-meta``, an MCP tool on a server written with the SDK
(this module, run as a child process: ``python -m tests.telemetry.test_mcp_traceparent``)
that answers with the ``_meta`` it was sent, as it came on the wire. The agent's answer is
that observation, so the test reads what the server saw without any side channel. The
mcp-tool process exports its spans to an :class:`OtlpReceiver` — in a process of its own, the
MCP SDK traces with toolmesh's provider as in production (its own "MCP send" span then sits
between the call's span and the server).

Also, in process on the memory bus: a sampling request a server makes during a call belongs to
that call's trace, not to the trace of the call that opened the session (the session's task
runs in a context of its own, and the sampling span continues the traceparent the server's
request carries).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import Context, MCPServer
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.mcp.callback_servers import running_http_server
from tests.mcp.callback_stack import callback_stack
from tests.mcp.servers import ServerProcess, running_server, serve_asgi
from tests.telemetry.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.telemetry.test_traces_across_processes import (
    AGENT,
    GATEWAY,
    OBSERVATION,
    SOON,
    Trace,
    deployment,
    has_all,
    new_traceparent,
    otlp_env,
)
from toolmesh.llm import ScriptedLLM
from toolmesh.telemetry import tracing

MODULE = "tests.telemetry.test_mcp_traceparent"
PARTS = ("config", "text-completion", "prompt", "agent", "mcp-tool", "gateway")
MCP = "toolmesh-mcp-tool"
#: the MCP tool and the agent's tool that calls it
REMOTE, TOOL = "meta", "show-meta"
SCRIPT = [
    {"match": OBSERVATION, "response": "Thought: done\nFinal Answer: {observation}"},
    {"match": r"\nQuestion: ", "response": f"Thought: look\nAction: {TOOL}\nArgs: {{}}"},
]
TRACEPARENT = re.compile(r"00-(?P<trace>[0-9a-f]{32})-(?P<parent>[0-9a-f]{16})-[0-9a-f]{2}")


# -- the MCP server (runs in the child process) -----------------------------------------------

def build_server() -> MCPServer:
    mcp = MCPServer("meta-echo", log_level="WARNING")

    @mcp.tool(name=REMOTE)
    def meta(ctx: Context) -> str:
        """The ``_meta`` of this call, as JSON (``{}`` when it had none)."""
        # the raw params, not ctx.request_context.meta: that is the SDK's parsed copy, whose
        # keys are its own (progress_token), not what the client put on the wire
        return json.dumps((ctx.request_context.params or {}).get("_meta") or {}, sort_keys=True)

    return mcp


def main() -> None:
    """``--transport streamable-http --port N --name NAME``, as :func:`running_server` runs
    its servers (only streamable HTTP here)."""
    parser = argparse.ArgumentParser(description="an MCP server that echoes a call's _meta")
    parser.add_argument("--transport", choices=["streamable-http"], default="streamable-http")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--name", default="meta-echo")
    args = parser.parse_args()
    asyncio.run(serve_asgi(build_server().streamable_http_app(), args.port))


# -- the tests (run in the test process) ------------------------------------------------------

@pytest.fixture
async def server() -> AsyncIterator[ServerProcess]:
    async with running_server(name="meta-echo", module=MODULE) as s:
        yield s


def items(server: ServerProcess) -> dict[tuple[str, str], Any]:
    return {("mcp", REMOTE): {"url": server.url, "remote-name": REMOTE},
            ("tool", TOOL): {"type": "mcp-tool", "name": TOOL, "mcp-tool": REMOTE,
                             "description": "Show what the MCP server was sent"}}


def sent_meta(answer: dict[str, Any]) -> dict[str, Any]:
    """The ``_meta`` the server saw: the dialog's answer is the tool's observation."""
    assert answer.get("message_type") == "answer", answer
    meta = json.loads(answer["answer"])
    assert isinstance(meta, dict), answer
    return meta


@pytest.mark.rabbitmq
async def test_the_server_gets_the_calls_traceparent_with_its_progress_token(
        tmp_path: Path, server: ServerProcess) -> None:
    async with OtlpReceiver() as receiver, deployment(
            tmp_path, script=SCRIPT, items=items(server), otel=otlp_env(receiver),
            tools_line=TOOL, parts=PARTS) as d:
        header, trace_id, client_span = new_traceparent()
        status, answer = await d.ask("What did the server get?", traceparent=header)
        assert status == 200, answer
        meta = sent_meta(answer)
        # the agent's MCP tools go through the mcp-tool service, which always asks for
        # progress: the SDK's progressToken and our traceparent share the _meta
        assert isinstance(meta.get("progressToken"), (int, str)), meta
        sent = TRACEPARENT.fullmatch(meta.get("traceparent", ""))
        assert sent is not None, meta
        assert sent["trace"] == trace_id, (meta, trace_id)
        parent_id = sent["parent"]

        # each process exports on its own clock: wait for every span the checks read
        lineage = [(MCP, f"mcp tools/call {REMOTE}"), (MCP, "mcp-tool:default handle"),
                   (AGENT, f"tool {TOOL}"), (AGENT, "agent step 1"), (AGENT, "agent dialog"),
                   (AGENT, "agent:default handle"), (GATEWAY, "agent request")]
        spans_read = has_all(trace_id, dict.fromkeys(lineage, 1))

        def arrived(spans: Sequence[ReceivedSpan]) -> bool:
            return spans_read(spans) and any(s.span_id == parent_id for s in spans)

        await receiver.wait_for(arrived, timeout=SOON)
        trace = Trace(receiver.trace(trace_id))
        call = trace.one(f"mcp tools/call {REMOTE}", MCP)
        parent = trace.by_id[parent_id]
        # The server's parent is the call's span, or — as with mcp 2.x, whose dispatcher makes
        # a client span of its own and writes its traceparent over ours — that span's child.
        if parent is not call:
            assert (parent.service, parent.scope, parent.name) == (
                MCP, "mcp-python-sdk", f"MCP send tools/call {REMOTE}"), trace
            assert trace.ancestors(parent)[0] is call, trace
        # and the call hangs from the dialog's step, across the bus, up to the client's span
        assert trace.lineage(call) == lineage[1:], trace
        assert trace.ancestors(call)[-1].parent_span_id == client_span
        assert receiver.refused == []


@pytest.mark.rabbitmq
async def test_with_tracing_off_the_server_gets_no_trace_context(
        tmp_path: Path, server: ServerProcess) -> None:
    async with deployment(tmp_path, script=SCRIPT, items=items(server), otel={},
                          tools_line=TOOL, parts=PARTS) as d:
        header, trace_id, _ = new_traceparent()  # the gateway, not tracing, passes it on to no one
        status, answer = await d.ask("What did the server get?", traceparent=header)
        assert status == 200, answer
        meta = sent_meta(answer)
    assert isinstance(meta.get("progressToken"), (int, str)), meta
    assert "traceparent" not in meta and "tracestate" not in meta, meta
    assert trace_id not in json.dumps(meta)


# -- sampling, in process ---------------------------------------------------------------------


async def test_sampling_during_a_call_is_in_that_calls_trace(
        tmp_path: Path, spans: InMemorySpanExporter) -> None:
    # Only toolmesh's own spans are compared, by trace id: the MCP SDK's spans go to the
    # process's global provider, which tracing.enable does not set.
    async with callback_stack(tmp_path, ScriptedLLM(default="in short")) as s, \
            running_http_server() as callbacks:
        await s.put({"summarize": {"url": callbacks.url, "remote-name": "summarize",
                                   "sampling": True}})
        traces = []
        for n in range(2):  # the first call opens the session, the second reuses it
            with tracing.span(f"dialog {n}") as dialog:
                assert dialog is not None
                text = await s.client.invoke("summarize", {"text": "a long text"}, timeout=20)
            assert "in short" in text
            traces.append(dialog.get_span_context().trace_id)
    completions = [sp for sp in spans.get_finished_spans() if sp.name == "llm completion"]
    assert len(completions) == 2
    assert [sp.context.trace_id for sp in completions] == traces


if __name__ == "__main__":
    main()
