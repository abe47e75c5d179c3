"""The action the LLM chose, as a message of the dialog: ``tool-call``.

Sent when a step's reply names a tool, before the tool runs (so its progress and its
observation follow it)::

    {"message_type": "tool-call", "content": "count-words {\\"text\\": \\"the quick brown fox\\"}",
     "tool": "count-words", "arguments": {"text": "the quick brown fox"},
     "end_of_message": true, "end_of_dialog": false, "message_id": "…", "error": null}

It is toolmesh's own type, like ``progress``, and for the same reason not TrustGraph's
``action``: TrustGraph's client (trustgraph-cli 2.11.1, ``api/socket_client.py``) turns an
``action`` message into a *thought*, so ``tg-invoke-agent -v`` would print the tool call inside
the 🤔 block. A type it does not know becomes an empty chunk that prints nothing, and the
thought before it and the observation after it are printed as before.
"""

from __future__ import annotations

import json
from typing import Any

from toolmesh.schema.agent import message, new_message_id


def describe_call(tool: str, arguments: Any) -> str:
    """``tool {"arg": "value"}``: one line, whatever the arguments hold (JSON escapes their
    line breaks)."""
    return f"{tool} {json.dumps(arguments, ensure_ascii=False)}"


def tool_call_message(tool: str, arguments: Any) -> dict[str, Any]:
    """The ``tool-call`` message for calling ``tool`` with ``arguments``."""
    return message("tool-call", describe_call(tool, arguments), message_id=new_message_id(),
                   tool=tool, arguments=arguments)
