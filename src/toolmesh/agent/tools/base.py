"""The tool seam: what the agent calls, built from one ``tool`` config item."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolmesh.agent.arguments import Argument, arguments_from_config, check_arguments
from toolmesh.approvals.policy import Policy, PolicyError, parse_policy, required
from toolmesh.errors import ToolmeshError
from toolmesh.mcp.progress import Progress


class ToolError(ToolmeshError):
    """A tool failed; the agent shows the LLM ``Error: <message>`` and goes on."""

    type = "tool-error"


class ToolBuildError(ToolmeshError):
    """A tool config item cannot be turned into a tool (missing service, missing param...)."""

    type = "config-error"


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """What one invocation carries besides the arguments."""

    user: str
    timeout: float
    #: the most the call may take if the tool reports progress (each report extends
    #: ``timeout``); ``None``: just ``timeout``
    max_timeout: float | None = None
    #: where the tool's progress reports go (the dialog's stream); ``None``: nobody listens
    progress: Callable[[Progress], Awaitable[None]] | None = None
    #: the call's idempotency key: the same on every attempt of this one call (a dialog
    #: taken up again after a crash makes a call in flight again), so a tool that acts on
    #: the world can do it once (docs/dialogs.md); ``None``: not a dialog's call
    key: str | None = None
    #: where a question of the tool's server for the person goes (an MCP server's
    #: elicitation, :mod:`toolmesh.mcp.elicitation`); ``None``: nobody can be asked
    ask: Callable[[dict[str, Any]], Awaitable[None]] | None = None
    #: where the pieces of a streamed answer go as they come (a caller outside a dialog
    #: shows them as progress: :mod:`toolmesh.agent.tool_calls`); ``None``: only the whole
    parts: Callable[[str], Awaitable[None]] | None = None
    #: the toolmesh identity the dialog is for: an MCP server that signs each person in
    #: uses theirs (:mod:`toolmesh.mcp.signin`); ``None``: not known
    actor: str | None = None


@dataclass(frozen=True, kw_only=True)
class ToolInfo:
    """The parts of a tool config item every tool type shares."""

    key: str
    name: str
    description: str
    #: the item's ``type`` (for status listings; the builder was picked by it)
    type: str = ""
    arguments: tuple[Argument, ...] = ()
    group: tuple[str, ...] = ("default",)
    applicable_states: tuple[str, ...] = ("*",)
    state: str | None = None
    #: who must approve its calls (``None``: the operator's default decides)
    approval: Policy | None = None

    @classmethod
    def from_config(cls, key: str, config: Mapping[str, Any], *,
                    arguments: tuple[Argument, ...] | None = None) -> ToolInfo:
        return cls(
            key=key, name=str(config["name"]), description=str(config.get("description") or ""),
            type=str(config.get("type") or ""),
            arguments=arguments if arguments is not None else arguments_from_config(config.get("arguments")),
            group=tuple(config.get("group") or ("default",)),
            applicable_states=tuple(config.get("applicable-states") or ("*",)),
            state=config.get("state") or None,
            approval=_policy(key, config))


def _policy(key: str, config: Mapping[str, Any]) -> Policy | None:
    try:
        return parse_policy(config.get("approval"), where=f"tool/{key}")
    except PolicyError as e:
        raise ToolBuildError(e.message) from e


class Tool(ABC):
    """A tool the agent can offer: its description for the LLM, and how to call it."""

    #: why the tool cannot work now (its server lacks it, say), or None; a tool with a reason
    #: is not offered. Set by :meth:`prepare`, so it is known before each step's offer.
    unavailable: str | None = None

    def __init__(self, info: ToolInfo) -> None:
        self.info = info

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def arguments(self) -> tuple[Argument, ...]:
        return self.info.arguments

    async def prepare(self) -> None:
        """Called before the tool is offered in a step (e.g. to learn its schema); cheap
        when there is nothing to do."""

    def needs_approval(self, default: Policy) -> bool:
        """Whether a call of this tool waits for a person (:mod:`toolmesh.approvals.policy`;
        ``default``: the operator's)."""
        return required(tool=self.info.approval, default=default)

    def check(self, arguments: Any) -> list[str]:
        """Every problem with ``arguments`` (empty when the call may go ahead): against the
        declared arguments; a type with a schema (MCP) checks against it too."""
        return check_arguments(arguments, self.info.arguments)

    @abstractmethod
    async def invoke(self, arguments: dict[str, Any], call: Call) -> str:
        """The observation for one call; raise :class:`ToolError` (or RequestError) on failure."""

    def parameters(self) -> dict[str, Any]:
        """The JSON Schema of the tool's arguments, each with its description: what a model
        is shown for a function call (``native``) or a constrained step (``json``)."""
        properties: dict[str, Any] = {}
        for argument in self.arguments:
            schema = dict(argument.value_schema)
            if argument.description:
                schema["description"] = argument.description
            properties[argument.name] = schema
        required = [a.name for a in self.arguments if a.required]
        return {"type": "object", "properties": properties,
                **({"required": required} if required else {})}

    def describe(self) -> dict[str, Any]:
        """The tool as the prompt template sees it."""
        return {"name": self.info.name, "description": self.info.description,
                "arguments": [a.to_prompt() for a in self.arguments]}
