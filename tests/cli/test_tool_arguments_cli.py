"""``tg-set-tool --argument name:type:description[:required]``: TrustGraph's three-part form
declares an optional argument; a fourth part marks it required."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.cli.test_config_cli import script
from tests.cli.test_tool_cli import tables
from tests.servers import Served, stored, toolmesh_serve
from toolmesh.cli.http import CliError
from toolmesh.cli.tg_tools import parse_argument


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with toolmesh_serve(tmp_path) as s:
        yield s


@pytest.mark.parametrize(("spec", "argument"), [
    ("date:string:Date (optional, format: YYYY-MM-DD)",
     {"name": "date", "type": "string", "description": "Date (optional, format: YYYY-MM-DD)"}),
    ("id:string:Bank account identifier:required",
     {"name": "id", "type": "string", "description": "Bank account identifier", "required": True}),
    ("t:string:The topic: anything:required",
     {"name": "t", "type": "string", "description": "The topic: anything", "required": True}),
    # ":optional" says so explicitly, and lets a description end in ":required"
    ("t:string:ends in:required:optional",
     {"name": "t", "type": "string", "description": "ends in:required"}),
    ("n:integer::required", {"name": "n", "type": "integer", "description": "", "required": True}),
])
def test_parse_argument(spec: str, argument: dict[str, object]) -> None:
    assert parse_argument(spec) == argument


def test_a_malformed_argument_says_the_form() -> None:
    with pytest.raises(CliError, match=r"is not name:type:description\[:required\]"):
        parse_argument("a:string")


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_tg_set_tool_stores_the_seeds_mcp_tool_with_a_required_argument(
        served: Served) -> None:
    u = ["-u", served.url]
    code, out, err = await script(
        "tg-set-tool", "--id", "get_bank_balance", "--name", "get_bank_balance",
        "--type", "mcp-tool", "--mcp-tool", "get_bank_balance",
        "--description", "Get bank account balance",
        "--argument", "account_id:string:Bank account identifier:required",
        "date:string:Date for balance query (optional, format: YYYY-MM-DD)", *u)
    assert (code, out.strip()) == (0, "Tool set."), err
    assert (await stored(served, "tool/get_bank_balance"))["arguments"] == [
        {"name": "account_id", "type": "string", "description": "Bank account identifier",
         "required": True},
        {"name": "date", "type": "string",
         "description": "Date for balance query (optional, format: YYYY-MM-DD)"}]
    code, out, err = await script("tg-show-tools", *u)
    assert code == 0, err
    (tool,) = tables(out)
    assert tool["arg 0"] == "account_id: string (required)\nBank account identifier"
    assert tool["arg 1"] == "date: string\nDate for balance query (optional, format: YYYY-MM-DD)"
