"""One spelling for each host an MCP item's URL may name, before any address check.

The address check (:mod:`.addresses`) compared names as written and asked the resolver for
the rest, so a name the resolver here did not know passed: ``localhost.`` (a trailing dot),
``%6c%6f%63%61%6c%68%6f%73%74`` (percent-encoded), ``ｌｏｃａｌｈｏｓｔ`` (full-width, which
IDNA maps to ``localhost``), ``127.0.0.1.``, ``xn--localhost-``. Another resolver — the
operator's, or the one a later connection asks — may well know them. So every host is first
brought to the one spelling a resolver would look up:

* percent-encoding decoded (RFC 3986: ``%6c`` in a host is ``l``; a zone id's ``%25`` too);
* an IPv6 literal (with or without brackets, with its zone id) and every IPv4 spelling the C
  library accepts (``127.1``, ``0x7f000001``, ``2130706433``, ``0177.0.0.1``, a trailing dot)
  written as the address it is;
* a name mapped as IDNA maps it (width, case, ``。`` for ``.``, ignorable characters
  dropped), its ``xn--`` labels decoded and encoded again (``xn--localhost-`` is
  ``localhost``), lower case, without the root's trailing dot;
* ``localhost`` and every name under it are loopback (RFC 6761), whatever the resolver says.

What cannot be brought to such a spelling (an empty label, a space, a label over 63
characters, bad punycode) is not a host name: :class:`ValueError`.
"""

from __future__ import annotations

import codecs
import ipaddress
import re
import socket
from urllib.parse import unquote

__all__ = ["LOOPBACK", "canonical_host", "is_localhost", "literal_address"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: the addresses a ``localhost`` name stands for
LOOPBACK: tuple[IPAddress, ...] = (ipaddress.IPv4Address("127.0.0.1"),
                                   ipaddress.IPv6Address("::1"))

_LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?")
#: labels as inet_aton reads them: decimal, octal (leading 0) or hex (0x)
_NUMERIC_LABEL = re.compile(r"0x[0-9a-f]*|[0-9]+")


def canonical_host(host: str) -> str:
    """``host`` (as a URL names it, brackets or not) in the one spelling of the module
    docstring; :class:`ValueError` if it cannot be a host."""
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if "%" in text:
        try:
            text = unquote(text, errors="strict")
        except UnicodeDecodeError:
            raise ValueError(f"{host!r} is not a host name (its %-encoding is not UTF-8)") \
                from None
    if ":" in text:  # only an IPv6 literal has one
        try:
            return str(ipaddress.IPv6Address(text))
        except ValueError:
            raise ValueError(f"{host!r} is not a host name or address") from None
    if not text.isascii() or "xn--" in text.lower():
        text = _idna(text, host)
    name = text.lower().removesuffix(".")
    address = _ipv4(name)
    if address is not None:
        return str(address)
    labels = name.split(".")
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"{host!r} is not a host name or address")
    if all(_NUMERIC_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"{host!r} is not an IPv4 address, nor a host name")
    return name


def literal_address(host: str) -> IPAddress | None:
    """The address a canonical ``host`` is written as, ``None`` if it is a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def is_localhost(name: str) -> bool:
    """Whether canonical ``name`` is ``localhost`` or a name under it (RFC 6761: loopback)."""
    return name == "localhost" or name.endswith(".localhost")


def _idna(text: str, host: str) -> str:
    """``text`` as IDNA (2003, as the resolver's ``getaddrinfo`` encodes it) maps it, each
    ``xn--`` label decoded and encoded again."""
    try:
        labels = text.encode("idna").decode("ascii").split(".")
        for n, label in enumerate(labels):
            if label.lower().startswith("xn--"):
                decoded = codecs.decode(label[4:].lower().encode("ascii"), "punycode")
                labels[n] = decoded.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError(f"{host!r} is not a host name (IDNA cannot map it)") from None
    return ".".join(labels)


def _ipv4(name: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address ``name`` spells as the C library reads it (``127.1``,
    ``0x7f000001``, ``0177.0.0.1``), ``None`` if it spells none."""
    labels = name.split(".")
    if not 1 <= len(labels) <= 4 or not all(_NUMERIC_LABEL.fullmatch(label)
                                            for label in labels):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(name))
    except OSError:
        return None
