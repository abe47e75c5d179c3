"""How the agent gets tool calls out of a model: ``native`` tool calls, ``json`` steps
constrained by a schema, or TrustGraph's ``react`` text protocol (docs/tool-calling.md).

::

    from toolmesh.agent.strategies import strategy_for
    strategy = strategy_for("json")
    decision = await strategy.step(context)
"""

from toolmesh.agent.strategies.base import (
    LLM,
    WRAP_NOTES,
    Answer,
    CallRequest,
    Calls,
    Decision,
    StepContext,
    Strategy,
    Unusable,
    Wrap,
)
from toolmesh.agent.strategies.json_steps import JsonSteps
from toolmesh.agent.strategies.native import NativeCalls
from toolmesh.agent.strategies.react_text import ReactText

STRATEGIES: dict[str, Strategy] = {"native": NativeCalls(), "json": JsonSteps(),
                                   "react": ReactText()}


def strategy_for(name: str) -> Strategy:
    """The strategy called ``name`` (``native``, ``json`` or ``react``)."""
    return STRATEGIES[name]


__all__ = ["LLM", "STRATEGIES", "WRAP_NOTES", "Answer", "CallRequest", "Calls", "Decision",
           "StepContext", "Strategy", "Unusable", "Wrap", "strategy_for"]
