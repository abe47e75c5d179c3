"""mask_url: what it hides and what it keeps."""

from __future__ import annotations

import pytest

from toolmesh.urls import mask_url, mask_urls_in


@pytest.mark.parametrize(("url", "shown"), [
    ("amqp://guest:guest@127.0.0.1:5672/", "amqp://guest:***@127.0.0.1:5672/"),
    ("http://h/mcp?token=T&x=1", "http://h/mcp?token=***&x=1"),
    ("http://h/mcp?Api_Key=K&apikey=K2&KEY=K3&secret=S&password=P&sig=G",
     "http://h/mcp?Api_Key=***&apikey=***&KEY=***&secret=***&password=***&sig=***"),
    ("http://h/p?q=a%20b&access_token=T#frag", "http://h/p?q=a%20b&access_token=***#frag"),
    ("memory://", "memory://"),
    ("postgresql://root@127.0.0.1/test", "postgresql://root@127.0.0.1/test"),
    ("http://u:p@h:notaport/x", "http://u:***@h:notaport/x"),
])
def test_mask_url(url: str, shown: str) -> None:
    assert mask_url(url) == shown
    assert mask_url(shown) == shown  # masking is idempotent


def test_urls_inside_text() -> None:
    assert mask_urls_in("connect to 'http://u:pw@h/x?key=k' failed") == \
        "connect to 'http://u:***@h/x?key=***' failed"
