"""The offline demo model: a scripted LLM that drives one ReAct dialog with the joke tool.

Used by ``toolmesh serve`` when no ``--llm`` is given, so that a fresh machine shows a whole
dialog (thought, tool call, observation, answer) without any model. It is clearly labelled
in its answers; point ``--llm`` at a real OpenAI-compatible server to use a model.
"""

from __future__ import annotations

from toolmesh.llm.scripted import Rule, ScriptedLLM

LABEL = "[offline demo model]"

HELP = ("I am toolmesh's offline demo model: I only know how to call the tell-joke tool. Ask "
        "me for a joke about programming, animals or food (after loading the joke config "
        "items), or start 'toolmesh serve --llm http://HOST:PORT/v1 --model NAME' to use a "
        "real model.")

# Rules are tried in order on the rendered agent-react prompt. The observation rules come
# first: once a step has run, the question is still in the prompt but the dialog must end.
RULES = (
    Rule(r"\nObservation: (?P<observation>Error:.*?)\n\nYour reply",
         f"Thought: {LABEL} The tool failed, so I report that.\n"
         "Final Answer: The joke tool failed: {observation}"),
    Rule(r"\nObservation: (?P<observation>.*?)\n\nYour reply",
         f"Thought: {LABEL} The tell-joke tool answered; I pass its joke on.\n"
         "Final Answer: {observation}"),
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
