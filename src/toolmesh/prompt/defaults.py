"""The templates toolmesh ships; a config item ``prompt/template.<id>`` (or its alias
``prompt/<id>``) with the same id overrides one. toolmesh ships no system prompt
(:data:`DEFAULT_SYSTEM`): the config item ``prompt/system`` sets one.

``question``
    ``{{question}}`` — the agent's ``text-completion`` tool type asks the LLM through it.

``agent-react``
    The ReAct agent's step prompt. Variables:

    * ``question`` — the user's question (str);
    * ``tools`` — list of ``{"name", "description", "arguments": [{"name", "type",
      "description", "required": bool, "outline"}]}`` (``arguments`` may be empty;
      ``required``, ``outline`` and an argument's ``description`` may be left out). ``outline``
      is the argument's whole schema as indented ``- name (type, constraints) — description``
      lines (agent/outline.py); without it the argument shows as ``- name (type): description``;
    * ``history`` — the steps so far, list of ``{"thought", "action", "arguments": dict,
      "observation"}``;
    * ``context`` — extra text for the LLM, may be empty.

    It asks for TrustGraph's text protocol (the ``react`` strategy), which the agent parses::

        Thought: <reasoning>
        Action: <tool name>
        Args: {"arg": "value"}

    or ``Thought: ...`` followed by ``Final Answer: <answer>``. It is deliberately plain text
    with one short description per format — and no example value a model could copy into a
    call (issue 41) — so that small local models follow it too.

``agent-json``
    The system message of the ``json`` strategy: the tools and how to reply. Variables:
    ``tools`` (as for ``agent-react``, each also with ``parameters``, its arguments' JSON
    Schema, and ``example``, an example of its arguments made of documented values only, or
    none: agent/strategies/examples.py) and ``context``. The question and the steps follow it
    as messages, and the reply is constrained by a JSON Schema; it is worded for small models
    (the tools as plain lines).

``agent-native``
    The system message of the ``native`` strategy; the tools go to the server as functions.
    Variables: ``tools``, ``context``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from toolmesh.prompt.templates import PromptTemplate

#: the system prompt when a workspace has no ``prompt/system`` item: none
DEFAULT_SYSTEM = ""

QUESTION = PromptTemplate(id="question", prompt="{{question}}")

# Tags strip the newline before them ({%-), so each tag costs no blank line in the output;
# Jinja's trim_blocks is not used because config templates are written without it.
AGENT_REACT_PROMPT = """\
Answer the question below. You may use the tools listed here to find information.

Tools:
{%- for tool in tools %}

Tool: {{ tool.name }}
Description: {{ tool.description }}
{%- if tool.arguments is defined and tool.arguments %}
Arguments:
{%- for arg in tool.arguments %}
{%- if arg.outline is defined and arg.outline %}
{{ arg.outline }}
{%- else %}
- {{ arg.name }} ({{ arg.type }})
{%- if arg.required is defined and not arg.required %} (optional){% endif %}
{%- if arg.description is defined and arg.description %}: {{ arg.description }}{% endif %}
{%- endif %}
{%- endfor %}
{%- else %}
Arguments: none
{%- endif %}
{%- else %}
(no tools are available: give the final answer)
{%- endfor %}

Reply in one of these two formats, and nothing else.

To use a tool:
Thought: (your reasoning about what to do next)
Action: (the name of one tool from the list above)
Args: (one JSON object: each argument's name and its value, taken from the question)

To give the answer:
Thought: (your reasoning)
Final Answer: (the answer to the question)

Rules:
- Exactly one action per reply.
- Args is a single JSON object on the Args line(s), with every argument marked required \
and others only when they help; write Args: {} for a tool with no arguments.
- Stop after the Args line(s). Do not write the observation yourself: it will be provided.
- When you know the answer, give the Final Answer.
{%- if context %}

Context:
{{ context }}
{%- endif %}

Question: {{ question }}
{%- if history %}

Previous steps:
{%- for step in history %}

Thought: {{ step.thought }}
Action: {{ step.action }}
Args: {{ step.arguments | tojson }}
Observation: {{ step.observation }}
{%- endfor %}
{%- endif %}

Your reply, starting with "Thought:":
"""

AGENT_REACT = PromptTemplate(id="agent-react", prompt=AGENT_REACT_PROMPT)

# Worded after the function-calling prompts small instruct models were tuned on; measured on
# SmolLM2-135M (docs/tool-calling.md), where it picks the right branch far more often than
# a prompt that shows the JSON itself.
AGENT_JSON_PROMPT = """\
You are an expert in composing functions. You are given a question and a set of possible \
functions.
Based on the question, you will need to make a function/tool call to achieve the purpose.
If none of the functions can be used, answer the question yourself.

You have access to the following tools:
{%- for tool in tools %}
- {{ tool.name }}: {{ tool.description | trim | trim(".") }}.
{%- if tool.arguments %} Arguments: {% for arg in tool.arguments -%}
{{ arg.name }} ({{ arg.type }}{% if arg.required is defined and arg.required %}, required{% endif %})
{%- if arg.description %}: {{ arg.description | trim }}{% endif %}
{%- if not loop.last %}; {% endif %}
{%- endfor %}
{%- endif %}
{%- else %}
(none: answer the question yourself)
{%- endfor %}

Reply with a JSON object: either an action (the name of one of the tools) with its \
arguments, taken from the question, or a final_answer.
{%- set shown = tools | selectattr("example") | list %}
{%- if shown %} For example:
{%- for tool in shown[:3] %}
- to call {{ tool.name }}: {{ {"action": tool.name, "arguments": tool.example} | tojson }}
{%- endfor %}
{%- endif %}
{%- if context %}

{{ context }}
{%- endif %}
"""

AGENT_JSON = PromptTemplate(id="agent-json", prompt=AGENT_JSON_PROMPT)

AGENT_NATIVE_PROMPT = """\
You are a helpful assistant. Call the tools you are given when they help answer the \
question; when you know the answer, give it.
{%- if context %}

{{ context }}
{%- endif %}
"""

AGENT_NATIVE = PromptTemplate(id="agent-native", prompt=AGENT_NATIVE_PROMPT)

#: template id -> the template toolmesh ships
DEFAULT_TEMPLATES: Mapping[str, PromptTemplate] = MappingProxyType(
    {t.id: t for t in (QUESTION, AGENT_REACT, AGENT_JSON, AGENT_NATIVE)})
