"""Reading MCP CallToolResults: every kind of content becomes text, nothing crashes."""

from __future__ import annotations

import base64
from typing import Any

import mcp_types as t
import pytest

from toolmesh.mcp import McpResult, content_text, result_text, to_result

PNG = base64.b64encode(b"\x89PNG" + bytes(66)).decode()  # 70 bytes


def test_text_items_are_joined_and_structured_content_is_the_object() -> None:
    result = t.CallToolResult(content=[t.TextContent(type="text", text="3"),
                                       t.TextContent(type="text", text="(exact)")],
                              structured_content={"result": 3})
    assert to_result(result) == McpResult("3\n(exact)", {"result": 3}, False)


def test_is_error_gives_the_servers_text_and_no_object() -> None:
    result = t.CallToolResult(content=[t.TextContent(type="text", text="no such city")],
                              structured_content={"ignored": True}, is_error=True)
    assert to_result(result) == McpResult("no such city", None, True)
    empty = to_result(t.CallToolResult(content=[], is_error=True))
    assert empty.is_error and empty.text and "without a message" in empty.text


def test_binary_content_is_described_not_dumped() -> None:
    result = t.CallToolResult(content=[
        t.ImageContent(type="image", data=PNG, mime_type="image/png"),
        t.AudioContent(type="audio", data=base64.b64encode(b"RIFF").decode(),
                       mime_type="audio/wav")])
    assert to_result(result).text == "[image: image/png, 70 bytes]\n[audio: audio/wav, 4 bytes]"


def test_resources_and_links() -> None:
    result = t.CallToolResult(content=[
        t.EmbeddedResource(type="resource", resource=t.TextResourceContents(
            uri="file:///notes.txt", mime_type="text/plain", text="the notes")),
        t.EmbeddedResource(type="resource", resource=t.BlobResourceContents(
            uri="file:///logo.png", mime_type="image/png", blob=PNG)),
        t.ResourceLink(type="resource_link", name="report", uri="https://example.com/r.pdf")])
    assert to_result(result).text.splitlines() == [
        "the notes", "[resource: file:///logo.png (image/png, 70 bytes)]",
        "[link: report https://example.com/r.pdf]"]


@pytest.mark.parametrize(("item", "text"), [
    ({"type": "video", "data": "AAAA"}, "[video content]"),
    ({"no": "type"}, "[unknown content]"),
    ({"type": "image", "data": "not base64!", "mimeType": "image/png"},
     "[image: image/png, 11 bytes]"),
    ({"type": "resource", "resource": None}, "[resource: ? (unknown type)]"),
    ({"type": "text", "text": None}, ""),
    (42, "[unknown content]"),
])
def test_odd_content_reads_as_a_placeholder(item: Any, text: str) -> None:
    assert content_text(item) == text


def test_a_result_as_a_plain_dict_reads_too() -> None:
    raw = {"content": [{"type": "text", "text": "hi"}], "structuredContent": {"a": 1},
           "isError": False}
    assert to_result(raw) == McpResult("hi", {"a": 1}, False)
    assert to_result({}) == McpResult(None, None, False)
    assert to_result({"content": "not a list"}).text == "[unknown content]"


def test_the_observation_is_the_text_else_the_json_of_the_object() -> None:
    assert result_text(McpResult("3", {"result": 3})) == "3"
    assert result_text(McpResult(None, {"temp": "21°C"})) == '{"temp": "21°C"}'
    assert result_text(McpResult(None, None)) == ""


def test_with_fastmcp_loaded_a_result_without_structured_content_warns_nothing() -> None:
    """fastmcp, once imported, gives the SDK's v2 types their old camelCase names back, with
    a deprecation warning on each read (an error in this suite): a field that is there but
    empty must not send the reader to its old name (it did, depending on the test order)."""
    import warnings

    pytest.importorskip("fastmcp")
    result = t.CallToolResult(content=[t.ImageContent(type="image", data=PNG,
                                                      mime_type="image/png")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read = to_result(result)
    assert read == McpResult("[image: image/png, 70 bytes]", None, False)
