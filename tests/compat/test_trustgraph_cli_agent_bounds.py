"""The real `tg-invoke-agent` against `toolmesh serve` on an OpenAI-compatible server that
acts as llama-cpp-python does — it streams no token usage (issue 41): `--show-usage` prints
figures all the same (toolmesh counted them), and an answer the model's limit cut short
prints with the note that says so."""

from __future__ import annotations

from pathlib import Path

from tests.compat.test_trustgraph_cli_llm import tg_run, usage
from tests.llm.openai_server import Answer, OpenAITestServer
from tests.servers import toolmesh_serve


async def test_usage_is_counted_where_the_server_streams_none(tg_bin: Path,
                                                              tmp_path: Path) -> None:
    answer = "Thought: easy\nFinal Answer: It is Paris."
    async with OpenAITestServer(default=Answer(text=answer, usage=False),
                                kind="llama-cpp-python") as llm, \
            toolmesh_serve(tmp_path, "--llm", llm.base_url, "--model", "m",
                           "--tool-calling", "react") as served:
        out, err = await tg_run(tg_bin, "tg-invoke-agent", "-u", served.url,
                                "-q", "What is the capital of France?", "--show-usage")
        counted = [r for r in llm.requests if r.body.get("max_tokens") == 1]
    assert out.strip() == "It is Paris."
    in_token, out_token, model = usage(err)
    # the prompt's tokens as the server counts them, asked once whole; the answer's pieces
    assert in_token > 0 and out_token == len(answer.split())  # a piece a word, here
    assert model == "m" and counted


async def test_a_cut_answer_prints_with_its_note(tg_bin: Path, tmp_path: Path) -> None:
    long = " ".join(f"w{i}" for i in range(300))
    async with OpenAITestServer(default=Answer(text=f"Thought: ok\nFinal Answer: {long}")) \
            as llm, toolmesh_serve(tmp_path, "--llm", llm.base_url, "--model", "m",
                                   "--tool-calling", "react", "--max-answer-tokens", "30") \
            as served:
        out, _ = await tg_run(tg_bin, "tg-invoke-agent", "-u", served.url, "-q", "Go on")
    assert out.startswith("w0 w1") and "w299" not in out
    assert out.rstrip().endswith("the model reached its limit of 30 tokens "
                                 "(--max-answer-tokens).]")
