"""``text-completion`` and ``prompt`` tools: the LLM through the prompt service."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolmesh.agent.arguments import Argument
from toolmesh.agent.tools.base import Call, Tool, ToolBuildError, ToolInfo
from toolmesh.agent.tools.context import BuildContext

QUESTION = (Argument(name="question", type="string", required=True,
                     description="The question or instruction for the language model"),)


class PromptTool(Tool):
    """Renders a prompt template with the arguments and returns the LLM's answer."""

    def __init__(self, info: ToolInfo, prompts: Any, template: str, *,
                 workspace: str | None = None) -> None:
        super().__init__(info)
        self.prompts = prompts
        self.template = template
        self.workspace = workspace  # of the tool item: its templates are that workspace's

    async def invoke(self, arguments: dict[str, Any], call: Call) -> str:
        return str(await self.prompts.render_and_complete(self.template, arguments,
                                                          timeout=call.timeout,
                                                          workspace=self.workspace))


def _prompts(key: str, context: BuildContext) -> Any:
    prompts = context.services.get("prompt")
    if prompts is None:
        raise ToolBuildError(f"tool/{key} needs the prompt service, which this agent has no "
                             "client for")
    return prompts


async def build_text_completion(key: str, config: Mapping[str, Any], context: BuildContext) -> Tool:
    # The argument list is fixed (TrustGraph's): the LLM always passes one question.
    info = ToolInfo.from_config(key, config, arguments=QUESTION)
    return PromptTool(info, _prompts(key, context), "question", workspace=context.workspace)


async def build_prompt(key: str, config: Mapping[str, Any], context: BuildContext) -> Tool:
    return PromptTool(ToolInfo.from_config(key, config), _prompts(key, context),
                      str(config["template"]), workspace=context.workspace)
