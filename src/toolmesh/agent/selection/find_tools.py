"""``find-tools``: the model searches the tool catalogue in its own words.

When a step shows fewer tools than it could (:mod:`.selector`), it also shows this one. A
call searches every tool the dialog may use (BM25, as selection does) and answers with the
best matches — name, description, arguments — and from the next step on those tools are shown
(the search is part of the dialog: selection reads it back from the transcript). Anthropic's
tool search tool and LlamaIndex's tool retrieval give models the same way out of a long
catalogue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolmesh.agent.arguments import Argument
from toolmesh.agent.selection.catalogue import Catalogue
from toolmesh.agent.selection.selector import found
from toolmesh.agent.tools import Call, Tool, ToolInfo

#: the meta-tool's name (a configured tool of that name takes precedence: it is not shown)
FIND_TOOLS = "find-tools"

INFO = ToolInfo(
    key=FIND_TOOLS, name=FIND_TOOLS, type="find-tools",
    description="Search for more tools: describe what the tool you need does, in a few "
                "words. The tools found can be called from the next step on",
    arguments=(Argument(name="query", type="string", required=True,
                        description="what the tool you need does, e.g. convert currency"),))


class FindTools(Tool):
    """The meta-tool over ``tools`` (every tool the dialog may use, by name)."""

    def __init__(self, tools: Mapping[str, Tool], catalogue: Catalogue) -> None:
        super().__init__(INFO)
        self._tools = tools
        self._catalogue = catalogue

    def needs_approval(self, default: Any) -> bool:
        return False  # it only reads the catalogue

    async def invoke(self, arguments: dict[str, Any], call: Call) -> str:
        query = str(arguments.get("query") or "").strip()
        names = found(self._catalogue, query, sorted(self._tools))
        if not names:
            return (f"No tool matches {query!r}. Try other words for what the tool does, or "
                    "answer with what you know.")
        lines = [f"Found {len(names)} tool(s) for {query!r}; you can call them now:"]
        for name in names:
            tool = self._tools[name]
            line = f"- {name}: {tool.info.description}"
            if tool.arguments:
                line += " Arguments: " + "; ".join(
                    f"{a.name} ({a.type}{', required' if a.required else ''})"
                    + (f": {a.description}" if a.description else "") for a in tool.arguments)
            lines.append(line)
        return "\n".join(lines)
