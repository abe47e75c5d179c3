"""Flow ids: which names can name a flow (they become part of queue names on every broker)."""

from __future__ import annotations

import re

DEFAULT_FLOW = "default"

FLOW_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
FLOW_ID_RULE = ("a flow id is 1 to 64 letters, digits, '.', '_' or '-', starting with a "
                "letter or digit")


def valid_flow_id(flow: str) -> bool:
    """True if ``flow`` can name a flow (and so a queue)."""
    return FLOW_ID.fullmatch(flow) is not None
