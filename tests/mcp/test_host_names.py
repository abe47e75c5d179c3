"""One spelling per host before the MCP address check (mcp/host_names.py, mcp/addresses.py):
``localhost.``, IDNA, percent-encoding and the C library's IPv4 spellings are no way round it,
and a public name or address still passes."""

from __future__ import annotations

import pytest

from toolmesh.mcp.addresses import AddressPolicy
from toolmesh.mcp.host_names import canonical_host

#: spelling in a URL -> the host the check looks at
CANONICAL = {
    "localhost.": "localhost",
    "LocalHost.": "localhost",
    "%6c%6f%63%61%6c%68%6f%73%74": "localhost",
    "loc%61lhost.": "localhost",
    "ｌｏｃａｌｈｏｓｔ": "localhost",  # full-width
    "ⓛⓞⓒⓐⓛⓗⓞⓢⓣ": "localhost",  # circled letters
    "local\u200bhost": "localhost",  # a zero-width space IDNA drops
    "localhost\u3002": "localhost",  # an ideographic full stop
    "xn--localhost-": "localhost",  # punycode of plain ASCII
    "127.0.0.1.": "127.0.0.1",
    "127.1": "127.0.0.1",
    "0177.0.0.1": "127.0.0.1",
    "0x7f.0.0.1": "127.0.0.1",
    "0x7f000001": "127.0.0.1",
    "2130706433": "127.0.0.1",
    "127%2e0%2e0%2e1": "127.0.0.1",
    "１２７.０.０.１": "127.0.0.1",
    "0": "0.0.0.0",
    "0xa9fea9fe": "169.254.169.254",
    "::ffff:7f00:1": "::ffff:7f00:1",
    "[0:0:0:0:0:0:0:1]": "::1",
    "fe80::1%25eth0": "fe80::1%eth0",
    "Bücher.Example.": "xn--bcher-kva.example",
    "XN--BCHER-KVA.example": "xn--bcher-kva.example",
    "MCP.Example.ORG.": "mcp.example.org",
    "mcp_server": "mcp_server",
}


@pytest.mark.parametrize(("spelled", "canonical"), CANONICAL.items())
def test_a_host_has_one_spelling(spelled: str, canonical: str) -> None:
    assert canonical_host(spelled) == canonical


@pytest.mark.parametrize("spelled", ["localhost..", ".localhost", "exa mple.com", "a" * 64 + ".com",
                                     "999.1.1.1", "1.2.3.4.5", "xn--zz", "%ff", "fe80::zz"])
def test_what_cannot_be_a_host_is_said_so(spelled: str) -> None:
    with pytest.raises(ValueError, match="not a"):
        canonical_host(spelled)


#: every one must be refused to an item put without admin ("reach": "public")
REFUSED = [
    "localhost", "localhost.", "LOCALHOST.", "foo.localhost", "%6c%6f%63%61%6c%68%6f%73%74",
    "ｌｏｃａｌｈｏｓｔ", "ⓛⓞⓒⓐⓛⓗⓞⓢⓣ", "xn--localhost-", "localhost\u3002",
    "127.0.0.1.", "127.1", "0177.0.0.1", "0x7f000001", "2130706433", "127%2e0%2e0%2e1",
    "１２７.０.０.１", "0", "0.0.0.0.", "10.5", "169.254.169.254.", "0xa9fea9fe",
    "[::1]", "[::ffff:127.0.0.1]", "[::]", "[fe80::1%25eth0]", "[fd00::1]",
    "localhost..", "exa%20mple.com",
]
#: a public name or address passes
PASSES = ["8.8.8.8", "[2001:4860:4860::8888]", "mcp.example.org", "MCP.Example.ORG."]


@pytest.mark.parametrize("host", REFUSED)
async def test_a_private_host_however_spelled_is_refused_to_a_public_item(host: str) -> None:
    refused = await AddressPolicy().check_url(f"http://{host}:8000/mcp", reach="public",
                                              timeout=2)
    assert refused is not None


@pytest.mark.parametrize("host", PASSES)
async def test_a_public_host_passes(host: str) -> None:
    assert await AddressPolicy().check_url(f"https://{host}/mcp", reach="public",
                                           timeout=2) is None


async def test_the_admins_item_may_use_a_private_host_however_spelled() -> None:
    policy = AddressPolicy()
    for host in ("localhost.", "0x7f000001", "[::1]", "%6c%6f%63%61%6c%68%6f%73%74"):
        assert await policy.check_url(f"http://{host}:8000/mcp", reach="any") is None


async def test_the_operators_lists_match_every_spelling() -> None:
    policy = AddressPolicy.parse(deny="MCP.Internal.,127.0.0.1:9000", allow="0x7f000001:8000")
    for url in ("http://mcp.internal/mcp", "http://mcp%2einternal./mcp",
                "http://2130706433:9000/mcp", "http://localhost.:9000/mcp"):
        assert await policy.check_url(url, reach="any", timeout=2) is not None, url
    # the allowed address, however the item spells it, is open to a public item
    for url in ("http://127.0.0.1:8000/mcp", "http://127.1:8000/mcp"):
        assert await policy.check_url(url, reach="public") is None, url
