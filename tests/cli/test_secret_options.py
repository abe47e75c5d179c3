"""Secrets on the command line: files and environment preferred, a flag warned about."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from toolmesh.cli import options
from toolmesh.cli.main import build_parser
from toolmesh.errors import ToolmeshError


def parse(*argv: str):
    return build_parser().parse_args(["serve", *argv])


def test_the_gateway_token_from_a_flag_warns_from_a_file_or_the_environment_does_not(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLMESH_GATEWAY_TOKEN", raising=False)
    with caplog.at_level(logging.WARNING, "toolmesh.options"):
        assert options.gateway_token(parse("--token", "flag-value")) == "flag-value"
    assert "process list" in caplog.text and "flag-value" not in caplog.text
    caplog.clear()
    (tmp_path / "t").write_text("  from-file\n")
    with caplog.at_level(logging.WARNING, "toolmesh.options"):
        assert options.gateway_token(parse("--token-file", str(tmp_path / "t"))) == "from-file"
        monkeypatch.setenv("TOOLMESH_GATEWAY_TOKEN", "from-env")
        assert options.gateway_token(parse()) == "from-env"
    assert caplog.text == ""


def test_the_llm_api_key_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "k").write_text("sk-from-file\n")
    assert options.llm_api_key(parse("--api-key-file", str(tmp_path / "k"))) == "sk-from-file"
    assert options.llm_api_key(parse()) is None  # the provider then reads the environment


@pytest.mark.parametrize(("content", "complaint"), [(None, "cannot read --token-file"),
                                                    ("\n", "is empty")])
def test_an_unusable_token_file_is_a_clear_error(tmp_path: Path, content: str | None,
                                                 complaint: str) -> None:
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ToolmeshError, match=complaint):
        options.gateway_token(parse("--token-file", str(path)))
