"""`toolmesh dialogs list` and `show` as a person reads them: times in the machine's local
time (here TZ=Asia/Tokyo, nine hours ahead of the UTC the journal keeps), token counts
labelled, counts with their right plural — against a real `toolmesh serve` and the offline
demo model's joke dialog."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.dialogs.test_embedded_restart import _offered
from tests.processes import run_toolmesh
from tests.servers import toolmesh_serve

TOKYO = {"TZ": "Asia/Tokyo"}


def tokyo(text: str) -> str:
    """An ISO time of the journal in Tokyo's local time, as the commands print it."""
    when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (when.replace(tzinfo=None) - (when.utcoffset() or timedelta())
            + timedelta(hours=9)).strftime("%Y-%m-%d %H:%M:%S")


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_dialogs_list_and_show_label_count_and_localise(tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path) as served:
        await _offered(served.url, "tell-joke")
        # `show` with no id shows the newest dialog: with none yet, it says what to do
        none_yet = await run_toolmesh("dialogs", "show", "-u", served.url)
        assert none_yet[0] != 0 and "no dialogs recorded in workspace 'default': ask the " \
            "agent something first" in none_yet[2], none_yet
        code, _, err = await run_toolmesh("agent", "Tell me a joke about food", "-u",
                                          served.url)
        assert code == 0, err
        code, raw, err = await run_toolmesh("dialogs", "list", "--json", "-u", served.url)
        assert code == 0, err
        [dialog] = json.loads(raw)["dialogs"]
        listed = await run_toolmesh("dialogs", "list", "-u", served.url, extra_env=TOKYO)
        shown = await run_toolmesh("dialogs", "show", dialog["id"], "-u", served.url,
                                   extra_env=TOKYO)
        newest = await run_toolmesh("dialogs", "show", "-u", served.url, extra_env=TOKYO)
    assert listed[0] == 0 and shown[0] == 0, listed[2] + shown[2]
    assert newest == shown
    header, row = listed[1].splitlines()
    assert header.split() == ["ID", "STARTED", "STATUS", "STEPS", "CALLS", "TOKENS", "SECONDS",
                              "QUESTION"]
    assert tokyo(dialog["started"]) in row, (dialog["started"], row)
    tokens = (f"in {dialog['in_token'] or 0} / out {dialog['out_token'] or 0}"
              if dialog.get("in_token") is not None or dialog.get("out_token") is not None
              else "-")
    assert f"  {tokens}  " in row, row
    headline, where = shown[1].splitlines()[:2]
    assert dialog["tool_calls"] == 1
    steps = f"{dialog['steps']} step" + ("" if dialog["steps"] == 1 else "s")
    assert re.fullmatch(rf"dialog {dialog['id']}  \(answer; {steps}, 1 tool call, tokens "
                        rf"{re.escape(tokens)}, [0-9.]+ s\)", headline), headline
    assert where.endswith(f"started {tokyo(dialog['started'])} JST"), where
    assert "1 tool calls" not in shown[1]
