"""Calls that wait for a person: approval policies, approval and elicitation requests, their
answers (docs/approvals.md).

One way in: the agent makes an :class:`ApprovalGate` and serves an :class:`ApprovalsService`;
its loop asks through :mod:`toolmesh.agent.approving`, with the policy of
:func:`required` and the digest of :func:`call_digest`.
"""

from __future__ import annotations

from toolmesh.approvals.digest import call_digest
from toolmesh.approvals.gate import APPROVALS_NOTIFY_QUEUE, ApprovalGate
from toolmesh.approvals.policy import (
    DEFAULT_POLICY,
    POLICIES,
    Policy,
    PolicyError,
    parse_policy,
    required,
)
from toolmesh.approvals.service import (
    APPROVALS_REQUEST_QUEUE,
    APPROVALS_RESPONSE_QUEUE,
    ApprovalsService,
)

__all__ = ["APPROVALS_NOTIFY_QUEUE", "APPROVALS_REQUEST_QUEUE", "APPROVALS_RESPONSE_QUEUE",
           "DEFAULT_POLICY", "POLICIES", "ApprovalGate", "ApprovalsService", "Policy",
           "PolicyError", "call_digest", "parse_policy", "required"]
