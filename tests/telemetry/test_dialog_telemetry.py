"""What one dialog leaves behind, on every bus: its usage in the last message, the metrics it
moved, and — with tracing on — one trace whose spans nest as the calls did."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY

from tests.agent.stack import agent_stack, answer_of
from tests.conftest import Backend
from toolmesh.llm import Rule, ScriptedLLM

FINISH = Rule(r"\nObservation: (?P<obs>.*?)\n\nYour reply", "Thought: done\nFinal Answer: {obs}")
JOKE = 'Thought: a joke is needed\nAction: tell-joke\nArgs: {"topic": "food"}'
PUN = 'Thought: another one\nAction: tell-joke\nArgs: {"topic": "bread"}'
DONE = "Thought: that will do\nFinal Answer: done"


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0



async def test_the_last_message_carries_tokens_and_tool_calls(backend: Backend,
                                                               tmp_path: Path) -> None:
    # two different calls: an identical second call would not be run again (agent/calls.py)
    llm = ScriptedLLM([JOKE, PUN, DONE])
    async with agent_stack(backend, tmp_path, llm) as s:
        await s.load_jokes()
        messages = await s.ask("Two jokes about food, one at a time")
    last = messages[-1]
    assert last["end_of_dialog"] and last["message_type"] == "answer"
    assert last["tool_calls"] == 2
    assert 0 < last["tool_time"] < 10
    # the scripted LLM counts words: three answers, each with tokens in and out
    assert last["in_token"] > 0 and last["out_token"] > 0
    assert all("tool_calls" not in m for m in messages[:-1])


async def test_a_dialog_without_tools_reports_none(backend: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(["Thought: easy\nFinal Answer: 4"])
    async with agent_stack(backend, tmp_path, llm) as s:
        messages = await s.ask("2+2?")
    assert messages[-1]["tool_calls"] == 0 and messages[-1]["tool_time"] == 0


async def test_a_dialog_moves_the_counters(backend: Backend, tmp_path: Path) -> None:
    before = {
        "started": sample("toolmesh_dialogs_started_total"),
        "answered": sample("toolmesh_dialogs_finished_total", outcome="answer"),
        "joke ok": sample("toolmesh_tool_calls_total", tool="tell-joke", type="tool-service",
                          outcome="ok"),
        "unknown": sample("toolmesh_tool_calls_total", tool="", type="",
                          outcome="unknown-tool"),
        "joke timed": sample("toolmesh_tool_call_duration_seconds_count", tool="tell-joke",
                             type="tool-service"),
        "llm ok": sample("toolmesh_llm_calls_total", model="scripted", outcome="ok"),
        "tokens out": sample("toolmesh_llm_tokens_total", model="scripted", direction="out"),
        "steps": sample("toolmesh_dialog_steps_sum"),
    }
    llm = ScriptedLLM([JOKE, 'Thought: hm\nAction: no-such-tool\nArgs: {}', DONE])
    async with agent_stack(backend, tmp_path, llm) as s:
        await s.load_jokes()
        messages = await s.ask("A joke about food")
        served = sample("toolmesh_service_requests_total", service=s.joke_queues[0].split(":")[-1],
                        outcome="ok")
    assert answer_of(messages) == "done"
    assert "there is no tool 'no-such-tool'" in messages[-3]["content"]
    assert sample("toolmesh_dialogs_started_total") == before["started"] + 1
    assert sample("toolmesh_dialogs_finished_total", outcome="answer") == before["answered"] + 1
    assert sample("toolmesh_tool_calls_total", tool="tell-joke", type="tool-service",
                  outcome="ok") == before["joke ok"] + 1
    assert sample("toolmesh_tool_call_duration_seconds_count", tool="tell-joke",
                  type="tool-service") == before["joke timed"] + 1
    # the name the LLM made up is counted, but not as a label of its own
    assert sample("toolmesh_tool_calls_total", tool="", type="",
                  outcome="unknown-tool") == before["unknown"] + 1
    assert REGISTRY.get_sample_value("toolmesh_tool_calls_total",
                                     {"tool": "no-such-tool", "type": "", "outcome":
                                      "unknown-tool"}) is None
    assert sample("toolmesh_llm_calls_total", model="scripted", outcome="ok") == \
        before["llm ok"] + 3
    assert sample("toolmesh_llm_tokens_total", model="scripted", direction="out") > \
        before["tokens out"]
    assert sample("toolmesh_dialog_steps_sum") == before["steps"] + 3
    assert served >= 1


async def test_one_dialog_is_one_trace(backend: Backend, tmp_path: Path,
                                       spans: InMemorySpanExporter) -> None:
    llm = ScriptedLLM([JOKE], rules=[FINISH])
    async with agent_stack(backend, tmp_path, llm) as s:
        await s.load_jokes()
        spans.clear()
        await s.ask("A joke about food")
    finished = spans.get_finished_spans()
    dialog = one(finished, "agent dialog")
    trace = [sp for sp in finished if sp.context.trace_id == dialog.context.trace_id]
    by_id = {sp.context.span_id: sp for sp in trace}

    def ancestors(sp: ReadableSpan) -> list[str]:
        names = []
        while sp.parent is not None and sp.parent.span_id in by_id:
            sp = by_id[sp.parent.span_id]
            names.append(sp.name)
        return names

    tool = one(trace, "tool tell-joke")
    assert ancestors(tool)[:2] == ["agent step 1", "agent dialog"]
    joke = one(trace, f"{s.joke_queues[0].split(':')[-1]} handle")
    assert ancestors(joke)[0] == "tool tell-joke"
    llm_spans = [sp for sp in trace if sp.name == "llm completion"]
    assert len(llm_spans) == 2
    for sp in llm_spans:
        chain = ancestors(sp)
        assert chain[0].endswith(" handle") and "agent dialog" in chain
        assert sp.attributes["gen_ai.usage.output_tokens"] > 0
    steps = [sp.name for sp in trace if sp.name.startswith("agent step")]
    assert sorted(steps) == ["agent step 1", "agent step 2"]


def one(spans: object, name: str) -> ReadableSpan:
    found = [sp for sp in spans if sp.name == name]  # type: ignore[attr-defined]
    assert len(found) == 1, f"{name}: {[sp.name for sp in spans]}"  # type: ignore[attr-defined]
    return found[0]
