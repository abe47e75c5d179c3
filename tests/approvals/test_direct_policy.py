"""Whether a direct call (a tool service or an MCP item called around the agent) waits for a
person: the same sources as for the agent's tools, and any tool item that uses the target."""

from __future__ import annotations

import json

from toolmesh.approvals.direct import NEEDS_ANNOTATIONS, mcp_call, tool_service_call

DESTRUCTIVE = {"destructiveHint": True}
READ_ONLY = {"readOnlyHint": True}


def item(**fields: object) -> str:
    return json.dumps(fields)


def mailer_tool(key: str, **fields: object) -> tuple[str, str]:
    return key, item(type="tool-service", service="mailer", **fields)


def test_a_tool_service_waits_when_any_tool_item_that_uses_it_does() -> None:
    tools = [mailer_tool("send"), mailer_tool("send-now", approval="always"),
             ("joke", item(type="tool-service", service="joke-service"))]
    decision = tool_service_call("mailer", tools, default="never")
    assert decision.required and decision.why == 'tool/send-now says "approval": "always"'
    assert not tool_service_call("joke-service", tools, default="never").required


def test_the_operators_default_decides_for_tools_that_say_nothing_and_unused_services() -> None:
    said_never = [mailer_tool("send", approval="never")]
    assert not tool_service_call("mailer", said_never, default="always").required
    quiet = tool_service_call("mailer", [mailer_tool("send")], default="always")
    assert quiet.required and "--approval always" in quiet.why
    unused = tool_service_call("mailer", [], default="always")
    assert unused.required and "--approval always" in unused.why
    assert not tool_service_call("mailer", [], default="never").required


def test_a_policy_stored_around_the_check_asks() -> None:
    assert tool_service_call("mailer", [mailer_tool("send", approval="sometimes")],
                             default="never").required
    # items that are not JSON objects, or of another type, are no tool of the service
    assert not tool_service_call("mailer", [("x", "not json"), ("y", "[1]")],
                                 default="never").required


def test_an_mcp_item_tool_item_then_server_then_annotations_then_default() -> None:
    rm = item(url="http://x/mcp", **{"remote-name": "remove"})
    rm_always = item(url="http://x/mcp", approval="always")
    rm_never = item(url="http://x/mcp", approval="never")
    uses = [("rm", item(type="mcp-tool", **{"mcp-tool": "rm"}))]
    uses_always = [("rm", item(type="mcp-tool", approval="always", **{"mcp-tool": "rm"}))]
    assert mcp_call("rm", rm_never, uses_always, default="never").required  # tool item first
    assert mcp_call("rm", rm_always, uses, default="never").required  # then the server's
    assert not mcp_call("rm", rm_never, uses, default="always").required
    # nothing in config decides: the annotations are needed, then they decide
    assert mcp_call("rm", rm, uses, default="never") is NEEDS_ANNOTATIONS
    assert mcp_call("rm", rm, [], default="never") is NEEDS_ANNOTATIONS
    marked = mcp_call("rm", rm, uses, default="never", annotations=DESTRUCTIVE)
    assert marked.required and "destructiveHint" in marked.why
    assert not mcp_call("rm", rm, uses, default="always", annotations=READ_ONLY).required
    assert mcp_call("rm", rm, [], default="always", annotations=None).required
    assert not mcp_call("rm", rm, [], default="never", annotations=None).required
    # another item's tool items play no part
    other = [("x", item(type="mcp-tool", approval="always", **{"mcp-tool": "other"}))]
    assert not mcp_call("rm", rm_never, other, default="never").required
