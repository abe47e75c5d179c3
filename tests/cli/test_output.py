"""toolmesh.cli.output: tables for people and scripts, JSON for --json, colour when it suits."""

from __future__ import annotations

import io
import json
import re

import pytest

from toolmesh.cli.output import (
    Cell,
    color_enabled,
    json_text,
    print_json,
    print_table,
    printable,
    sorted_keys,
    status_cell,
    table,
    width,
)

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Terminal(io.StringIO):
    """A captured stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


ROWS: list[list[str | Cell]] = [
    ["ask", Cell("text-completion", "dim"), status_cell("available"), ""],
    ["tell-joke", Cell("tool-service", "dim"), status_cell("not offered"),
     Cell("tool/tell-joke uses tool service 'joke-service', but there is none", "dim")],
]
PLAIN = (
    "KEY        TYPE             STATUS       REASON\n"
    "ask        text-completion  available\n"
    "tell-joke  tool-service     not offered  tool/tell-joke uses tool service 'joke-service', "
    "but there is none")


def test_a_table_without_colour_is_aligned_text_with_the_last_column_unpadded() -> None:
    assert table(["KEY", "TYPE", "STATUS", "REASON"], ROWS, color=False) == PLAIN


def test_a_table_in_colour_is_the_same_text_with_a_bold_header_and_coloured_statuses() -> None:
    coloured = table(["KEY", "TYPE", "STATUS", "REASON"], ROWS, color=True)
    assert ANSI.sub("", coloured) == PLAIN  # padding sits outside the escapes
    header, ask, joke = coloured.splitlines()
    assert header.startswith("\x1b[1mKEY\x1b[0m        \x1b[1mTYPE\x1b[0m")
    assert "\x1b[32mavailable\x1b[0m" in ask
    assert "\x1b[33mnot offered\x1b[0m" in joke
    assert "\x1b[2mtool-service\x1b[0m" in joke
    assert not ask.endswith(" ")  # an empty last cell leaves no padding behind


def test_right_aligned_columns_and_wide_characters_line_up() -> None:
    out = table(["NAME", "N"], [["日本", "7"], ["e\u0301t\u00e9", "1234"], ["ab", "-"]],
                color=False, right={1})
    assert out.splitlines() == ["NAME     N", "日本     7", "e\u0301t\u00e9   1234", "ab       -"]
    assert [width(line) for line in out.splitlines()] == [10, 10, 10, 10]


def test_control_characters_in_cells_are_shown_escaped() -> None:
    sneaky = "key\x1b[2J\nnext\x9b31m\x7f"
    out = table(["KEY", "X"], [[sneaky, "x"]], color=False)
    assert "\x1b" not in out and "\x9b" not in out and "\x7f" not in out
    assert out.splitlines()[1].startswith("key\\x1b[2J\\nnext\\x9b31m\\x7f")
    assert len(out.splitlines()) == 2  # the line break did not split the row
    assert printable("plain text") == "plain text"
    assert printable("tab\there") == "tab\\there"


def test_a_row_of_the_wrong_length_is_a_bug_said_plainly() -> None:
    with pytest.raises(ValueError, match="row 0 has 1 cells, the header 2"):
        table(["A", "B"], [["only one"]], color=False)


@pytest.mark.parametrize(("environ", "tty", "expected"), [
    ({}, True, True),
    ({}, False, False),
    ({"TERM": "dumb"}, True, False),
    ({"NO_COLOR": "1"}, True, False),
    ({"NO_COLOR": "anything"}, True, False),
    ({"NO_COLOR": ""}, True, True),  # no-color.org: set and not empty
    ({"FORCE_COLOR": "1"}, False, True),
    ({"FORCE_COLOR": "0"}, False, False),
    ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, True, False),
    ({"TOOLMESH_COLOR": "always"}, False, True),
    ({"TOOLMESH_COLOR": "always", "NO_COLOR": "1"}, False, True),  # ours, and explicit
    ({"TOOLMESH_COLOR": "never"}, True, False),
    ({"TOOLMESH_COLOR": "never", "FORCE_COLOR": "1"}, True, False),
    ({"TOOLMESH_COLOR": "auto"}, True, True),
    ({"TOOLMESH_COLOR": "auto"}, False, False),
    ({"TOOLMESH_COLOR": "AUTO", "NO_COLOR": "1"}, True, False),
])
def test_when_there_is_colour(environ: dict[str, str], tty: bool, expected: bool) -> None:
    stream = Terminal() if tty else io.StringIO()
    assert color_enabled(stream, environ=environ) is expected


def test_a_closed_or_odd_stream_gets_no_colour() -> None:
    closed = io.StringIO()
    closed.close()
    assert color_enabled(closed, environ={}) is False
    assert color_enabled(object(), environ={}) is False  # type: ignore[arg-type]


def test_print_table_colours_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR", "TOOLMESH_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    piped, terminal = io.StringIO(), Terminal()
    for stream in (piped, terminal):
        print_table(["KEY", "TYPE", "STATUS", "REASON"], ROWS, stream=stream)
    assert piped.getvalue() == PLAIN + "\n"
    assert "\x1b[" not in piped.getvalue()
    assert "\x1b[1mKEY" in terminal.getvalue()
    assert ANSI.sub("", terminal.getvalue()) == piped.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    quiet = Terminal()
    print_table(["KEY", "TYPE", "STATUS", "REASON"], ROWS, stream=quiet)
    assert quiet.getvalue() == piped.getvalue()


def test_json_is_indented_sorted_unescaped_and_parses_back() -> None:
    data = {"b": [3, 1, 2], "a": {"z": "日本 🙂", "y": None}, "c": "\x9b\x7f\x1b"}
    text = json_text(data)
    assert json.loads(text) == data
    assert text.splitlines()[:3] == ["{", '  "a": {', '    "y": null,']
    assert "日本 🙂" in text  # not \u-escaped
    assert "\x9b" not in text and "\x7f" not in text and "\x1b" not in text
    assert '"\\u009b\\u007f\\u001b"' in text
    assert json_text({"b": 1, "a": 2}, sort_keys=False) == '{\n  "b": 1,\n  "a": 2\n}'
    out = Terminal()
    print_json([{"k": 1}], stream=out)
    assert out.getvalue() == '[\n  {\n    "k": 1\n  }\n]\n'  # plain on a terminal too


def test_sorted_keys_sorts_every_object_and_keeps_list_order() -> None:
    data = {"b": [{"z": 1, "a": 2}, 3], "a": {"y": {"d": 0, "c": 1}}}
    assert json.dumps(sorted_keys(data)) == \
        '{"a": {"y": {"c": 1, "d": 0}}, "b": [{"a": 2, "z": 1}, 3]}'
