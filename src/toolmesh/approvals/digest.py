"""The digest an approval is bound to: the tool's name and the exact arguments.

Canonical JSON (keys sorted, no spaces, UTF-8) hashed with SHA-256, so the same call has the
same digest in any process and any language that writes canonical JSON; a call whose
arguments differ in one character needs an approval of its own.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def call_digest(tool: str, arguments: Any) -> str:
    """``sha256:<hex>`` of the call of ``tool`` with ``arguments``."""
    text = json.dumps({"tool": tool, "arguments": arguments}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
