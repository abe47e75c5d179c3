"""How a tool service process announces itself is set by flags (and env), and a bad value
ends the command in one line before anything connects."""

from __future__ import annotations

import pytest

from tests.examples.loading import EXAMPLES
from tests.processes import run_toolmesh

WORDCOUNT = EXAMPLES / "wordcount"


@pytest.mark.parametrize(("args", "env", "code", "says"), [
    (["--announce-ttl", "0.5"], {}, 1, "--announce-ttl must be from 1 to 3600 seconds, not 0.5"),
    (["--announce-ttl", "nan"], {}, 1, "--announce-ttl must be from 1 to 3600 seconds, not nan"),
    ([], {"TOOLMESH_ANNOUNCE_TTL": "soon"}, 2, "argument --announce-ttl: invalid float value"),
    (["-w", " "], {}, 1, "--workspace must not be empty"),
])
async def test_bad_announcement_options_end_in_one_line(args: list[str], env: dict[str, str],
                                                        code: int, says: str) -> None:
    # an unreachable broker: the command must fail on the options, before it connects
    got, out, err = await run_toolmesh("run", "wordtools:WordCount", *args, "--bus",
                                       "amqp://guest:guest@127.0.0.1:1/", extra_env=env,
                                       cwd=WORDCOUNT)
    assert got == code, err
    assert says in err
    assert "Traceback" not in err and out == ""


async def test_the_agent_and_serve_can_turn_announcements_off() -> None:
    for part in (("run", "agent"), ("serve",), ("run", "wordtools:WordCount")):
        code, out, err = await run_toolmesh(*part, "--help", cwd=WORDCOUNT)
        assert code == 0, err
        assert "--no-announcements" in out
