"""The observation size limit: a long result is cut at a character boundary, with a note."""

from __future__ import annotations

from toolmesh.agent.observation import DEFAULT_MAX_OBSERVATION, cut


def test_a_result_within_the_limit_is_kept_whole() -> None:
    assert cut("abc", limit=3) == "abc"
    assert cut("é" * 10, limit=20) == "é" * 10  # 20 bytes of UTF-8


def test_a_longer_result_is_cut_with_a_note_of_how_much() -> None:
    assert cut("x" * 40_000, limit=DEFAULT_MAX_OBSERVATION) == "x" * 32_768 + (
        "\n[... 7,232 of 40,000 bytes cut: the observation limit is 32 KiB. Ask the tool "
        "for less, e.g. a smaller range or page.]")


def test_a_cut_never_splits_a_character() -> None:
    text = cut("é" * 10, limit=5)  # 2 bytes each: the third would straddle the limit
    assert text.startswith("éé\n[... 16 of 20 bytes cut: the observation limit is 5 bytes.")
