"""What a dialog did besides talking to the LLM: its steps and tool calls, for its last
message and the metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(kw_only=True)
class DialogTally:
    """Counts kept over one dialog."""

    #: LLM turns taken
    steps: int = 0
    #: tool calls that ran (refused arguments and unknown tools never ran: not counted)
    tool_calls: int = 0
    #: seconds spent in those calls, summed
    tool_time: float = 0.0

    def tool_ran(self, seconds: float) -> None:
        self.tool_calls += 1
        self.tool_time += seconds

    def wire(self) -> dict[str, Any]:
        """The fields the dialog's last message carries: ``tool_calls`` and ``tool_time``
        (seconds, to the microsecond: calls to a service on the memory bus take well under a
        millisecond, and two of them must not add up to 0)."""
        return {"tool_calls": self.tool_calls, "tool_time": round(self.tool_time, 6)}
