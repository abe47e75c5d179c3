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


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def _non_negative(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = -1
        if value < 0:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of 0 or more")
        return value
    return parse


def add_choice(parser: argparse.ArgumentParser) -> None:
    """The flags (module docstring)."""
    method = _env("TOOLMESH_TOOL_SELECTION", "bm25")
    parser.add_argument("--tool-selection", choices=SELECTION_METHODS,
                        default=method if method in SELECTION_METHODS else "bm25",
                        help="how each step picks the tools it shows the model: bm25 (the "
                             "words of the question against each tool's name, description "
                             "and arguments), embeddings (bm25 fused with the LLM server's "
                             "/v1/embeddings, where it has them), off: every tool (env "
                             "TOOLMESH_TOOL_SELECTION; default: %(default)s)")
    parser.add_argument("--tool-budget", type=_non_negative(int), metavar="TOKENS",
                        default=_non_negative(int)(_env("TOOLMESH_TOOL_BUDGET",
                                                        str(DEFAULT_BUDGET))),
                        help="prompt tokens (estimated) the tools of one step may take; "
                             "beyond, the best-matching ones (env TOOLMESH_TOOL_BUDGET; "
                             "default: %(default)s)")
    parser.add_argument("--tool-relevance", type=_non_negative(float), metavar="SHARE",
                        default=_non_negative(float)(_env("TOOLMESH_TOOL_RELEVANCE",
                                                          str(DEFAULT_RELEVANCE))),
                        help="when some tool matches the question's words, show only those "
                             "scoring at least this share of the best; 0: every tool that "
                             "fits the budget (env TOOLMESH_TOOL_RELEVANCE; "
                             "default: %(default)s)")
    find = _env("TOOLMESH_FIND_TOOLS", "auto")
    parser.add_argument("--find-tools", choices=FIND_TOOLS,
                        default=find if find in FIND_TOOLS else "auto",
                        help="offer the find-tools meta-tool when a step leaves tools out: "
                             "auto (to native tool calling only), on, off (env "
                             "TOOLMESH_FIND_TOOLS; default: %(default)s)")
    parser.add_argument("--choice-steps", type=int, choices=(1, 2),
                        default=int(_env("TOOLMESH_CHOICE_STEPS", "1")),
                        help="json tool calling: ask for the tool and its arguments in one "
                             "reply (1) or the tool first, then its arguments (2) (env "
                             "TOOLMESH_CHOICE_STEPS; default: %(default)s)")
    values = _env("TOOLMESH_ARGUMENT_VALUES", "dialog")
    parser.add_argument("--argument-values", choices=("dialog", "any"),
                        default=values if values in ("dialog", "any") else "dialog",
                        help="json tool calling: a free string or number argument must be "
                             "words or a number of the question or a result (dialog), or may "
                             "be anything (any) (env TOOLMESH_ARGUMENT_VALUES; "
                             "default: %(default)s)")
    parser.add_argument("--max-answer-tokens", type=_non_negative(int), metavar="N",
                        default=_non_negative(int)(_env("TOOLMESH_MAX_ANSWER_TOKENS", "0")),
                        help="tokens a final answer may take (a step that calls tools is "
                             "bound by --max-step-tokens); 0: the model's limit (env "
                             "TOOLMESH_MAX_ANSWER_TOKENS; default: %(default)s)")


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
