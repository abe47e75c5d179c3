"""The real trustgraph-cli against `toolmesh serve` with no config at all: the joke service
announces itself, so `tg-invoke-agent` gets its joke, while TrustGraph's own config reads
(`tg-show-tools`, `tg-show-config`) show configured items only — there are none."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_agent_cli import JOKE
from tests.compat.test_trustgraph_cli_agent import invoke
from tests.compat.test_trustgraph_cli_config import tg
from tests.servers import toolmesh_serve


async def test_an_announced_tool_answers_the_real_cli_and_config_reads_stay_configured(
        tg_bin: Path, tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path) as served:
        u = ["-u", served.url]
        assert (await invoke(tg_bin, *u, "-q", "Tell me a joke about food")).strip() == JOKE
        assert "tell-joke" not in await tg(tg_bin, "tg-show-tools", *u)
        assert "tell-joke" not in await tg(tg_bin, "tg-show-config", *u)
