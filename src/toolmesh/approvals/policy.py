"""Which calls wait for a person: the ``approval`` policy of a tool, of its MCP server, the MCP
tool's annotations, and the operator's default — in that order (docs/approvals.md).

* ``always``: every call of the tool waits for a person to approve it;
* ``never``: no call waits;
* not set (or ``auto``): the next source decides. An MCP tool whose server marks it
  ``destructiveHint: true`` asks; one marked ``readOnlyHint: true`` does not; otherwise the
  operator's default (``--approval``, ``never`` unless set) decides.

MCP's own defaults would make every tool without annotations "destructive"; most servers send
none, so an absent hint decides nothing here: a deployment that wants every unmarked tool
approved says ``--approval always``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from toolmesh.errors import ToolmeshError

Policy = Literal["always", "never"]
POLICIES: tuple[str, ...] = get_args(Policy)
#: the spelling of "not set here: the next source decides"
AUTO = "auto"
DEFAULT_POLICY: Policy = "never"


class PolicyError(ToolmeshError):
    """An ``approval`` value that is not a policy."""

    type = "config-error"


def parse_policy(value: Any, *, where: str) -> Policy | None:
    """The policy ``value`` names (``None`` for absent or ``auto``); ``where`` names the item
    in the error for any other value."""
    if value is None or value == AUTO:
        return None
    if value in POLICIES:
        return value  # type: ignore[no-any-return]
    raise PolicyError(f"{where}: 'approval' must be one of {', '.join(POLICIES)} or {AUTO}, "
                      f"not {value!r}")


def required(*, tool: Policy | None = None, server: Policy | None = None,
             annotations: Mapping[str, Any] | None = None,
             default: Policy = DEFAULT_POLICY) -> bool:
    """Whether a call must wait for a person, by the first source that decides."""
    for policy in (tool, server):
        if policy is not None:
            return policy == "always"
    if annotations:
        if annotations.get("destructiveHint") is True:
            return True
        if annotations.get("readOnlyHint") is True:
            return False
    return default == "always"
