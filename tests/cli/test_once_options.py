"""The options of running each call once: a tool service process gets the dedupe store and
limits its flags name (or none), a class that opted out keeps none, and limits that make no
sense end the command in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.processes import run_toolmesh
from toolmesh import DynamicToolService
from toolmesh.bus.memory import MemoryBus, new_memory_url
from toolmesh.cli.main import build_parser
from toolmesh.cli.once_options import default_dedupe
from toolmesh.cli.serve import build
from toolmesh.tools.dedupe import MemoryDedupe


class Repeatable(DynamicToolService):
    """Harmless to run twice: opts out of the dedupe."""

    dedupe_calls = False

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        return "ok"


async def _built(*argv: str) -> tuple[DynamicToolService, list[Any]]:
    args = build_parser().parse_args(["run", *argv])
    stores: list[Any] = []
    service = await build(argv[0], MemoryBus(new_memory_url()), args, stores, [])
    assert isinstance(service, DynamicToolService)
    return service, stores


async def test_a_tool_service_keeps_its_calls_within_the_flags_limits() -> None:
    service, stores = await _built("joke", "--dedupe-entries", "7", "--dedupe-ttl", "60",
                                   "--dedupe-max-result", "1000", "--dedupe-max-bytes", "5000")
    assert isinstance(service.dedupe, MemoryDedupe) and stores == [service.dedupe]
    limits = service.dedupe.limits
    assert (limits.entries, limits.ttl, limits.max_result, limits.max_bytes) == (
        7, 60.0, 1000, 5000)


async def test_dedupe_off_and_a_class_that_opted_out_keep_nothing() -> None:
    off, _ = await _built("joke", "--dedupe", "off")
    assert off.dedupe is None
    opted_out, _ = await _built("tests.cli.test_once_options:Repeatable", "--topic", "t")
    assert opted_out.dedupe is None


def test_the_shared_store_defaults_to_the_config_stores_postgresql(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLMESH_DEDUPE", raising=False)
    monkeypatch.setenv("TOOLMESH_CONFIG_STORE", "postgresql://u@db/x")
    assert default_dedupe() == "postgresql://u@db/x"
    monkeypatch.setenv("TOOLMESH_CONFIG_STORE", "/var/lib/toolmesh/config.db")
    assert default_dedupe() == "memory"
    monkeypatch.setenv("TOOLMESH_DEDUPE", "off")
    assert default_dedupe() == "off"


async def test_limits_that_make_no_sense_and_unknown_stores_end_the_command(
        tmp_path: Path) -> None:
    code, out, err = await run_toolmesh("run", "joke", "--dedupe-max-result", "2000",
                                        "--dedupe-max-bytes", "1000",
                                        extra_env={"TOOLMESH_DATA_DIR": str(tmp_path)})
    assert code != 0 and "--dedupe-*: dedupe max-result (2000) must not exceed max-bytes " \
        "(1000)" in err, err
    code, out, err = await run_toolmesh("run", "joke", "--dedupe", "redis://u:pw@h",
                                        extra_env={"TOOLMESH_DATA_DIR": str(tmp_path)})
    assert code != 0 and "unsupported dedupe store 'redis://u:***@h'" in err, err
    assert "pw" not in err
