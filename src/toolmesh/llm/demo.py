"""The offline demo model: a scripted LLM that drives one ReAct dialog with a tool.

Used by ``toolmesh serve`` when no ``--llm`` is given, so that a fresh machine shows a whole
dialog (thought, tool call, observation, answer) without any model. It knows two things:
asked for a joke, it calls ``tell-joke``; told ``use TOOL with {JSON}`` it calls that tool with
those arguments — any tool, yours too, so you can watch the agent call a tool you just wrote.
It is clearly labelled in its answers; point ``--llm`` at a real OpenAI-compatible server to
use a model.
"""

from __future__ import annotations

from toolmesh.llm.scripted import Rule, ScriptedLLM

LABEL = "[offline demo model]"

HELP = ("I am toolmesh's offline demo model: I can call the tell-joke tool (ask me for a joke "
        "about programming, animals or food), or any tool you name as 'use TOOL with "
        "{\"argument\": \"value\"}'. Start 'toolmesh serve --llm http://HOST:PORT/v1 --model "
        "NAME' to use a real model.")

#: ``use TOOL with {...}`` (or ``call``), where TOOL is the named group ``tool`` or a
#: back-reference to it; the arguments are the JSON object that ends the line
_USE = r"\b(?:[Uu]se|[Cc]all) {tool} with (?P<args>\{{[^\n]*\}})"
#: the last step: the tool it used and what it observed
_STEP = r"\nAction: (?P<tool>[^\n]*)\nArgs: [^\n]*\nObservation: (?P<observation>{what}.*?)\n\nYour reply"

# Rules are tried in order on the rendered agent-react prompt. The observation rules come
# first: once a step has run, the question is still in the prompt but the dialog must end.
RULES = (
    Rule(_STEP.format(what="Error:"),
         f"Thought: {LABEL} The tool failed, so I report that.\n"
         "Final Answer: The {tool} tool failed: {observation}"),
    Rule(_STEP.format(what=""),
         f"Thought: {LABEL} The {{tool}} tool answered; I pass its answer on.\n"
         "Final Answer: {observation}"),
    # the tool must be in the prompt's list: the agent offers it
    Rule(r"\nTool: (?P<tool>[\w.-]+)\n.*\nQuestion: [^\n]*?" + _USE.format(tool="(?P=tool)"),
         f"Thought: {LABEL} I was asked to use {{tool}}; I call it with the arguments given.\n"
         "Action: {tool}\nArgs: {args}"),
    Rule(r"\nQuestion: [^\n]*?" + _USE.format(tool=r"(?P<tool>[\w.-]+)"),
         f"Thought: {LABEL} I was asked to use {{tool}}, but it is not among my tools.\n"
         "Final Answer: The tool {tool} is not offered to me: `toolmesh tools` lists the "
         "tools and says why one is not offered."),
    Rule(r"Tool: tell-joke\n.*\nQuestion: [^\n]*?\bjoke\b[^\n]*?\b(?:about|on) "
         r"(?:an? |the )?(?P<topic>[\w-]+)",
         f"Thought: {LABEL} The user wants a joke about {{topic}}; the tell-joke tool tells "
         "jokes.\nAction: tell-joke\nArgs: {\"topic\": \"{topic}\"}"),
    Rule(r"Tool: tell-joke\n.*\nQuestion: [^\n]*\bjoke",
         f"Thought: {LABEL} The user wants a joke; the tell-joke tool tells jokes.\n"
         "Action: tell-joke\nArgs: {\"topic\": \"programming\"}"),
)


def demo_llm() -> ScriptedLLM:
    """A fresh offline demo model."""
    return ScriptedLLM(rules=RULES, default=f"Thought: {LABEL} I cannot help with that.\n"
                                            f"Final Answer: {HELP}",
                       name="offline demo model (scripted; no real LLM)")
