"""The real `tg-invoke-agent` against `toolmesh serve` (offline demo model)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.cli.test_agent_cli import JOKE, served  # noqa: F401  (the fixture)
from tests.forkserver import spawn_script
from tests.servers import Served


async def invoke(bin: Path, *args: str) -> str:
    proc = await spawn_script(
        bin / "tg-invoke-agent", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    assert "Exception" not in text, text
    return text


async def test_tg_invoke_agent_streams_the_answer(tg_bin: Path, served: Served) -> None:  # noqa: F811
    out = await invoke(tg_bin, "-u", served.url, "-q", "Tell me a joke about food")
    assert out.strip() == JOKE


async def test_tg_invoke_agent_verbose_and_without_streaming(tg_bin: Path, served: Served) -> None:  # noqa: F811
    out = await invoke(tg_bin, "-u", served.url, "-q", "Tell me a joke about food", "-v")
    assert "[offline demo model]" in out and JOKE.splitlines()[-1] in out
    out = await invoke(tg_bin, "-u", served.url, "-q", "Tell me a joke about food", "--no-streaming")
    assert JOKE.splitlines()[-1] in out
