"""The gateway makes room in the open-file limit for every connection it may hold."""

from __future__ import annotations

import logging
import resource
from collections.abc import Iterator

import pytest

from toolmesh.gateway.open_files import MARGIN, make_room


@pytest.fixture
def limits() -> Iterator[tuple[int, int]]:
    """The limits as they were, put back afterwards."""
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield before
    resource.setrlimit(resource.RLIMIT_NOFILE, before)


def test_a_low_soft_limit_is_raised_to_fit(limits: tuple[int, int]) -> None:
    _, hard = limits
    if hard != resource.RLIM_INFINITY and hard < 1200 + MARGIN:
        pytest.skip(f"the hard limit here ({hard}) leaves no room to test")
    resource.setrlimit(resource.RLIMIT_NOFILE, (512, hard))
    assert make_room(1152) == 1152 + MARGIN
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 1152 + MARGIN


def test_past_the_hard_limit_it_says_which_flags_to_lower(
        limits: tuple[int, int], caplog: pytest.LogCaptureFixture) -> None:
    soft, hard = limits
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit here")
    with caplog.at_level(logging.WARNING, logger="toolmesh.gateway"):
        assert make_room(hard) == hard  # raised as far as it goes
    assert "--max-connections" in caplog.text and "ulimit -n" in caplog.text


def test_a_limit_that_fits_is_left_alone(limits: tuple[int, int]) -> None:
    soft, _ = limits
    assert make_room(0) == soft
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == limits
