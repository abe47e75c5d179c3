"""The agent's flags for how a step's tools are chosen and its reply bounded
(docs/tool-calling.md): tool selection, ``find-tools``, one- or two-step ``json`` replies,
arguments held to the dialog, and the answer's own token bound.

Kept apart from :mod:`toolmesh.cli.options` (which holds the flags every part shares); the
values are read here and turned into the agent's options by :func:`choice_options`, without
importing the agent (every command builds its parser, and most never run an agent).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

#: toolmesh.agent.selection's methods and defaults, named here so that the parser does not
#: import the agent (tests/cli checks they agree)
SELECTION_METHODS = ("bm25", "embeddings", "off")
DEFAULT_BUDGET = 600
DEFAULT_RELEVANCE = 0.5
FIND_TOOLS = ("auto", "on", "off")


def _number(kind: type[int] | type[float], env: str) -> Any:
    """An argparse type: a number of 0 or more. Defaults come from ``env`` as text, so that
    argparse checks them only when the flag is not given, with a message that names both."""
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = -1
        if value < 0:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} of 0 or more "
                                             f"(the flag, or {env})")
        return value
    parse.__name__ = kind.__name__
    return parse


def _one_of(choices: tuple[str, ...], env: str) -> Any:
    """An argparse type: one of ``choices`` (checked as :func:`_number` checks)."""
    def parse(text: str) -> str:
        if text not in choices:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(choices)} "
                                             f"(the flag, or {env})")
        return text
    return parse


def _option(parser: argparse.ArgumentParser, flag: str, *, env: str, default: str,
            type: Any, help: str, **extra: Any) -> None:  # noqa: A002
    """A flag whose default is ``env`` (when set and not empty) or ``default``."""
    parser.add_argument(flag, type=type, default=os.environ.get(env) or default,
                        help=f"{help} (env {env}; default: {default})", **extra)


def add_choice(parser: argparse.ArgumentParser) -> None:
    """The flags (module docstring)."""
    env = "TOOLMESH_TOOL_SELECTION"
    _option(parser, "--tool-selection", env=env, default="bm25",
            type=_one_of(SELECTION_METHODS, env), metavar="{" + ",".join(SELECTION_METHODS) + "}",
            help="how each step picks the tools it shows the model: bm25 (the words of the "
                 "question against each tool's name, description and arguments), embeddings "
                 "(bm25 fused with the LLM server's /v1/embeddings, where it has them), off: "
                 "every tool")
    env = "TOOLMESH_TOOL_BUDGET"
    _option(parser, "--tool-budget", env=env, default=str(DEFAULT_BUDGET),
            type=_number(int, env), metavar="TOKENS",
            help="prompt tokens (estimated) the tools of one step may take; beyond, the "
                 "best-matching ones")
    env = "TOOLMESH_TOOL_RELEVANCE"
    _option(parser, "--tool-relevance", env=env, default=str(DEFAULT_RELEVANCE),
            type=_number(float, env), metavar="SHARE",
            help="when some tool matches the question's words, show only those scoring at "
                 "least this share of the best; 0: every tool that fits the budget")
    env = "TOOLMESH_FIND_TOOLS"
    _option(parser, "--find-tools", env=env, default="auto", type=_one_of(FIND_TOOLS, env),
            metavar="{" + ",".join(FIND_TOOLS) + "}",
            help="offer the find-tools meta-tool when a step leaves tools out: auto (to "
                 "native tool calling only), on, off")
    env = "TOOLMESH_CHOICE_STEPS"
    steps = _one_of(("1", "2"), env)
    _option(parser, "--choice-steps", env=env, default="1", type=lambda t: int(steps(t)),
            metavar="{1,2}",
            help="json tool calling: ask for the tool and its arguments in one reply (1) or "
                 "the tool first, then its arguments (2)")
    env = "TOOLMESH_ARGUMENT_VALUES"
    _option(parser, "--argument-values", env=env, default="dialog",
            type=_one_of(("dialog", "any"), env), metavar="{dialog,any}",
            help="json tool calling: a free string or number argument must be words or a "
                 "number of the question or a result (dialog), or may be anything (any)")
    env = "TOOLMESH_MAX_ANSWER_TOKENS"
    _option(parser, "--max-answer-tokens", env=env, default="0", type=_number(int, env),
            metavar="N",
            help="tokens a final answer may take (a step that calls tools is bound by "
                 "--max-step-tokens); 0: the model's limit")


def choice_options(args: argparse.Namespace) -> dict[str, Any]:
    """The agent options (fields of :class:`toolmesh.agent.loop.AgentOptions`) the flags
    give."""
    from toolmesh.agent.selection import SelectionOptions

    return {"selection": SelectionOptions(method=args.tool_selection, budget=args.tool_budget,
                                          relevance=args.tool_relevance,
                                          find_tools=args.find_tools),
            "choice_steps": args.choice_steps,
            "ground_arguments": args.argument_values == "dialog",
            "max_answer_tokens": args.max_answer_tokens}
