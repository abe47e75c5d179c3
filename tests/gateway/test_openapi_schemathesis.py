"""Schemathesis against a real ``toolmesh serve``: requests generated from the OpenAPI
document (valid and invalid ones) get no 5xx, and every answer has a status, content type and
body the document declares for its operation."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest

from tests.processes import env
from tests.servers import toolmesh_serve
from toolmesh.gateway.openapi import document

#: what each answer must satisfy; schemathesis' other checks judge API design choices the
#: gateway makes on purpose (extra headers are fine; a plain GET of the WebSocket route is 400)
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_schema_conformance")

# Per-flow routes: `default`, the flow `toolmesh serve` runs (any other answers 404 at once;
# tests/gateway/test_fuzz.py explores flow names). A 504 is a server status but the right
# answer to a generated `X-Timeout: 1e-300`: it is declared, so the conformance checks still
# hold it to the Error schema — the other 5xx stay failures.
CONFIG = """\
[parameters]
"path.flow" = "default"

[checks.not_a_server_error]
expected-statuses = ["2xx", "3xx", "4xx", "504"]
"""


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_generated_requests_get_declared_answers_and_no_server_error(
        tmp_path: Path) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    async with toolmesh_serve(tmp_path) as served:
        # its own process, in tmp_path: its Hypothesis settings and caches stay out of ours
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run",
            served.url + "api/v1/openapi.json", "--checks", ",".join(CHECKS),
            "--phases", "coverage,fuzzing", "--max-examples", "15", "--request-timeout", "10",
            "--warnings", "off", "--no-color",
            cwd=tmp_path, env=env(), stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT)
        out, _ = await asyncio.wait_for(proc.communicate(), 240)
    report = out.decode(errors="replace")
    assert proc.returncode == 0, report  # the report names each failure and how to replay it
    # every operation was exercised (schemathesis leaves out the route it loaded the document
    # from)
    tested = re.search(r"Tested:\s+(\d+)", report)
    operations = sum(len(item) for item in document()["paths"].values())
    assert tested is not None and int(tested.group(1)) >= operations - 1, report
