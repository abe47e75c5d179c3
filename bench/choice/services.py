"""The tool services that announce the benchmark's tools, as a user's service would: one per
set, each tool told apart by its ``tool`` config-param. Run inside ``toolmesh serve``::

    toolmesh serve --tool-service bench.choice.services:BenchTools \\
                   --tool-service bench.choice.services:Distractors
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.choice.distractors import DISTRACTORS
from bench.choice.sets import BENCH_TOOLS, ISSUE_TOOLS, TUNING_TOOLS, ToolSpec
from toolmesh.tools import Argument, ConfigParam, DynamicToolService, Tool, ToolServiceDefinition


def definition(id: str, specs: Sequence[ToolSpec]) -> ToolServiceDefinition:
    """The definition announcing ``specs``."""
    tools = []
    for spec in specs:
        arguments = [Argument(a["name"], a["type"], a["description"],
                              required=bool(a.get("required")),
                              schema={k: v for k, v in a.items()
                                      if k not in ("name", "type", "description", "required")})
                     for a in spec.arguments]
        tools.append(Tool(spec.name, spec.description, arguments=arguments,
                          config={"tool": spec.name}))
    return ToolServiceDefinition(id=id, tools=tools,
                                 config_params=[ConfigParam("tool", required=True)])


class _Service(DynamicToolService):
    specs: Sequence[ToolSpec] = ()

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        spec = next((s for s in self.specs if s.name == config.get("tool")), None)
        if spec is None:
            raise ValueError(f"no tool {config.get('tool')!r} here")
        try:
            return spec.answer(arguments)[0]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"cannot do {spec.name} with {arguments}: {e}") from None


def service(name: str, id: str, specs: Sequence[ToolSpec], doc: str) -> type[_Service]:
    """A tool service class announcing ``specs`` under ``id``."""
    return type(name, (_Service,), {"specs": specs, "definition": definition(id, specs),
                                    "__doc__": doc, "__module__": __name__})


BenchTools = service("BenchTools", "choice-bench", BENCH_TOOLS, "The reported set's tools.")
TuningTools = service("TuningTools", "choice-tuning", TUNING_TOOLS, "The tuning set's tools.")
IssueTools = service("IssueTools", "choice-issue", ISSUE_TOOLS,
                     "Issue 41's kind of tools: weather, currency, word count.")
Distractors = service("Distractors", "choice-distractors", DISTRACTORS,
                      "Tools no question needs.")
